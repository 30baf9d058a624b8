"""Time for the asyncio route client: an injected clock, so every timer can run on a fake one.

``LoopClock`` reads the wall clock (route records and notification times are wall-clock
milliseconds, as the Twisted client's ``reactor.seconds()``) and schedules on the running
loop. Tests pass a fake clock with the same two methods and advance it by hand.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def time(self) -> float:
        """Seconds (wall clock for the real one)."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle: ...


class LoopClock:
    """The wall clock, with timers on ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def time(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return self._loop.call_later(max(0.0, delay), callback)


class Timer:
    """One pending call of ``function`` on ``clock``, re-armed or cancelled as a whole.

    ``earliest`` keeps the sooner of the armed time and the one asked for (spread wake-ups);
    otherwise arming replaces the pending call.
    """

    def __init__(self, clock: Clock, function: Callable[[], None]) -> None:
        self._clock = clock
        self._function = function
        self._handle: TimerHandle | None = None
        self._due: float = 0.0

    @property
    def active(self) -> bool:
        return self._handle is not None

    def arm(self, delay_s: float, *, earliest: bool = False) -> None:
        due = self._clock.time() + max(0.0, delay_s)
        if self._handle is not None:
            if earliest and self._due <= due:
                return
            self._handle.cancel()
        self._due = due
        self._handle = self._clock.call_later(max(0.0, delay_s), self._fire)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        self._function()
