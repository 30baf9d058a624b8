"""A producer's connections to brokers: one kept send connection per broker address, reused.

Written once over the runtime; what a probe is and what a GoAway announces are the pure
``broker_wire``'s. Concurrent sends to a broker without a connection share one connect, which
is dropped when every one of them has been cancelled. A broker's GoAway (7004, oneway) retires
its send connection: new requests open a fresh one, those in flight finish on the old one
(closed once they have), and the owner is told so it keeps new sends off that broker for the
grace period. A cancelled request takes its table entry and timer with it.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from client_push.errors import ConnectionLostError, RequestTimeoutError
from client_push.producer.broker_wire import (
    GoAwayHandler,
    KeptConnections,
    go_away_grace,
    is_go_away,
)
from client_push.runtime.interface import Future, Runtime, Task, fail, settle
from client_push.wire.remoting import (
    ConnectionBounds,
    Deadline,
    RemotingConnection,
    RequestHandler,
    close_within,
)
from protocol.frame import RemotingCommand
from protocol.paced_log import PacedLog

log = logging.getLogger("client_push.producer.broker_conns")


async def kept_connection(
    runtime: Runtime,
    conns: KeptConnections[RemotingConnection],
    addr: str,
    timeout_ms: int,
    bounds: ConnectionBounds,
    on_request: RequestHandler,
    counters: Counter[str],
    paced: PacedLog,
) -> RemotingConnection:
    """A new connection to ``addr``, kept in ``conns`` until it closes."""
    conn = RemotingConnection(runtime, bounds, on_request, label=addr, paced=paced)
    try:
        await conn.open(addr, timeout_ms)
    except ConnectionLostError as exc:
        raise ConnectionLostError(f"cannot connect to broker {addr}: {exc}") from None
    counters["connections_opened"] += 1
    if conns.stopped:
        conn.close()
        raise ConnectionLostError("producer stopped")
    conns.keep(addr, conn)
    conn.lost.add_done_callback(lambda _: conns.forget(addr, conn))
    return conn


@dataclass(eq=False, slots=True)
class _Connect:
    """One connect under way, shared by the sends waiting for it."""

    waiters: list[Future[RemotingConnection]]
    task: Task | None = None

    def finish(self, outcome: RemotingConnection | Exception) -> None:
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if isinstance(outcome, Exception):
                fail(waiter, outcome)
            else:
                settle(waiter, outcome)


class BrokerConnections:
    def __init__(
        self,
        runtime: Runtime,
        on_go_away: GoAwayHandler,
        *,
        bounds: ConnectionBounds | None = None,
        honour_go_away: bool = True,
        close_timeout_ms: int = 3_000,
    ) -> None:
        self._runtime = runtime
        self._on_go_away = on_go_away
        self._bounds = bounds or ConnectionBounds()
        self._honour_go_away = honour_go_away
        self._close_timeout_ms = close_timeout_ms
        self._conns: KeptConnections[RemotingConnection] = KeptConnections()
        self.paced = PacedLog(log, lambda: runtime.clock.time(), burst=1)
        """One pace for the warnings of every connection, reopened ones included."""
        self._connecting: dict[str, _Connect] = {}
        self._retired: set[RemotingConnection] = set()
        self.counters: Counter[str] = Counter()

    @property
    def connections(self) -> int:
        return len(self._conns)

    def values(self) -> list[RemotingConnection]:
        return self._conns.values()

    def outstanding(self) -> dict[str, int]:
        """Requests in flight, connects under way (with their callers), retired connections."""
        conns = [*self._conns.values(), *self._retired]
        return {
            "requests": sum(conn.pending for conn in conns),
            "request_bytes": sum(conn.pending_bytes for conn in conns),
            "connecting": len(self._connecting),
            "connect_callers": sum(len(c.waiters) for c in self._connecting.values()),
            "retired": len(self._retired),
        }

    async def request(self, addr: str, cmd: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send on the broker's connection (opened within ``timeout_ms`` if needed); raises
        ``ConnectionLostError`` (no connection) or ``RequestTimeoutError``."""
        clock = self._runtime.clock
        started = clock.time()
        conn = await self._connection(addr, timeout_ms)
        left = timeout_ms - int((clock.time() - started) * 1000)
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

    async def stop(self, deadline: Deadline | None = None) -> None:
        """Close every connection; returns by ``deadline`` (default: ``close_timeout_ms`` from
        now) whatever the brokers do."""
        if deadline is None:
            deadline = Deadline(self._runtime, self._close_timeout_ms)
        for connect in list(self._connecting.values()):
            if connect.task is not None:
                connect.task.cancel()
            connect.finish(ConnectionLostError("producer stopped"))
        self._connecting.clear()
        conns = [*self._conns.stop(), *self._retired]
        self._retired.clear()
        await close_within(self._runtime, conns, deadline)

    # -- connections ---------------------------------------------------------------------------

    async def _connection(self, addr: str, timeout_ms: int) -> RemotingConnection:
        if self._conns.stopped:
            raise ConnectionLostError("producer stopped")
        conn = self._conns.get(addr)
        if conn is not None and conn.connected:
            return conn
        connect = self._connecting.get(addr)
        if connect is None:
            connect = _Connect([])
            self._connecting[addr] = connect
        # Each caller waits on a future of its own: cancelling one leaves the shared connect.
        mine: Future[RemotingConnection] = self._runtime.future()
        connect.waiters.append(mine)
        if connect.task is None:
            connect.task = self._runtime.spawn(self._open(addr, timeout_ms, connect))
        try:
            return await mine
        finally:
            if mine in connect.waiters:
                connect.waiters.remove(mine)
                if not connect.waiters:  # every caller gave up: so does the connect
                    if self._connecting.get(addr) is connect:
                        del self._connecting[addr]
                    if connect.task is not None:
                        connect.task.cancel()

    async def _open(self, addr: str, timeout_ms: int, connect: _Connect) -> None:
        try:
            conn = await kept_connection(
                self._runtime,
                self._conns,
                addr,
                timeout_ms,
                self._bounds,
                self._on_request,
                self.counters,
                self.paced,
            )
        except self._runtime.cancelled_error:
            raise
        except Exception as exc:
            self.counters["connect_failures"] += 1
            if self._connecting.get(addr) is connect:
                del self._connecting[addr]
            connect.finish(exc)
            return
        if self._connecting.get(addr) is connect:
            del self._connecting[addr]
        conn.lost.add_done_callback(lambda _: self._retired.discard(conn))
        connect.finish(conn)

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
