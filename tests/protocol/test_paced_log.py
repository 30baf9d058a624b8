"""Peer-provoked log lines are paced per kind, and what was held back is reported."""

from __future__ import annotations

import logging

from twisted.internet import task

from protocol.paced_log import PacedLog


def test_each_kind_logs_its_burst_per_period_and_the_next_line_counts_the_rest(caplog):
    clock = task.Clock()
    paced = PacedLog(logging.getLogger("paced"), clock.seconds, period_s=10, burst=3)
    with caplog.at_level(logging.INFO, logger="paced"):
        for i in range(100):
            paced.warning("a", "a %d", i)
        paced.warning("b", "b")  # another kind has its own budget
        clock.advance(10)
        paced.warning("a", "a again")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "a 0",
        "a 1",
        "a 2",
        "b",
        "a again (97 more like this in the previous 10 s not logged)",
    ]
    assert paced.dropped == 97


def test_release_tells_each_kinds_held_back_lines_once_its_period_is_over(caplog):
    clock = task.Clock()
    paced = PacedLog(logging.getLogger("paced"), clock.seconds, period_s=10, burst=2)
    with caplog.at_level(logging.INFO, logger="paced"):
        for i in range(5):
            paced.log(logging.INFO, "a", "a %d", i)
        paced.warning("b", "b")  # nothing held back: nothing to tell
        assert paced.release() == 0  # the period is not over
        clock.advance(10)
        assert paced.release() == 3
        assert paced.release() == 0  # told once
        paced.log(logging.INFO, "a", "a again")  # a new period: no count to carry
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert records == [
        (logging.INFO, "a 0"),
        (logging.INFO, "a 1"),
        (logging.WARNING, "b"),
        (logging.INFO, "a: 3 more lines like this in the previous 10 s not logged"),
        (logging.INFO, "a again"),
    ]


def test_kinds_past_the_bound_share_one_window_and_ended_ones_make_room(caplog):
    clock = task.Clock()
    paced = PacedLog(logging.getLogger("paced"), clock.seconds, period_s=10, burst=1, max_kinds=3)
    with caplog.at_level(logging.INFO, logger="paced"):
        for i in range(100):  # a peer naming a new kind each time
            paced.warning(f"kind {i}", "line %d", i)
        clock.advance(10)
        paced.warning("late", "late")  # the ended windows are dropped first: room again
    messages = [r.getMessage() for r in caplog.records]
    assert messages[:4] == ["line 0", "line 1", "line 2", "line 3"]  # the fourth: other kinds
    assert "other kinds: 96 more lines like this in the previous 10 s not logged" in messages
    assert messages[-1] == "late"
    assert paced.kinds == 1
