"""Peer-provoked log lines are paced per kind, and what was held back is reported."""

from __future__ import annotations

import logging

from twisted.internet import task

from namesrv.ops.log_limit import RateLimitedLog


def test_each_kind_logs_its_burst_per_period_and_the_next_line_counts_the_rest(caplog):
    clock = task.Clock()
    paced = RateLimitedLog(logging.getLogger("paced"), clock, period_s=10, burst=3)
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
