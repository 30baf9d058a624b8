"""The server's timers: a call that raises is counted and runs again at its next interval,
beside the others; stopping stops every timer."""

from __future__ import annotations

from collections import Counter

from twisted.internet import task

from namesrv.net.timers import Timers


def test_a_failing_call_is_counted_and_its_timer_runs_on() -> None:
    clock = task.Clock()
    counters: Counter[str] = Counter()
    timers = Timers(clock, counters)
    slow: list[float] = []
    fast: list[float] = []

    def fails_once() -> None:
        slow.append(clock.seconds())
        if len(slow) == 1:
            raise RuntimeError("the first call fails")

    timers.every(1_000, fails_once)
    timers.every(250, lambda: fast.append(clock.seconds()))
    clock.pump([0.25] * 4)
    assert counters["timer_errors"] == 1
    clock.pump([0.25] * 4)
    assert slow == [1.0, 2.0]
    assert fast == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    timers.stop()
    clock.pump([0.25] * 20)
    assert (slow, len(fast)) == ([1.0, 2.0], 8)
    assert counters["timer_errors"] == 1
