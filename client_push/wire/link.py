"""The connection to the chosen name server: connect, reconnect with backoff, move on GoAway.

Written once over the runtime. The rules (which connection serves, when a left one closes) are
the pure ``link_state``'s, the pick the ``NameServerSelector``'s, the spacing of reconnects
``Backoff``'s. The owner sees three events (connected, disconnected, switching away) and the
name server's requests (``server_request``: the link answers them), and makes one call
(``request``), which waits for a connection when there is none and retries once on a new
connection when a server answers GO_AWAY (1500), as upstream's
``enableReconnectForGoAway``. A request whose caller is cancelled leaves no waiter, timer or
table entry behind. ``stop`` returns within ``close_timeout_ms`` whatever the servers do.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Awaitable, Sequence
from typing import Any

from client_push.config import ClientConfig, split_addr
from client_push.errors import ClientStoppedError, RequestsInFlightError, RequestTimeoutError
from client_push.runtime.interface import Future, Runtime, Task, Tls, fail, settle
from client_push.wire.backoff import Backoff
from client_push.wire.link_state import LinkOwner, LinkState
from client_push.wire.nameserver_selector import NameServerSelector
from client_push.wire.remoting import (
    ConnectionBounds,
    Deadline,
    RemotingConnection,
    close_within,
)
from client_push.wire.request_signing import request_signer, signed
from client_push.wire.timer import Timer
from protocol.codes import ResponseCode
from protocol.frame import RemotingCommand
from protocol.paced_log import PacedLog

log = logging.getLogger("client_push.wire.connection")


def client_bounds(config: ClientConfig) -> ConnectionBounds:
    return ConnectionBounds(
        max_frame_size=config.max_frame_size,
        max_requests=config.max_requests_in_flight,
        max_request_bytes=config.max_request_bytes_in_flight,
        write_buffer_bytes=config.write_buffer_bytes,
        max_unprocessed_input_bytes=config.max_unprocessed_input_bytes,
    )


class NameServerLink:
    """``LinkState`` carried out: sockets, the reconnect timer, waiting requests."""

    def __init__(
        self,
        config: ClientConfig,
        runtime: Runtime,
        rng: random.Random,
        owner: LinkOwner[RemotingConnection],
    ) -> None:
        self._config = config
        self._runtime = runtime
        self._owner = owner
        self._bounds = client_bounds(config)
        self._paced = PacedLog(log, lambda: runtime.clock.time(), burst=1)
        self.selector = NameServerSelector(
            config.namesrv_addrs, rng, move_interval_ms=config.warm_move_interval_ms
        )
        self._signer = request_signer(config, lambda: int(runtime.clock.time() * 1000))
        self._state: LinkState[RemotingConnection] = LinkState(
            self.selector, Backoff(config.reconnect_initial_ms, config.reconnect_max_ms, rng)
        )
        self.counters: Counter[str] = Counter()
        """What the connections met, over all of them (``wire.*`` in the client's stats)."""
        self._connecting: dict[str, Task] = {}
        self._retry = Timer(runtime, self._connect)
        self._waiters: list[Future[RemotingConnection]] = []

    # -- state -----------------------------------------------------------------------------

    @property
    def current(self) -> RemotingConnection | None:
        return self._state.current

    @property
    def addr(self) -> str:
        """The name server requests go to (or will, once connected)."""
        return self._state.target

    @property
    def connections(self) -> set[RemotingConnection]:
        """Every open connection: the current one and those being left."""
        return self._state.open

    @property
    def connects(self) -> int:
        return self._state.connects

    @property
    def connect_failures(self) -> int:
        return self._state.connect_failures

    @property
    def waiting(self) -> int:
        """Requests waiting for a connection to come up."""
        return len(self._waiters)

    @property
    def reconnect_pending(self) -> bool:
        return self._retry.active

    def is_current(self, conn: RemotingConnection) -> bool:
        return conn is self._state.current

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._connect()

    async def stop(self, deadline: Deadline | None = None) -> None:
        """Close every connection; pending requests fail with ``ConnectionLostError``. Returns
        by ``deadline`` (default: ``close_timeout_ms`` from now): a connection not closed by
        then is aborted."""
        if deadline is None:
            deadline = Deadline(self._runtime, self._config.close_timeout_ms)
        self._retry.cancel()
        conns = list(self._state.stop())
        for task in list(self._connecting.values()):
            task.cancel()
        self._connecting.clear()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            fail(waiter, ClientStoppedError("route client stopped"))
        await close_within(self._runtime, conns, deadline)

    def update_addrs(self, addrs: Sequence[str]) -> None:
        """A new name-server list; a changed list moves the client."""
        for addr in addrs:
            split_addr(addr)
        if self.selector.update(addrs):
            self._move(going_away=False)

    # -- requests ----------------------------------------------------------------------------

    async def request(
        self, cmd: RemotingCommand, timeout_ms: int | None = None, *, go_away_retry: bool = True
    ) -> RemotingCommand:
        """Send on the current connection, waiting up to the timeout for one to come up."""
        timeout = timeout_ms or self._config.request_timeout_ms
        conn = await self._usable(timeout)
        response = await self.send_on(conn, cmd, timeout)
        if response.code != ResponseCode.GO_AWAY or not go_away_retry:
            return response
        log.info("%s answered GO_AWAY; retrying request code %d elsewhere", conn.label, cmd.code)
        self.go_away(conn, (), still_serving=False)
        return await self.request(cmd, timeout_ms, go_away_retry=False)

    async def send_on(
        self, conn: RemotingConnection, cmd: RemotingCommand, timeout_ms: int | None = None
    ) -> RemotingCommand:
        """Send on one given connection (say, a last UNSUBSCRIBE on the one being left)."""
        return await self.send_now(conn, cmd, timeout_ms)

    def send_now(
        self, conn: RemotingConnection, cmd: RemotingCommand, timeout_ms: int | None = None
    ) -> Awaitable[RemotingCommand]:
        """``send_on``, written before this returns: a connection being left, closed once its
        requests are done, still carries it though the awaiting task runs later."""
        answer = conn.request(
            signed(self._signer, cmd), timeout_ms or self._config.request_timeout_ms
        )
        return self._answered_on(conn, answer)

    async def _answered_on(
        self, conn: RemotingConnection, answer: Awaitable[RemotingCommand]
    ) -> RemotingCommand:
        try:
            return await answer
        finally:
            self._maybe_close_drained(conn)

    async def _usable(self, timeout_ms: int) -> RemotingConnection:
        if self._state.stopped:
            raise ClientStoppedError("route client stopped")
        conn = self._state.usable()
        if conn is not None:
            return conn
        if len(self._waiters) >= self._bounds.max_requests:
            raise RequestsInFlightError(
                f"{len(self._waiters)} requests already wait for a connection to {self.addr}: "
                f"at most {self._bounds.max_requests}"
            )
        waiter: Future[RemotingConnection] = self._runtime.future()
        self._waiters.append(waiter)

        def expire() -> None:
            fail(
                waiter, RequestTimeoutError(f"no connection to {self.addr} within {timeout_ms} ms")
            )

        timer = self._runtime.clock.call_later(timeout_ms / 1000.0, expire)
        try:
            return await waiter
        finally:
            timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    # -- GoAway and switching --------------------------------------------------------------

    def server_up(self, conn: RemotingConnection, uptime_ms: int, warming_up: bool) -> bool:
        """The server behind ``conn`` said how long it has been up and whether it is warming
        up; True when the client moves to a server up longer (``NameServerSelector``)."""
        if conn is not self._state.current:
            return False
        now_ms = int(self._runtime.clock.time() * 1000)
        target = self.selector.server_up(conn.label, uptime_ms, warming_up, now_ms)
        if target is None:
            return False
        log.info(
            "name server %s is warming up (up %d ms); moving to %s, up longer",
            conn.label,
            uptime_ms,
            target,
        )
        self._move(going_away=False)
        return True

    def go_away(
        self, conn: RemotingConnection, alternatives: Sequence[str], *, still_serving: bool = True
    ) -> None:
        """The server behind ``conn`` is stopping: move new requests elsewhere.

        A oneway GO_AWAY promises service for a grace period, so until another connection is
        up the old one still takes requests (``still_serving``); a GO_AWAY *answer* (1500)
        refuses them, so that connection only finishes what it has in flight.
        """
        if self._state.go_away(conn, alternatives):
            self._move(going_away=True, fallback=still_serving)

    def _move(self, *, going_away: bool, fallback: bool = False) -> None:
        old = self._state.leave(fallback=fallback)
        if old is not None:
            self._owner.on_switching(old, old.label, going_away=going_away)
            self._maybe_close_drained(old)
        self._retry.cancel()
        self._connect()

    def _maybe_close_drained(self, conn: RemotingConnection) -> None:
        """A connection switched away from closes once its in-flight requests are done."""
        if self._state.drained(conn):
            conn.close()

    # -- connecting ----------------------------------------------------------------------------

    def _connect(self) -> None:
        if self._state.stopped or self.selector.current in self._connecting:
            return
        addr = self._state.connecting()
        self._connecting[addr] = self._runtime.spawn(self._open(addr))

    async def _open(self, addr: str) -> None:
        cfg = self._config
        conn = RemotingConnection(
            self._runtime,
            self._bounds,
            self._serve,
            label=addr,
            paced=self._paced,
            counters=self.counters,
        )
        tls = Tls(cfg.tls_ca_file) if cfg.tls else None
        try:
            await conn.open(addr, cfg.request_timeout_ms, tls)
        except self._runtime.cancelled_error:
            raise
        except Exception as exc:
            self._connecting.pop(addr, None)
            self._connect_failed(addr, exc)
            return
        self._connecting.pop(addr, None)
        self._connected(conn, addr)

    def _serve(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        """The answer to a request of the name server: SUCCESS once the owner served it; None
        (REQUEST_CODE_NOT_SUPPORTED) for a code it does not serve."""
        if not self._owner.server_request(conn, cmd):
            return None
        return cmd.make_response(ResponseCode.SUCCESS)

    def _connected(self, conn: RemotingConnection, addr: str) -> None:
        if not self._state.accept(conn, addr):
            conn.close()
            return
        conn.lost.add_done_callback(lambda _: self._lost(conn))
        log.info("connected to name server %s", addr)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            settle(waiter, conn)
        self._owner.on_connected(conn, addr)

    def _connect_failed(self, addr: str, exc: Any) -> None:
        if self._state.stopped:
            return
        log.warning("cannot connect to name server %s: %s: %s", addr, type(exc).__name__, exc)
        self._state.connect_failed(addr)
        self._schedule_reconnect()

    def _lost(self, conn: RemotingConnection) -> None:
        if not self._state.lost(conn, worked=conn.heard):
            return
        log.warning("connection to name server %s lost", conn.label)
        self._owner.on_disconnected(conn.label)
        if self._state.stopped:
            return
        self.selector.on_failure(conn.label)
        self._schedule_reconnect()

    def _schedule_reconnect(self) -> None:
        if self._state.stopped or self._retry.active:
            return
        delay = self._state.reconnect_delay_ms()
        log.info("reconnecting to %s in %d ms", self.selector.current, delay)
        self._retry.arm(delay / 1000.0)
