"""Which connection to a name server a client uses, and what becomes of the others.

Pure: the rules of a kept name-server connection, shared by the Twisted link
(``client_push.wire.connection``) and the asyncio one (``client_push.aio.link``), which own the
sockets and timers and ask this table what to do. One connection is *current*; one being left
*drains* (finishes what it has in flight, then closes); one left on a oneway GO_AWAY is also a
*fallback*: its server promised a grace period, so it still takes requests while no other
connection is up, and the server closes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from client_push.wire.backoff import Backoff
from client_push.wire.nameserver_selector import NameServerSelector
from protocol.frame import RemotingCommand


class Connection(Protocol):
    @property
    def label(self) -> str: ...

    @property
    def connected(self) -> int: ...

    @property
    def pending(self) -> int: ...


C = TypeVar("C", bound=Connection)
C_contra = TypeVar("C_contra", bound=Connection, contravariant=True)


class LinkOwner(Protocol[C_contra]):
    """What a link tells its owner (the route client)."""

    def on_connected(self, conn: C_contra, addr: str) -> None:
        """A new connection is up: subscriptions must be (re)made on it."""

    def on_disconnected(self, addr: str) -> None:
        """The current connection was lost; push stops until the next ``on_connected``."""

    def on_switching(self, old: C_contra, old_addr: str, *, going_away: bool) -> None:
        """``old`` stops being the current connection (it may still answer in-flight requests)."""

    def server_request(self, conn: C_contra, cmd: RemotingCommand) -> bool:
        """A request the name server sent on ``conn``; False for a code the owner does not
        serve (the link answers REQUEST_CODE_NOT_SUPPORTED, and SUCCESS once served)."""


class LinkState(Generic[C]):
    def __init__(self, selector: NameServerSelector, backoff: Backoff) -> None:
        self.selector = selector
        self.backoff = backoff
        self.current: C | None = None
        self.addr: str | None = None
        """The server connected to or being connected to."""
        self.open: set[C] = set()
        """Every open connection: the current one and those being left."""
        self.draining: set[C] = set()
        self.fallback: set[C] = set()
        self.stopped = False
        self.connects = 0
        self.connect_failures = 0

    @property
    def target(self) -> str:
        """The name server requests go to (or will, once connected)."""
        return self.addr or self.selector.current

    def usable(self) -> C | None:
        """The connection a request goes to now; None: wait for one to come up."""
        if self.current is not None:
            return self.current
        for conn in self.fallback:
            if conn.connected:
                return conn
        return None

    def connecting(self) -> str:
        """A connection attempt starts: to the selector's choice, which is returned."""
        self.addr = self.selector.current
        return self.addr

    def accept(self, conn: C, addr: str) -> bool:
        """A connection came up; False when it is not wanted any more (close it). The backoff
        is not reset yet: a server that accepts and then closes at once (a TLS mismatch) must
        see reconnects grow to the cap; :meth:`lost` resets it for a connection that worked."""
        if self.stopped or addr != self.selector.current or self.current is not None:
            return False
        self.connects += 1
        self.current = conn
        self.open.add(conn)
        return True

    def connect_failed(self, addr: str) -> None:
        self.connect_failures += 1
        self.selector.on_failure(addr)

    def reconnect_delay_ms(self) -> int:
        return self.backoff.next_delay_ms()

    def go_away(self, conn: C, alternatives: Sequence[str]) -> bool:
        """The server behind ``conn`` is stopping; True when it is the current one and the
        client must move (to one of ``alternatives`` when any is usable)."""
        if conn is not self.current:
            return False
        self.selector.prefer(alternatives, leaving=conn.label)
        return True

    def leave(self, *, fallback: bool) -> C | None:
        """Stop using the current connection (it drains; as a ``fallback`` it keeps serving
        until another is up); the one left, if any. The next attempt starts without delay."""
        old = self.current
        if old is not None:
            self.current = None
            self.draining.add(old)
            if fallback:
                self.fallback.add(old)
        self.backoff.reset()
        return old

    def drained(self, conn: C) -> bool:
        """Whether ``conn`` is left and done: close it (a fallback is the server's to close)."""
        return conn in self.draining and conn not in self.fallback and conn.pending == 0

    def lost(self, conn: C, *, worked: bool = True) -> bool:
        """``conn`` closed; True when it was the current one (push stops, reconnect). A
        connection that ``worked`` (its server answered) starts the next reconnect from the
        initial delay."""
        if worked:
            self.backoff.reset()
        self.open.discard(conn)
        self.fallback.discard(conn)
        if conn in self.draining:
            self.draining.discard(conn)
            return False
        if conn is not self.current:
            return False
        self.current = None
        return True

    def stop(self) -> list[C]:
        """No more connections; the open ones, to close."""
        self.stopped = True
        self.current = None
        return list(self.open)
