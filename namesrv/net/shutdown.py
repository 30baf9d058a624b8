"""Stopping a server: GoAway to the clients that use route push, no new connections, service
on through the grace period, then every part closed.

Only peers that spoke the extension know GO_AWAY (7004): an upstream client logs an error for
it, so it just gets normal service through the grace period and then a close.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence

from twisted.internet import defer

from namesrv.config import ServerConfig
from namesrv.net.hub import ConnectionHub
from namesrv.net.ports import ListeningPorts
from namesrv.ops.clock import Clock
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand, encode_command
from protocol.push_codec import encode_go_away

log = logging.getLogger(__name__)

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
