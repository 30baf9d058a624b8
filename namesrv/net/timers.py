"""The server's periodic timers on its clock: each guarded, so one failing call never stops
its timer for good, and all stopped together at shutdown."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from twisted.internet import task

from namesrv.ops.clock import Clock

log = logging.getLogger(__name__)


class Timers:
    """Repeating calls on ``clock``; a call that raises is logged and counted
    (``timer_errors``) and runs again at its next interval."""

    def __init__(self, clock: Clock, counters: Counter[str]) -> None:
        self._clock = clock
        self._counters = counters
        self._loops: list[task.LoopingCall] = []

    def every(self, interval_ms: int, call: Callable[[], object]) -> None:
        """Run ``call`` every ``interval_ms`` from now on (first after one interval)."""

        def guarded() -> None:
            try:
                call()
            except Exception:  # a failing timer must not stop for good
                self._counters["timer_errors"] += 1
                log.exception("error in periodic %s", getattr(call, "__name__", call))

        loop = task.LoopingCall(guarded)
        loop.clock = self._clock  # type: ignore[assignment]
        loop.start(interval_ms / 1000.0, now=False)
        self._loops.append(loop)

    def stop(self) -> None:
        """Stop every timer; one that fails to stop does not keep the others running."""
        for loop in self._loops:
            if not loop.running:
                continue
            try:
                loop.stop()
            except Exception:
                self._counters["shutdown_errors"] += 1
                log.exception("stopping a timer; stopping goes on")
