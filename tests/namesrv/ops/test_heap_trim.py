"""Free heap pages go back to the system once large register work has settled, not during it
and not after heartbeats."""

from __future__ import annotations

from twisted.internet import task

from namesrv.ops.heap_trim import HeapTrim, malloc_trim


class Work:
    def __init__(self) -> None:
        self.pending = False
        self.trims = 0

    def trim(self) -> bool:
        self.trims += 1
        return True


def make(after_ms: int = 1_000) -> tuple[task.Clock, Work, HeapTrim]:
    clock, work = task.Clock(), Work()
    return clock, work, HeapTrim(clock, after_ms, busy=lambda: work.pending, trim=work.trim)


def test_a_trim_runs_once_after_the_quiet_period():
    clock, work, trim = make()
    trim.settled()
    clock.advance(0.999)
    assert work.trims == 0
    clock.advance(0.001)
    assert work.trims == 1 and trim.trims == 1
    clock.advance(60)
    assert work.trims == 1


def test_each_settle_restarts_the_wait_so_a_burst_trims_once_at_its_end():
    clock, work, trim = make()
    for _ in range(5):
        trim.settled()
        clock.advance(0.5)
    assert work.trims == 0
    clock.advance(0.5)
    assert work.trims == 1


def test_work_pending_when_it_is_due_skips_the_trim():
    clock, work, trim = make()
    trim.settled()
    work.pending = True
    clock.advance(1)
    assert work.trims == 0
    work.pending = False
    trim.settled()  # the end of that work
    clock.advance(1)
    assert work.trims == 1


def test_zero_never_trims_and_stop_cancels():
    clock, work, off = make(0)
    off.settled()
    clock.advance(10)
    assert work.trims == 0
    clock, work, trim = make()
    trim.settled()
    trim.stop()
    clock.advance(10)
    assert work.trims == 0 and not clock.getDelayedCalls()


def test_a_failing_trim_is_logged_and_counted(caplog):
    clock = task.Clock()

    def boom() -> bool:
        raise OSError("no")

    trim = HeapTrim(clock, 10, busy=lambda: False, trim=boom)
    trim.settled()
    clock.advance(1)
    assert trim.trims == 1 and "heap trim failed" in caplog.text


def test_malloc_trim_answers_whether_or_not_the_c_library_has_it():
    assert malloc_trim() in (True, False)
