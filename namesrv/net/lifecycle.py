"""What a server starts and stops: its listening ports, its periodic timers, and the one stop.

Listening binds the name-server port first, so a failure to bind the metrics port leaves a
server that already answers. The timers run on the server's clock, each guarded, so one failing
call never stops its timer for good. Stopping is GoAway to the clients that use route push, no
new connections, service on through the grace period, then every part closed: only peers that
spoke the extension know GO_AWAY (7004); an upstream client logs an error for it, so it just
gets normal service through the grace period and then a close.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

from twisted.internet import defer, task
from twisted.internet.interfaces import IListeningPort

from namesrv.config import NamesrvConfig, ServerConfig
from namesrv.net import transport
from namesrv.net.hub import ConnectionHub
from namesrv.ops.clock import Clock
from namesrv.ops.metrics import MetricsSource
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand, encode_command
from protocol.push_codec import encode_go_away

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


class Timers:
    """Repeating calls on ``clock``; a call that raises is logged and counted
    (``timer_errors``) and runs again at its next interval."""

    def __init__(self, clock: Clock, counters: Counter[str]) -> None:
        self._clock = clock
        self._counters = counters
        self._loops: list[task.LoopingCall] = []

    def every(self, interval_ms: int, call: Callable[[], object]) -> None:
        """Run ``call`` every ``interval_ms`` from now on (first after one interval)."""

        def guarded() -> None:
            try:
                call()
            except Exception:  # a failing timer must not stop for good
                self._counters["timer_errors"] += 1
                log.exception("error in periodic %s", getattr(call, "__name__", call))

        loop = task.LoopingCall(guarded)
        loop.clock = self._clock  # type: ignore[assignment]
        loop.start(interval_ms / 1000.0, now=False)
        self._loops.append(loop)

    def stop(self) -> None:
        """Stop every timer; one that fails to stop does not keep the others running."""
        for loop in self._loops:
            if not loop.running:
                continue
            try:
                loop.stop()
            except Exception:
                self._counters["shutdown_errors"] += 1
                log.exception("stopping a timer; stopping goes on")


GO_AWAY_REASON = "name server shutting down"


def go_away_frame(config: ServerConfig, grace_ms: int) -> bytes:
    """The oneway GO_AWAY request: the grace left and the name servers to move to."""
    body = encode_go_away(grace_ms, list(config.go_away_alternatives), GO_AWAY_REASON)
    request = RemotingCommand.request(RequestCode.GO_AWAY, body=body, oneway=True)
    return encode_command(request)


class Shutdown:
    """A server's one stop: :meth:`stop` again returns the same Deferred."""

    def __init__(
        self,
        config: ServerConfig,
        hub: ConnectionHub,
        ports: ListeningPorts,
        clock: Clock,
        counters: Counter[str],
    ) -> None:
        self._config = config
        self._hub = hub
        self._ports = ports
        self._clock = clock
        self._counters = counters
        self._stopped: defer.Deferred[None] | None = None

    def stop(
        self, grace_ms: int | None, close_steps: Sequence[Callable[[], object]]
    ) -> defer.Deferred[None]:
        """Send GoAway, stop listening, and after ``grace_ms`` (default
        ``server.shutdown_grace_ms``; 0 with no connection to serve) run ``close_steps`` in
        order; fires once they ran and the ports are closed."""
        if self._stopped is not None:
            return self._stopped
        connections = self._hub.connections
        grace = self._config.shutdown_grace_ms if grace_ms is None else grace_ms
        if not connections:
            grace = 0  # nobody to serve through a grace period
        frame = go_away_frame(self._config, grace)
        told = [conn for conn in connections.values() if conn.speaks_extension]
        for conn in told:
            conn.send(frame)
        log.info(
            "GoAway sent to the connections that use route push: %d of %d; closing in %d ms",
            len(told),
            len(connections),
            grace,
        )
        stopped: defer.Deferred[None] = defer.Deferred()
        self._stopped = stopped
        listening = self._ports.stop_listening()

        def close_all() -> None:
            self._close(close_steps)
            listening.addBoth(lambda _: stopped.callback(None))

        if grace == 0:
            close_all()
        else:
            self._clock.callLater(grace / 1000.0, close_all)
        return stopped

    def _close(self, steps: Sequence[Callable[[], object]]) -> None:
        """Each step runs whatever the one before raised: a stop that fails half-way would
        leave the process running past its grace period."""
        for step in steps:
            try:
                step()
            except Exception:
                self._counters["shutdown_errors"] += 1
                log.exception("error while stopping (%s); stopping goes on", step)
