"""Queue selection around a broker's GoAway with the fault strategy on, on a fake time.

The tiers themselves, round-robin and the strategy switched off are pinned in
``test_fault_table.py``; these tests pin where a broker going away ranks among the others.
"""

from __future__ import annotations

import random
from collections import Counter

from client_push.producer.fault_table import FaultStrategyConfig, FaultTable, SendOutcome
from client_push.producer.queue_select import QueueSelector
from client_push.routes.route_cache import MessageQueue, PublishInfo

GRACE_MS = 5_000


def info(*brokers: str) -> PublishInfo:
    return PublishInfo(
        "T", False, tuple(MessageQueue("T", b, i) for b in brokers for i in range(2))
    )


def picks(selector: QueueSelector, pub: PublishInfo, n: int, now: int, last=None) -> Counter:
    return Counter(selector.select(pub, last, now).broker_name for _ in range(n))


def test_a_broker_going_away_is_neither_available_nor_reachable_during_its_grace():
    table = FaultTable()
    selector = QueueSelector(table, random.Random(5))
    table.going_away("a", GRACE_MS, now_ms=0)
    assert picks(selector, info("a", "b"), 20, now=0) == {"b": 20}
    assert picks(selector, info("a", "b"), 20, now=GRACE_MS - 1) == {"b": 20}


def test_an_isolated_broker_that_stays_beats_one_going_away():
    table = FaultTable()
    selector = QueueSelector(table, random.Random(6))
    table.report("b", 0, SendOutcome.UNREACHABLE, now_ms=0)  # isolated 600 s, not reachable
    table.going_away("a", GRACE_MS, now_ms=0)
    assert picks(selector, info("a", "b"), 20, now=1_000) == {"b": 20}


def test_a_retry_goes_to_the_broker_going_away_only_when_nothing_else_exists():
    table = FaultTable()
    selector = QueueSelector(table, random.Random(7))
    table.going_away("a", GRACE_MS, now_ms=0)
    assert picks(selector, info("a", "b"), 10, now=0, last="b") == {"b": 10}
    assert picks(selector, info("a"), 5, now=0) == {"a": 5}  # it still serves in its grace


def test_after_the_grace_the_broker_is_used_again_once_it_answers_a_probe():
    table = FaultTable()
    selector = QueueSelector(table, random.Random(8))
    table.going_away("a", GRACE_MS, now_ms=0)
    assert picks(selector, info("a", "b"), 20, now=GRACE_MS) == {"b": 20}  # maybe still down
    assert not table.probe_answered("a", GRACE_MS - 1)  # its grace is not over
    assert table.probe_answered("a", GRACE_MS)
    assert picks(selector, info("a", "b"), 40, now=GRACE_MS) == {"a": 20, "b": 20}


def test_without_the_detector_the_broker_is_used_again_after_its_grace():
    table = FaultTable(FaultStrategyConfig(detector_enabled=False))
    selector = QueueSelector(table, random.Random(8))
    table.going_away("a", GRACE_MS, now_ms=0)
    assert picks(selector, info("a", "b"), 40, now=GRACE_MS) == {"a": 20, "b": 20}
    assert not table.is_reachable("a", GRACE_MS)


def test_a_go_away_without_grace_waits_only_for_the_next_answer():
    table = FaultTable()
    selector = QueueSelector(table, random.Random(9))
    table.going_away("a", 0, now_ms=100)  # a malformed GoAway body
    assert picks(selector, info("a", "b"), 20, now=100) == {"b": 20}
    table.report("a", 5, SendOutcome.OK, now_ms=200)  # a send that went there anyway
    assert picks(selector, info("a", "b"), 40, now=200) == {"a": 20, "b": 20}
