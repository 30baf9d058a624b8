"""The runtime the client is written over: a clock and timers, futures, spawning a task,
connecting, and a transport that writes, pauses, resumes and closes.

Pure: the link, fetches, push requests, route client, producer and its connections are
coroutines that await only what a ``Runtime`` hands them (a ``Future``, ``connect``), so every
event loop runs the same code. An adapter (``twisted_loop``, ``asyncio_loop``) implements this
for its loop and is the only module that imports the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Timer(Protocol):
    def cancel(self) -> None:
        """Take the call back; harmless once it has run or was cancelled."""
        ...


class Clock(Protocol):
    """The injected clock: protocol timers (timeouts, polls, backoffs) run on it."""

    def time(self) -> float:
        """Seconds (the wall clock for a real one)."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer: ...


class Future(Protocol[T]):
    """Settled once; awaitable in the runtime's coroutines. A cancelled awaiter cancels it."""

    def done(self) -> bool: ...

    def cancelled(self) -> bool: ...

    def set_result(self, value: T) -> None: ...

    def set_exception(self, exc: BaseException) -> None: ...

    def add_done_callback(self, fn: Callable[[Any], object]) -> None: ...

    def __await__(self) -> Generator[Any, None, T]: ...


class Task(Protocol):
    def cancel(self) -> Any: ...

    def done(self) -> bool: ...


class Transport(Protocol):
    """One connected stream, as the runtime's connection exposes it."""

    def write(self, data: bytes) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None:
        """Close once what is written has gone out."""
        ...

    def abort(self) -> None:
        """Close now, dropping what is not sent."""
        ...


class Stream(Protocol):
    """What a connection's owner hears from the runtime (the shared ``RemotingConnection``)."""

    def connection_made(self, transport: Transport) -> None: ...

    def data_received(self, data: bytes) -> None: ...

    def connection_lost(self, why: str) -> None: ...

    def pause_writing(self) -> None:
        """The transport's buffer is above its high mark: the peer is not reading."""
        ...

    def resume_writing(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Tls:
    """TLS to the peer: verified against ``ca_file``; unverified when it is empty."""

    ca_file: str = ""


@dataclass(frozen=True, slots=True)
class Target:
    """Where to connect: ``HOST:PORT`` within ``timeout_ms``, with TLS or not, and the
    transport buffer above which the peer counts as not reading."""

    addr: str
    timeout_ms: int
    tls: Tls | None = None
    write_buffer_bytes: int = 64 * 1024


class Runtime(Protocol):
    @property
    def clock(self) -> Clock: ...

    @property
    def cancelled_error(self) -> type[BaseException]:
        """What an awaiting coroutine sees when its task is cancelled."""
        ...

    def future(self) -> Future[Any]: ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> Task:
        """Run ``coro`` as a task of the loop; an error out of it is logged, not lost."""
        ...

    def call_soon(self, callback: Callable[[], None]) -> Timer:
        """After this turn of the loop (not a clock timer)."""
        ...

    def call_later_real(self, delay: float, callback: Callable[[], None]) -> Timer:
        """A timer on the loop's own time: it bounds real socket work (connect, close)."""
        ...

    def connect(self, target: Target, stream: Stream) -> Awaitable[None]:
        """Connect ``stream``; raises ``ConnectionLostError`` when that fails in time."""
        ...

    def public(self, coro: Coroutine[Any, Any, T]) -> Any:
        """The loop's own awaitable of ``coro`` for an application (a Deferred for Twisted,
        the coroutine itself for asyncio)."""
        ...


Main = Callable[["Runtime", Future[None]], Coroutine[Any, Any, T]]
"""A program run by an adapter's ``run``: it gets the runtime and a future that settles when
the process is asked to stop (SIGINT, SIGTERM)."""


def settle(future: Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


def fail(future: Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
