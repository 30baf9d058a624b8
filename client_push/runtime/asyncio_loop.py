"""The runtime on asyncio (and uvloop, which is an asyncio loop): the running loop's sockets
and timers, its Futures and Tasks.

The only module of the client that imports asyncio. The loop is the one running when the
client first needs it, so an object may be built before the loop runs and used inside it.
``clock`` (default: the wall clock with the loop's timers) drives protocol timers, so tests run
them on a fake one; connect and close deadlines run on the loop itself.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from client_push.config import split_addr
from client_push.errors import ConnectionLostError
from client_push.runtime.interface import Clock, Future, Main, Stream, Target, Timer, settle

log = logging.getLogger("client_push.runtime")

T = TypeVar("T")


class LoopClock:
    """The wall clock, with timers on the running loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    def time(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        loop = self._loop or asyncio.get_running_loop()
        return loop.call_later(max(0.0, delay), callback)


class _StreamProtocol(asyncio.Protocol):
    """Hands an asyncio transport's events to a ``Stream`` (whose transport it is as is)."""

    def __init__(self, stream: Stream, write_buffer_bytes: int) -> None:
        self._stream = stream
        self._buffer = write_buffer_bytes

    def connection_made(self, transport: Any) -> None:
        transport.set_write_buffer_limits(high=self._buffer)
        self._stream.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._stream.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stream.connection_lost(str(exc) if exc is not None else "closed")

    def pause_writing(self) -> None:
        self._stream.pause_writing()

    def resume_writing(self) -> None:
        self._stream.resume_writing()


class AsyncioRuntime:
    cancelled_error: type[BaseException] = asyncio.CancelledError

    def __init__(self, clock: Clock | None = None) -> None:
        self._given_clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    @property
    def clock(self) -> Clock:
        if self._given_clock is None:
            self._given_clock = LoopClock(self.loop)
        return self._given_clock

    def future(self) -> asyncio.Future[Any]:
        return self.loop.create_future()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = self.loop.create_task(coro)
        self._tasks.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("error in a client task", exc_info=task.exception())

    def call_soon(self, callback: Callable[[], None]) -> asyncio.Handle:
        return self.loop.call_soon(callback)

    def call_later_real(self, delay: float, callback: Callable[[], None]) -> asyncio.Handle:
        return self.loop.call_later(max(0.0, delay), callback)

    async def connect(self, target: Target, stream: Stream) -> None:
        host, port = split_addr(target.addr)
        tls = target.tls
        context = None if tls is None else _tls_context(tls.ca_file)
        try:
            await asyncio.wait_for(
                self.loop.create_connection(
                    lambda: _StreamProtocol(stream, target.write_buffer_bytes),
                    host,
                    port,
                    ssl=context,
                    server_hostname=host if tls is not None and tls.ca_file else None,
                ),
                max(target.timeout_ms, 1) / 1000.0,
            )
        except (TimeoutError, OSError) as exc:
            raise ConnectionLostError(
                f"cannot connect to {target.addr}: {type(exc).__name__}: {exc}"
            ) from None

    def public(self, coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
        return coro


def run(main: Main[T], *, uvloop: bool = False) -> T:
    """Run ``main`` on a new asyncio loop (a uvloop one with ``uvloop``) until it returns.

    SIGINT and SIGTERM settle the ``stop`` future ``main`` receives, so a program closes its
    clients itself before the loop ends.
    """
    factory = None
    if uvloop:
        import uvloop as uvloop_module

        factory = uvloop_module.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_with_signals(main))


async def _with_signals(main: Main[T]) -> T:
    runtime = AsyncioRuntime()
    stop: Future[None] = runtime.future()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        runtime.loop.add_signal_handler(signum, settle, stop, None)
    try:
        return await main(runtime, stop)
    finally:
        for signum in signals:
            runtime.loop.remove_signal_handler(signum)


def _tls_context(ca_file: str) -> ssl.SSLContext:
    """Verified against ``ca_file``; without one, encrypted and unverified (upstream's
    ``tls.test.mode.enable``)."""
    if ca_file:
        return ssl.create_default_context(cafile=ca_file)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
