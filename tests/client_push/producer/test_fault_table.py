"""The latency fault strategy and queue selection tiers, on a fake time."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from client_push.producer.fault_table import (
    FaultConfigError,
    FaultStrategyConfig,
    FaultTable,
    SendOutcome,
)
from client_push.producer.queue_select import NoWritableQueueError, QueueSelector
from client_push.routes.route_cache import MessageQueue, PublishInfo

OK, FAILED, UNREACHABLE = SendOutcome.OK, SendOutcome.FAILED, SendOutcome.UNREACHABLE


def info(*brokers: str, queues: int = 2) -> PublishInfo:
    return PublishInfo(
        "T", False, tuple(MessageQueue("T", b, i) for b in brokers for i in range(queues))
    )


def picks(selector: QueueSelector, pub: PublishInfo, n: int, now: int = 0, last=None) -> Counter:
    return Counter(selector.select(pub, last, now).broker_name for _ in range(n))


@pytest.mark.parametrize(
    ("latency", "isolated"),
    [(0, 0), (49, 0), (50, 0), (100, 0), (549, 0), (550, 30_000), (999, 30_000),
     (1_000, 60_000), (2_000, 120_000), (3_000, 180_000), (14_999, 180_000), (15_000, 600_000)],
)  # fmt: skip
def test_each_latency_level_isolates_its_broker_that_long(latency, isolated):
    table = FaultTable()
    table.report("a", latency, OK, now_ms=1_000)
    assert table.is_available("a", 1_000 + isolated)
    assert table.is_available("a", 1_000 + isolated - 1) is (isolated == 0)
    assert table.is_reachable("a", 1_000)


def test_a_failure_isolates_for_the_failure_latency_and_a_fast_send_does_not_cut_it_short():
    table = FaultTable()
    table.report("a", 3, FAILED, now_ms=0)
    table.report("a", 3, OK, now_ms=10)
    assert not table.is_available("a", 599_999) and table.is_available("a", 600_000)
    assert table.is_reachable("a", 0)


def test_unreachable_stays_so_until_a_probe_is_answered():
    table = FaultTable()
    table.report("a", 5_000, UNREACHABLE, now_ms=0)
    assert not table.is_reachable("a", 10**9)
    assert table.due_probes(0) == ["a"]
    assert table.due_probes(1_999) == []  # once per detect interval
    assert table.probe_answered("a", 2_000) is True
    assert table.is_reachable("a", 2_000) and table.probe_answered("a", 2_001) is False


def test_going_away_blocks_reachability_and_probes_for_the_grace_period():
    table = FaultTable()
    table.going_away("a", 5_000, now_ms=0)
    assert table.is_going_away("a", 4_999) and not table.is_available("a", 4_999)
    assert table.due_probes(0) == []
    assert table.probe_answered("a", 4_000) is False
    assert table.due_probes(5_000) == ["a"] and table.probe_answered("a", 5_000)
    assert table.is_available("a", 5_000) and table.is_reachable("a", 5_000)


def test_items_are_dropped_with_the_brokers_routes_and_nothing_is_kept_when_disabled():
    table = FaultTable()
    for name in "abc":
        table.report(name, 600, OK, now_ms=0)
    assert sorted(table.retain({"b"})) == ["a", "c"] and len(table) == 1
    off = FaultTable(FaultStrategyConfig(enabled=False))
    off.report("a", 20_000, FAILED, now_ms=0)
    assert len(off) == 0 and off.is_available("a", 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"latency_levels_ms": (50, 100), "isolation_ms": (0,)},
        {"latency_levels_ms": (100, 50), "isolation_ms": (0, 0)},
        {"isolation_ms": (0, 0, -1, 0, 0, 0, 0)},
        {"detect_interval_ms": 0},
        {"detect_timeout_ms": -5},
    ],
)
def test_bad_strategy_config_is_refused(kwargs):
    with pytest.raises(FaultConfigError):
        FaultStrategyConfig(**kwargs)


# -- selection ------------------------------------------------------------------------------------


def test_round_robin_spreads_evenly_over_every_queue():
    selector = QueueSelector(FaultTable(), random.Random(1))
    pub = info("a", "b", "c")
    chosen = Counter(selector.select(pub, None, 0) for _ in range(600))
    assert set(chosen.values()) == {100} and len(chosen) == 6


def test_available_brokers_come_first_then_reachable_then_any():
    table = FaultTable()
    selector = QueueSelector(table, random.Random(2))
    pub = info("a", "b", "c")
    table.report("a", 2_000, OK, now_ms=0)  # slow: isolated but reachable
    table.report("b", 0, UNREACHABLE, now_ms=0)
    assert picks(selector, pub, 50) == {"c": 50}
    table.report("c", 0, UNREACHABLE, now_ms=0)
    assert picks(selector, pub, 50) == {"a": 50}
    table.report("a", 0, UNREACHABLE, now_ms=0)
    assert set(picks(selector, pub, 60)) == {"a", "b", "c"}  # nothing better: any queue
    # isolation over: every broker is available again, and round-robin is even
    assert picks(selector, pub, 60, now=600_000) == {"a": 20, "b": 20, "c": 20}


def test_a_retry_avoids_the_last_broker_while_another_one_can_take_it():
    table = FaultTable()
    selector = QueueSelector(table, random.Random(3))
    assert picks(selector, info("a", "b"), 40, last="a") == {"b": 40}
    assert picks(selector, info("a"), 5, last="a") == {"a": 5}  # the only broker
    table.report("b", 0, FAILED, now_ms=0)
    # b is isolated, a is the last broker: a reachable broker other than a is b
    assert picks(selector, info("a", "b"), 10, last="a") == {"b": 10}


def test_with_the_strategy_off_only_the_last_broker_and_going_away_are_avoided():
    table = FaultTable(FaultStrategyConfig(enabled=False))
    selector = QueueSelector(table, random.Random(4))
    table.report("a", 20_000, FAILED, now_ms=0)  # ignored when off
    assert set(picks(selector, info("a", "b"), 40)) == {"a", "b"}
    table.going_away("b", 1_000, now_ms=0)
    assert picks(selector, info("a", "b"), 20) == {"a": 20}
    assert picks(selector, info("a", "b"), 20, last="a") == {"a": 20}  # b is going away
    assert set(picks(selector, info("a", "b"), 40, now=1_000)) == {"a", "b"}


def test_a_route_without_writable_queues_is_a_clear_error():
    with pytest.raises(NoWritableQueueError, match="topic T has no writable queue"):
        QueueSelector(FaultTable()).select(PublishInfo("T", False, ()), None, 0)


def test_positions_of_topics_no_longer_held_are_forgotten():
    selector = QueueSelector(FaultTable())
    selector.select(info("a"), None, 0)
    selector.forget(set())
    assert selector._index == {}


def test_a_broker_isolated_for_slowness_that_misses_its_probe_waits_for_an_answered_one():
    table = FaultTable(FaultStrategyConfig.preset("5x"))
    table.report("slow", 800, SendOutcome.OK, now_ms=0)  # 800 ms -> 2 s isolation
    assert table.probe_failed("slow", 1_500)
    assert not table.is_available("slow", 60_000)  # however late the next probe comes
    assert not table.probe_failed("slow", 3_500)  # already waiting for an answer
    table.probe_answered("slow", 70_000)
    assert table.is_available("slow", 70_000)
    table.report("fast", 10, SendOutcome.OK, now_ms=0)
    assert not table.probe_failed("fast", 100) and table.is_available("fast", 100)
    assert not table.probe_failed("unknown", 100)


def test_a_black_hole_that_answers_again_is_available_within_interval_plus_isolation():
    cfg = FaultStrategyConfig.preset("5x")
    table = FaultTable(cfg)
    table.report("hole", 1_000, SendOutcome.UNREACHABLE, now_ms=0)  # 10 s
    assert table.probe_failed("hole", 9_000)  # isolated again from 9 s: until 19 s
    assert not table.is_available("hole", 25_000)
    table.probe_answered("hole", 11_000)  # it recovered: the next probe (<= 2 s) answers
    assert not table.is_available("hole", 18_999) and table.is_available("hole", 19_000)
    assert cfg.detect_interval_ms + cfg.isolation_for(cfg.failure_latency_ms) >= 19_000 - 9_000


def test_a_send_still_waiting_isolates_its_broker_before_the_answer():
    table = FaultTable(FaultStrategyConfig.preset("5x"))
    assert table.first_isolating_latency() == 550
    table.waiting("b", 550, now_ms=100)
    assert not table.is_available("b", 2_099) and table.is_available("b", 2_100)
    assert table.is_reachable("b", 200)  # waiting says slow, not unreachable
    off = FaultTable(FaultStrategyConfig.preset("off"))
    off.waiting("b", 550, now_ms=0)
    assert len(off) == 0


def test_missed_probes_of_a_broker_restarting_after_goaway_do_not_isolate_it():
    table = FaultTable(FaultStrategyConfig.preset("4x"))
    table.report("b", 5, SendOutcome.OK, now_ms=0)
    table.going_away("b", 1_000, now_ms=0)
    assert not table.probe_failed("b", 2_000)  # down while it restarts
    assert table.probe_answered("b", 4_000) and table.is_available("b", 4_000)


def test_brokers_of_a_route_are_tracked_once_and_their_first_probe_replaces_the_round():
    table = FaultTable()
    assert table.track({"b", "a"}, now_ms=1_000) == ["a", "b"]
    assert table.track({"a", "b", "c"}, now_ms=1_500) == ["c"]
    assert table.due_probes(2_999) == []  # probed when tracked: not again before the interval
    assert table.due_probes(3_000) == ["a", "b"]
    assert not table.is_heard_from("a") and table.is_available("a", 1_000)


def test_a_broker_never_heard_from_that_misses_its_first_probe_waits_for_an_answer():
    table = FaultTable()
    table.track({"a", "b"}, now_ms=0)
    assert table.probe_failed("a", 200)  # held off anew
    assert not table.probe_failed("a", 2_200)  # already held off
    assert not table.is_available("a", 10**9) and not table.is_reachable("a", 10**9)
    assert table.probe_answered("a", 4_000)  # reachable again
    assert table.is_available("a", 4_000) and table.is_heard_from("a")


def test_one_missed_probe_does_not_hold_off_a_broker_known_to_answer():
    table = FaultTable()
    table.track({"a", "b"}, now_ms=0)
    table.probe_answered("a", 5)
    table.report("b", 3, OK, now_ms=5)  # a send answered counts as heard from too
    assert table.is_heard_from("b")
    for name in ("a", "b"):
        assert not table.probe_failed(name, 2_200)
        assert table.is_available(name, 2_200) and table.is_reachable(name, 2_200)


def test_with_the_detector_running_brokers_heard_from_come_before_the_unknown():
    table = FaultTable()
    selector = QueueSelector(table, random.Random(7))
    pub = info("a", "b", "c")
    table.track({"a", "b", "c"}, now_ms=0)
    assert picks(selector, pub, 30) == {"a": 10, "b": 10, "c": 10}  # no detector: as before
    selector.prefer_heard = True
    assert picks(selector, pub, 30) == {"a": 10, "b": 10, "c": 10}  # nobody heard from: any
    table.probe_answered("c", 2)
    assert picks(selector, pub, 30) == {"c": 30}
    assert set(picks(selector, pub, 30, last="c")) == {"a", "b"}  # a retry still goes on
    table.report("c", 0, UNREACHABLE, now_ms=3)
    assert set(picks(selector, pub, 30, now=3)) == {"a", "b"}  # unknown beats isolated
    table.probe_answered("b", 4)
    assert picks(selector, pub, 30, now=4) == {"b": 30}
    assert selector.has_heard_from(pub, None) and not selector.has_heard_from(info("a"), None)


def test_a_negative_first_probe_wait_is_refused():
    with pytest.raises(FaultConfigError, match="first_probe_wait_ms"):
        FaultStrategyConfig(first_probe_wait_ms=-1)
