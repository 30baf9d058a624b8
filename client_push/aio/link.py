"""The connection to the chosen name server, on asyncio: connect, reconnect with backoff,
move on GoAway.

The same rules as the Twisted ``client_push.wire.connection``, from the same pure parts
(``LinkState`` says which connection serves and when a left one closes, the
``NameServerSelector`` picks, ``Backoff`` spaces reconnects): the owner sees three events
(connected, disconnected, switching away) and one call (``request``), which waits for a
connection when there is none and retries once on a new connection when a server answers
GO_AWAY (1500), as upstream's ``enableReconnectForGoAway``. A request whose caller is
cancelled leaves no waiter, timer or table entry behind.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Sequence

from client_push.aio.clock import Clock, Timer
from client_push.aio.remoting import RemotingConnection, RequestHandler
from client_push.config import ClientConfig, split_addr
from client_push.errors import ClientStoppedError, RequestTimeoutError
from client_push.wire.backoff import Backoff
from client_push.wire.link_state import LinkOwner, LinkState
from client_push.wire.nameserver_selector import NameServerSelector
from client_push.wire.request_signing import request_signer, signed
from protocol.codes import ResponseCode
from protocol.frame import RemotingCommand

log = logging.getLogger("client_push.wire.connection")


class NameServerLink:
    """The asyncio side of ``LinkState``: sockets, the reconnect timer, waiting requests."""

    def __init__(
        self,
        config: ClientConfig,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        rng: random.Random,
        on_request: RequestHandler,
        owner: LinkOwner[RemotingConnection],
    ) -> None:
        self._config = config
        self._loop = loop
        self._clock = clock
        self._on_request = on_request
        self._owner = owner
        self.selector = NameServerSelector(config.namesrv_addrs, rng)
        self._signer = request_signer(config)
        self._state: LinkState[RemotingConnection] = LinkState(
            self.selector, Backoff(config.reconnect_initial_ms, config.reconnect_max_ms, rng)
        )
        self._connecting: dict[str, asyncio.Task[None]] = {}
        self._retry = Timer(clock, self._connect)
        self._waiters: list[asyncio.Future[RemotingConnection]] = []

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

    async def stop(self) -> None:
        """Close every connection; pending requests fail with ``ConnectionLostError``."""
        self._retry.cancel()
        conns = self._state.stop()
        for task in list(self._connecting.values()):
            task.cancel()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(ClientStoppedError("route client stopped"))
        for conn in conns:
            conn.close()
        if conns:
            await asyncio.gather(*(conn.lost for conn in conns), return_exceptions=True)
        if self._connecting:
            await asyncio.gather(*self._connecting.values(), return_exceptions=True)

    def update_addrs(self, addrs: Sequence[str]) -> None:
        """A new name-server list; a changed list moves the client (#3870 3.1.1.1)."""
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
        try:
            return await conn.request(
                signed(self._signer, cmd), timeout_ms or self._config.request_timeout_ms
            )
        finally:
            self._maybe_close_drained(conn)

    async def _usable(self, timeout_ms: int) -> RemotingConnection:
        if self._state.stopped:
            raise ClientStoppedError("route client stopped")
        conn = self._state.usable()
        if conn is not None:
            return conn
        waiter: asyncio.Future[RemotingConnection] = self._loop.create_future()
        self._waiters.append(waiter)

        def expire() -> None:
            if not waiter.done():
                waiter.set_exception(
                    RequestTimeoutError(f"no connection to {self.addr} within {timeout_ms} ms")
                )

        timer = self._clock.call_later(timeout_ms / 1000.0, expire)
        try:
            return await waiter
        finally:
            timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    # -- GoAway and switching --------------------------------------------------------------

    def go_away(
        self, conn: RemotingConnection, alternatives: Sequence[str], *, still_serving: bool = True
    ) -> None:
        """The server behind ``conn`` is stopping: move new requests elsewhere (a oneway
        GO_AWAY's server still serves until another connection is up, ``still_serving``; one
        that answered GO_AWAY only finishes what it has in flight)."""
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
        if self._state.drained(conn):
            conn.close()

    # -- connecting ----------------------------------------------------------------------------

    def _connect(self) -> None:
        if self._state.stopped or self.selector.current in self._connecting:
            return
        addr = self._state.connecting()
        task = self._loop.create_task(self._open(addr))
        self._connecting[addr] = task
        task.add_done_callback(lambda _: self._connecting.pop(addr, None))

    async def _open(self, addr: str) -> None:
        cfg = self._config
        host, port = split_addr(addr)
        context = _tls_context(cfg.tls_ca_file) if cfg.tls else None
        try:
            # The connect deadline is the loop's own: it bounds real socket work.
            _, conn = await asyncio.wait_for(
                self._loop.create_connection(
                    lambda: RemotingConnection(
                        self._loop, self._clock, cfg.max_frame_size, self._on_request, label=addr
                    ),
                    host,
                    port,
                    ssl=context,
                    server_hostname=host if context is not None and cfg.tls_ca_file else None,
                ),
                cfg.request_timeout_ms / 1000.0,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._connect_failed(addr, exc)
            return
        self._connected(conn, addr)

    def _connected(self, conn: RemotingConnection, addr: str) -> None:
        if not self._state.accept(conn, addr):
            conn.close()
            return
        conn.lost.add_done_callback(lambda _: self._lost(conn))
        log.info("connected to name server %s", addr)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(conn)
        self._owner.on_connected(conn, addr)

    def _connect_failed(self, addr: str, exc: BaseException) -> None:
        if self._state.stopped:
            return
        log.warning("cannot connect to name server %s: %s: %s", addr, type(exc).__name__, exc)
        self._state.connect_failed(addr)
        self._schedule_reconnect()

    def _lost(self, conn: RemotingConnection) -> None:
        if not self._state.lost(conn):
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


def _tls_context(ca_file: str) -> ssl.SSLContext:
    """Verified against ``ca_file``; without one, encrypted and unverified (upstream's
    ``tls.test.mode.enable``)."""
    if ca_file:
        return ssl.create_default_context(cafile=ca_file)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
