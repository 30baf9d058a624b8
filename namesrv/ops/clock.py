"""The clock every timer and timestamp of the server runs on, declared once.

Twisted's reactor and ``twisted.internet.task.Clock`` both fit it, so a test drives every
timer by advancing a ``task.Clock`` while the parts never know which one they were given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class DelayedCall(Protocol):
    """A call scheduled on a :class:`Clock`: it may still be cancelled while it is active."""

    def active(self) -> bool: ...
    def cancel(self) -> None: ...
    def reset(self, seconds_from_now: float) -> None: ...


class Clock(Protocol):
    """What the server uses of a clock: the time, and calls run later."""

    def seconds(self) -> float: ...
    def callLater(
        self, delay: float, callable: Callable[..., object], *args: object, **kw: object
    ) -> DelayedCall: ...


Every = Callable[[int, Callable[[], object]], None]
"""Runs a call every so many milliseconds from now on (the server's timers)."""


def now_ms(clock: Clock) -> int:
    """The clock's time in whole milliseconds."""
    return int(clock.seconds() * 1000)
