"""An asyncio event loop (plain or uvloop) in a thread of its own, driven from Twisted tests.

The name servers of the tests (the real one, ``support.fake_namesrv``) run on the Twisted
reactor that pytest-twisted drives in the main thread; asyncio clients run on this loop, and
the two talk over loopback like separate programs. ``run`` hands a coroutine to the loop and
returns a Deferred of its result, so a Twisted test awaits asyncio work without blocking the
reactor. Tests read the client's state from the reactor thread only to poll a condition.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from twisted.internet import defer, reactor, task

T = TypeVar("T")

LOOP_KINDS = ("asyncio", "uvloop")


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    if kind == "asyncio":
        return asyncio.new_event_loop()
    raise ValueError(f"unknown loop kind {kind!r}")


class LoopThread:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.loop = new_loop(kind)
        self._thread = threading.Thread(target=self._serve, name=f"{kind}-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> defer.Deferred[T]:
        """Run ``coro`` on the loop; a Deferred (fired in the reactor thread) of its result."""
        d: defer.Deferred[T] = defer.Deferred()
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)

        def fire(done: Any) -> None:
            if done.cancelled():
                d.errback(asyncio.CancelledError())
            elif done.exception() is not None:
                d.errback(done.exception())
            else:
                d.callback(done.result())

        future.add_done_callback(lambda done: reactor.callFromThread(fire, done))
        return d

    def call(self, function: Callable[..., T], *args: Any) -> defer.Deferred[T]:
        """Call a plain function on the loop (state of loop objects is changed only there)."""

        async def call() -> T:
            return function(*args)

        return self.run(call())

    def spawn(self, coro: Coroutine[Any, Any, T]) -> defer.Deferred[asyncio.Task[T]]:
        """Start ``coro`` as a task on the loop; the task, to cancel or await later."""

        async def start() -> asyncio.Task[T]:
            return asyncio.get_running_loop().create_task(coro)

        return self.run(start())

    def cancel(self, task: asyncio.Task[Any]) -> defer.Deferred[bool]:
        """Cancel ``task`` on the loop; True once it has ended cancelled."""

        async def cancel_it() -> bool:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return True
            return False

        return self.run(cancel_it())

    def result(self, task: asyncio.Task[T]) -> defer.Deferred[T]:
        """What ``task`` ends with (awaited on the loop)."""

        async def wait() -> T:
            return await task

        return self.run(wait())

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


class FakeClock:
    """The asyncio client's clock, moved by hand: ``advance`` runs what falls due, in order.

    Used from the loop's thread only (``LoopThread.call(clock.advance, s)``).
    """

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._heap: list[tuple[float, int, FakeTimer]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.now + max(0.0, delay), callback)
        heapq.heappush(self._heap, (timer.due, next(self._order), timer))
        return timer

    def advance(self, seconds: float) -> None:
        target = self.now + seconds
        while self._heap and self._heap[0][0] <= target:
            due, _, timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            self.now = due
            timer.fire()
        self.now = target

    def pending(self) -> int:
        """Timers armed and neither fired nor cancelled."""
        return sum(1 for _, _, timer in self._heap if not timer.cancelled)


class FakeTimer:
    def __init__(self, due: float, callback: Callable[[], None]) -> None:
        self.due = due
        self._callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        self.cancelled = True
        self._callback()


class ReactorLoop:
    """The same face as ``LoopThread`` for the Twisted client: its coroutines run on the
    reactor (driven by Deferreds), its tasks are Deferreds."""

    kind = "twisted"

    def run(self, coro: Coroutine[Any, Any, T]) -> defer.Deferred[T]:
        return defer.ensureDeferred(coro)

    def call(self, function: Callable[..., T], *args: Any) -> defer.Deferred[T]:
        return defer.maybeDeferred(function, *args)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> defer.Deferred[defer.Deferred[T]]:
        return defer.succeed(defer.ensureDeferred(coro))  # type: ignore[arg-type]

    async def _cancel(self, task: defer.Deferred[Any]) -> bool:
        task.cancel()
        try:
            await task
        except defer.CancelledError:
            return True
        return False

    def cancel(self, task: defer.Deferred[Any]) -> defer.Deferred[bool]:
        return defer.ensureDeferred(self._cancel(task))

    def result(self, task: defer.Deferred[T]) -> defer.Deferred[T]:
        return task

    def stop(self) -> None:
        pass


class PendingClock(task.Clock):
    """``task.Clock`` that says, like ``FakeClock``, how many timers are armed."""

    def pending(self) -> int:
        return sum(1 for call in self.getDelayedCalls() if call.active())


@pytest.fixture(params=("twisted", *LOOP_KINDS))
def any_loop(request: pytest.FixtureRequest) -> Iterator[LoopThread | ReactorLoop]:
    """The reactor, plain asyncio and uvloop: where a client of each kind runs."""
    loop: LoopThread | ReactorLoop = (
        ReactorLoop() if request.param == "twisted" else LoopThread(request.param)
    )
    yield loop
    loop.stop()


@pytest.fixture(params=LOOP_KINDS)
def loop_thread(request: pytest.FixtureRequest) -> Iterator[LoopThread]:
    """An event loop in its own thread, once plain asyncio and once uvloop."""
    thread = LoopThread(request.param)
    yield thread
    thread.stop()
