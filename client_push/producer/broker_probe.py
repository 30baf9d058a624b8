"""The active detector's wire side: probing brokers over long-lived connections.

Written once over the runtime. One connection per broker address, kept between rounds and
reopened when lost (upstream's detector reuses its channels the same way); at most one probe
in flight per address. A probe is a GET_MAX_OFFSET of queue 0 of a topic the broker serves,
the request upstream's detector sends: any answer within the timeout, error codes included,
means the broker is reachable. A GoAway from a broker (code 7004, or a response with code
1500) is passed on and its connection closed; the next round opens a fresh one.
"""

from __future__ import annotations

import logging
from collections import Counter

from client_push.errors import ConnectionLostError, RequestsInFlightError, RequestTimeoutError
from client_push.producer.broker_conns import kept_connection
from client_push.producer.broker_wire import (
    GoAwayHandler,
    KeptConnections,
    ProbesInFlight,
    go_away_grace,
    is_go_away,
    probe_request,
    probe_says_going_away,
)
from client_push.runtime.interface import Runtime
from client_push.wire.remoting import ConnectionBounds, RemotingConnection
from protocol.frame import RemotingCommand
from protocol.paced_log import PacedLog

log = logging.getLogger("client_push.producer.broker_probe")


class BrokerProber:
    def __init__(
        self,
        runtime: Runtime,
        on_go_away: GoAwayHandler,
        *,
        bounds: ConnectionBounds | None = None,
    ) -> None:
        self._on_go_away = on_go_away
        self._conns: KeptConnections[RemotingConnection] = KeptConnections()
        self.counters: Counter[str] = Counter()
        self._in_flight = ProbesInFlight(self.counters)
        self._runtime = runtime
        self._bounds = bounds or ConnectionBounds()
        self._paced = PacedLog(log, lambda: runtime.clock.time(), burst=1)

    async def probe(self, addr: str, topic: str, timeout_ms: int) -> bool:
        """True when the broker answered within ``timeout_ms`` (connecting included), False
        otherwise; never raises but on cancellation. A probe of an address already being
        probed is skipped (False)."""
        if not self._in_flight.begin(addr, self._conns.stopped):
            return False
        ok = False
        try:
            ok = await self._probe(addr, topic, timeout_ms)
        finally:
            self._in_flight.end(addr, ok)
        return ok

    async def _probe(self, addr: str, topic: str, timeout_ms: int) -> bool:
        try:
            conn = await self._connection(addr, timeout_ms)
            response = await conn.request(probe_request(topic), timeout_ms)
        except (ConnectionLostError, RequestTimeoutError, RequestsInFlightError) as exc:
            log.debug("probe of broker %s failed: %s: %s", addr, type(exc).__name__, exc)
            return False
        if probe_says_going_away(response):
            self._go_away(conn, addr, 0)
            return False
        return True

    async def _connection(self, addr: str, timeout_ms: int) -> RemotingConnection:
        conn = self._conns.get(addr)
        if conn is not None and conn.connected:
            return conn
        return await kept_connection(
            self._runtime,
            self._conns,
            addr,
            timeout_ms,
            self._bounds,
            self._on_request,
            self.counters,
            self._paced,
        )

    @property
    def connections(self) -> int:
        return len(self._conns)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def retain(self, addrs: set[str]) -> None:
        """Close the connections of brokers no longer probed."""
        for conn in self._conns.not_in(addrs):
            conn.close()
            self.counters["connections_closed"] += 1

    def stop(self) -> None:
        for conn in self._conns.stop():
            conn.close()

    # -- a broker's GoAway ---------------------------------------------------------------------

    def _on_request(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        if is_go_away(cmd):
            self._go_away(conn, conn.label, go_away_grace(cmd, conn.label, self.counters))
        return None

    def _go_away(self, conn: RemotingConnection, addr: str, grace_ms: int) -> None:
        """The broker is going away: its connection is closed (the next round opens a fresh
        one) and the owner told."""
        self.counters["go_away_received"] += 1
        log.info("broker %s is going away (grace %d ms)", addr, grace_ms)
        self._conns.forget(addr, conn)
        conn.close()
        self._on_go_away(addr, grace_ms)
