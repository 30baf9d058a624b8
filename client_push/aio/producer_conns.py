"""The asyncio producer's connections to brokers: one kept send connection per broker address,
and the detector's probe connections.

asyncio glue; what a probe is and what a GoAway announces are the pure
``client_push.producer.broker_wire``'s, as for the Twisted producer. Concurrent sends to a
broker without a connection share one connect, which is dropped when every one of them has
been cancelled. A broker's GoAway (7004, oneway) retires its send connection: new requests
open a fresh one, those in flight finish on the old one (closed once they have), and the owner
is told so it keeps new sends off that broker for the grace period. A cancelled request takes
its table entry and timer with it (``RemotingConnection``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from client_push.aio.clock import Clock
from client_push.aio.remoting import RemotingConnection
from client_push.config import split_addr
from client_push.errors import ConnectionLostError, RequestTimeoutError
from client_push.producer.broker_wire import (
    GoAwayHandler,
    KeptConnections,
    ProberBook,
    go_away_grace,
    is_go_away,
    probe_request,
    probe_says_going_away,
)
from protocol.frame import RemotingCommand

log = logging.getLogger("client_push.producer.broker_conns")


async def open_connection(
    loop: asyncio.AbstractEventLoop,
    clock: Clock,
    addr: str,
    timeout_ms: int,
    max_frame_size: int,
    on_request: Callable[[RemotingConnection, RemotingCommand], RemotingCommand | None],
) -> RemotingConnection:
    """A connection to the broker at ``addr``; ``ConnectionLostError`` when none is made
    within ``timeout_ms`` (the loop's own deadline: it bounds real socket work)."""
    host, port = split_addr(addr)
    try:
        _, conn = await asyncio.wait_for(
            loop.create_connection(
                lambda: RemotingConnection(loop, clock, max_frame_size, on_request, label=addr),
                host,
                port,
            ),
            max(timeout_ms, 1) / 1000.0,
        )
    except (TimeoutError, OSError) as exc:
        raise ConnectionLostError(
            f"cannot connect to broker {addr}: {type(exc).__name__}: {exc}"
        ) from None
    return conn


async def kept_connection(
    conns: KeptConnections[RemotingConnection],
    loop: asyncio.AbstractEventLoop,
    clock: Clock,
    addr: str,
    timeout_ms: int,
    max_frame_size: int,
    on_request: Callable[[RemotingConnection, RemotingCommand], RemotingCommand | None],
    counters: Counter[str],
) -> RemotingConnection:
    """A new connection to ``addr``, kept in ``conns`` until it closes."""
    conn = await open_connection(loop, clock, addr, timeout_ms, max_frame_size, on_request)
    counters["connections_opened"] += 1
    if conns.stopped:
        conn.close()
        raise ConnectionLostError("producer stopped")
    conns.keep(addr, conn)
    conn.lost.add_done_callback(lambda _: conns.forget(addr, conn))
    return conn


@dataclass(eq=False, slots=True)
class _Connect:
    task: asyncio.Task[RemotingConnection]
    callers: int = 0


class BrokerConnections:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        on_go_away: GoAwayHandler,
        *,
        max_frame_size: int = 16 * 1024 * 1024,
        honour_go_away: bool = True,
    ) -> None:
        self._loop = loop
        self._clock = clock
        self._on_go_away = on_go_away
        self._max_frame_size = max_frame_size
        self._honour_go_away = honour_go_away
        self._conns: KeptConnections[RemotingConnection] = KeptConnections()
        self._connecting: dict[str, _Connect] = {}
        self._retired: set[RemotingConnection] = set()
        self.counters: Counter[str] = Counter()

    @property
    def connections(self) -> int:
        return len(self._conns)

    def outstanding(self) -> dict[str, int]:
        """Requests in flight, connects under way (with their callers), retired connections."""
        conns = [*self._conns.values(), *self._retired]
        return {
            "requests": sum(conn.pending for conn in conns),
            "connecting": len(self._connecting),
            "connect_callers": sum(c.callers for c in self._connecting.values()),
            "retired": len(self._retired),
        }

    async def request(self, addr: str, cmd: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send on the broker's connection (opened within ``timeout_ms`` if needed); raises
        ``ConnectionLostError`` (no connection) or ``RequestTimeoutError``."""
        started = self._clock.time()
        conn = await self._connection(addr, timeout_ms)
        left = timeout_ms - int((self._clock.time() - started) * 1000)
        if left <= 0:
            raise RequestTimeoutError(f"connecting to {addr} took the whole {timeout_ms} ms")
        try:
            return await conn.request(cmd, left)
        finally:
            self._close_if_drained(conn)

    async def oneway(self, addr: str, cmd: RemotingCommand, timeout_ms: int) -> None:
        """Returns once the request is written (connecting first if needed)."""
        conn = await self._connection(addr, timeout_ms)
        if not conn.connected:
            raise ConnectionLostError(f"connection to {addr} closed before the oneway send")
        conn.oneway(cmd)

    def retain(self, addrs: set[str]) -> None:
        """Close the connections of brokers no longer in any held route."""
        for conn in self._conns.not_in(addrs):
            self._retire(conn)
            self.counters["connections_dropped"] += 1

    async def stop(self) -> None:
        for connect in list(self._connecting.values()):
            connect.task.cancel()
        conns = [*self._conns.stop(), *self._retired]
        self._retired.clear()
        for conn in conns:
            conn.close()
        await asyncio.gather(*(c.lost for c in conns if c.connected), return_exceptions=True)

    # -- connections ---------------------------------------------------------------------------

    async def _connection(self, addr: str, timeout_ms: int) -> RemotingConnection:
        if self._conns.stopped:
            raise ConnectionLostError("producer stopped")
        conn = self._conns.get(addr)
        if conn is not None and conn.connected:
            return conn
        connect = self._connecting.get(addr)
        if connect is None:
            connect = _Connect(self._loop.create_task(self._open(addr, timeout_ms)))
            self._connecting[addr] = connect
            connect.task.add_done_callback(lambda _: self._connect_over(addr, connect))
        connect.callers += 1
        try:
            return await asyncio.shield(connect.task)
        finally:
            connect.callers -= 1
            if connect.callers == 0 and not connect.task.done():
                connect.task.cancel()  # every caller gave up: so does the connect

    def _connect_over(self, addr: str, connect: _Connect) -> None:
        if self._connecting.get(addr) is connect:
            del self._connecting[addr]
        if not connect.task.cancelled() and connect.task.exception() is not None:
            self.counters["connect_failures"] += 1

    async def _open(self, addr: str, timeout_ms: int) -> RemotingConnection:
        conn = await kept_connection(
            self._conns,
            self._loop,
            self._clock,
            addr,
            timeout_ms,
            self._max_frame_size,
            self._on_request,
            self.counters,
        )
        conn.lost.add_done_callback(lambda _: self._retired.discard(conn))
        return conn

    def _retire(self, conn: RemotingConnection) -> None:
        """No new requests go to ``conn``; it closes once those in flight are over."""
        self._retired.add(conn)
        self._close_if_drained(conn)

    def _close_if_drained(self, conn: RemotingConnection) -> None:
        if conn in self._retired and conn.pending == 0:
            self._retired.discard(conn)
            conn.close()

    # -- GoAway ---------------------------------------------------------------------------------

    def _on_request(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        if not is_go_away(cmd):
            return None
        self.counters["go_away_received"] += 1
        if not self._honour_go_away:
            return None
        grace = go_away_grace(cmd, conn.label, self.counters)
        addr = conn.label
        if self._conns.forget(addr, conn):
            self._retire(conn)
        log.info("broker %s is going away (grace %d ms)", addr, grace)
        self._on_go_away(addr, grace)
        return None


class BrokerProber(ProberBook[RemotingConnection]):
    """The detector's probes: one kept connection per broker address, reopened when lost; at
    most one probe in flight per address."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        on_go_away: GoAwayHandler,
        *,
        max_frame_size: int = 16 * 1024 * 1024,
    ) -> None:
        super().__init__(on_go_away)
        self._loop = loop
        self._clock = clock
        self._max_frame_size = max_frame_size

    async def probe(self, addr: str, topic: str, timeout_ms: int) -> bool:
        """True when the broker answered within ``timeout_ms`` (connecting included), False
        otherwise; never raises but ``CancelledError``. A probe of an address already being
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
        except (ConnectionLostError, RequestTimeoutError) as exc:
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
            self._conns,
            self._loop,
            self._clock,
            addr,
            timeout_ms,
            self._max_frame_size,
            self._on_request,
            self.counters,
        )
