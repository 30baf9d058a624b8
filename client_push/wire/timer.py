"""One pending call of a function on the runtime's clock, re-armed or cancelled as a whole."""

from __future__ import annotations

from collections.abc import Callable

from client_push.runtime.interface import Runtime
from client_push.runtime.interface import Timer as Handle


class Timer:
    """``earliest`` keeps the sooner of the armed time and the one asked for (spread
    wake-ups); otherwise arming replaces the pending call."""

    def __init__(self, runtime: Runtime, function: Callable[[], None]) -> None:
        self._runtime = runtime
        self._function = function
        self._handle: Handle | None = None
        self._due: float = 0.0

    @property
    def active(self) -> bool:
        return self._handle is not None

    def arm(self, delay_s: float, *, earliest: bool = False) -> None:
        clock = self._runtime.clock
        due = clock.time() + max(0.0, delay_s)
        if self._handle is not None:
            if earliest and self._due <= due:
                return
            self._handle.cancel()
        self._due = due
        self._handle = clock.call_later(max(0.0, delay_s), self._fire)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        self._function()
