"""The server's listening ports: the name-server port and, when configured, ``/metrics``.

Listening binds the name-server port first, so a failure to bind the metrics port leaves a
server that already answers; stopping stops both and fires once both are closed.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, cast

from twisted.internet import defer
from twisted.internet.interfaces import IListeningPort

from namesrv.config import NamesrvConfig
from namesrv.net import transport
from namesrv.net.hub import ConnectionHub
from namesrv.ops.clock import Clock
from namesrv.ops.metrics import MetricsSource

log = logging.getLogger(__name__)


class ListeningPorts:
    """Binds and unbinds the ports of one server."""

    def __init__(
        self, reactor: Any, hub: ConnectionHub, counters: Counter[str], clock: Clock
    ) -> None:
        self._reactor = reactor
        self._hub = hub
        self._counters = counters
        self._clock = clock
        self.main: IListeningPort | None = None
        self.metrics: IListeningPort | None = None

    def listen(self, config: NamesrvConfig, stats_source: MetricsSource) -> IListeningPort:
        """Listen on ``server.listen``; on the lean reactor, hold answers for one burst a poll;
        then serve ``/metrics`` from ``stats_source`` (``stats()``) when ``metrics.listen``
        names an address."""
        self.main = transport.listen(
            self._reactor,
            config.server,
            self._hub,
            self._counters,
            clock=self._clock,
            peer_log=self._hub.peer_log,
        )
        if hasattr(self._reactor, "after_dispatch"):  # the lean reactor: answers go in bursts
            self._hub.hold_output_while_dispatching(self._reactor)
        if config.metrics.listen:
            from namesrv.net.metrics_http import listen_metrics

            self.metrics = listen_metrics(self._reactor, config.metrics.listen, stats_source)
        return self.main

    def announce(self, config: NamesrvConfig, epoch: str) -> None:
        """The line that says the server of ``epoch`` serves: where, and how it runs."""
        log.info(
            "name server listening on %s (epoch %s, push %s, tls %s, acl %s)",
            self.address(),
            epoch,
            "on" if config.push.enabled else "off",
            config.server.tls,
            "on" if config.acl.enabled else "off",
        )

    def address(self) -> str | None:
        """``HOST:PORT`` the name-server port is bound to (IPv6 in brackets); None before
        :meth:`listen`."""
        if self.main is None:
            return None
        bound: Any = self.main.getHost()  # type: ignore[misc]
        host = f"[{bound.host}]" if ":" in bound.host else bound.host
        return f"{host}:{bound.port}"

    def stop_listening(self) -> defer.Deferred[None]:
        """Stop accepting on every port; fires when all are closed."""
        closing = [
            defer.maybeDeferred(cast(Any, port).stopListening)
            for port in (self.main, self.metrics)
            if port is not None
        ]
        return defer.gatherResults(closing).addCallback(lambda _: None)
