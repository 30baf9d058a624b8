"""The latency fault table beyond its default levels, on a fake time.

Each default level's isolation, the config checks and the detector's due probes are pinned in
``test_fault_table.py``; these tests pin a configured table and how reachability is set and
cleared by what the application reports.
"""

from __future__ import annotations

import pytest

from client_push.producer.fault_table import FaultStrategyConfig, FaultTable, SendOutcome

UPSTREAM_5 = FaultStrategyConfig(
    latency_levels_ms=(50, 100, 550, 1_800, 3_000, 5_000, 15_000),
    isolation_ms=(0, 0, 2_000, 5_000, 6_000, 10_000, 30_000),
    failure_latency_ms=10_000,
)
"""The table upstream ships since 5.1.4 (MQFaultStrategy), as an operator would configure it."""


@pytest.mark.parametrize(
    ("latency", "isolated"),
    [(549, 0), (550, 2_000), (1_799, 2_000), (1_800, 5_000), (4_999, 6_000), (5_000, 10_000),
     (15_000, 30_000), (10**9, 30_000)],
)  # fmt: skip
def test_a_configured_table_sets_the_isolation(latency, isolated):
    table = FaultTable(UPSTREAM_5)
    table.report("a", latency, SendOutcome.OK, now_ms=1_000)
    assert table.is_available("a", 1_000 + isolated)
    assert table.is_available("a", 1_000 + isolated - 1) is (isolated == 0)


def test_a_failure_is_isolated_as_the_configured_failure_latency():
    table = FaultTable(UPSTREAM_5)
    table.report("a", 1, SendOutcome.FAILED, now_ms=0)
    assert not table.is_available("a", 9_999) and table.is_available("a", 10_000)


def test_a_successful_send_makes_an_unreachable_broker_reachable_again():
    table = FaultTable()
    table.report("a", 10, SendOutcome.UNREACHABLE, now_ms=0)
    assert not table.is_reachable("a", 0)
    table.report("a", 10, SendOutcome.OK, now_ms=1)
    assert table.is_reachable("a", 1)
    assert not table.is_available("a", 1)  # the isolation it earned stands


def test_a_failed_answer_keeps_the_broker_reachable_and_records_the_latency():
    table = FaultTable()
    table.report("a", 700, SendOutcome.FAILED, now_ms=0)
    item = table.item("a")
    assert item is not None and item.latency_ms == 700 and item.reachable


def test_a_go_away_never_shortens_an_isolation_already_earned():
    table = FaultTable()
    table.report("a", 1_000, SendOutcome.OK, now_ms=0)  # 60 s
    table.going_away("a", 5_000, now_ms=0)
    assert table.probe_answered("a", 5_000)  # back after its restart
    assert not table.is_available("a", 59_999) and table.is_available("a", 60_000)
    assert not table.is_going_away("a", 5_000)


def test_a_negative_latency_counts_as_zero():
    table = FaultTable()
    table.report("a", -5, SendOutcome.OK, now_ms=0)
    item = table.item("a")
    assert item is not None and item.latency_ms == 0 and table.is_available("a", 0)
