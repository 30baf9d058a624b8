"""Route changes gathered into ``route_changes`` records: bounded, in detection order."""

from __future__ import annotations

import pytest

from namesrv.ops.events import RouteChanged
from namesrv.ops.journal_routes import RouteChangeBatches


def change(topic: str, version: int = 1, **more: object) -> RouteChanged:
    return RouteChanged(topic, version, "UPDATED", ["register"], True)._replace(**more)


def test_a_record_never_lists_more_than_its_bound() -> None:
    batches = RouteChangeBatches(max_topics=3)
    done = []
    for i in range(10):
        done += batches.add(5, change(f"t{i}", i))
    done += batches.drain()
    assert [len(fields["topics"]) for _, fields in done] == [3, 3, 3, 1]
    assert [t for _, f in done for t in f["topics"]] == [f"t{i}" for i in range(10)]
    assert [v for _, f in done for v in f["versions"]] == list(range(10))
    assert {ts for ts, _ in done} == {5}


def test_a_new_millisecond_completes_the_records_of_the_last() -> None:
    batches = RouteChangeBatches()
    assert batches.add(5, change("a")) == []
    assert batches.add(5, change("b", kind="CREATED")) == []
    done = batches.add(6, change("c"))
    assert [(ts, f["kind"], f["topics"]) for ts, f in done] == [
        (5, "UPDATED", ["a"]),
        (5, "CREATED", ["b"]),
    ]
    assert [(ts, f["topics"]) for ts, f in batches.drain()] == [(6, ["c"])]
    assert batches.drain() == []


def test_changes_with_and_without_mutation_times_are_apart() -> None:
    batches = RouteChangeBatches()
    batches.add(100, change("a", mutated_at_ms=60))
    batches.add(100, change("b"))
    timed, untimed = (f for _, f in batches.drain())
    assert (timed["topics"], timed["waited_ms"]) == (["a"], [40])
    assert untimed["topics"] == ["b"] and "waited_ms" not in untimed


def test_rules_go_to_the_silent_record_of_the_latest_change_only() -> None:
    batches = RouteChangeBatches(max_topics=1)
    batches.add(1, change("a", notify=False, causes=["expiry"]))
    assert not batches.add_rules("b", 1, ["expiry"])  # not the latest change
    assert not batches.add_rules("a", 2, ["expiry"])  # not its version
    assert batches.add_rules("a", 1, ["expiry"])
    # full: the next change of that key completes it, rules and all
    [(_, full)] = batches.add(1, change("c", notify=False, causes=["expiry"]))
    assert (full["topics"], full["rules"]) == (["a"], ["expiry"])
    batches.add(1, change("d"))
    assert not batches.add_rules("d", 1, ["register"])  # a notified change has no rules


def test_the_bound_is_at_least_one_topic() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RouteChangeBatches(max_topics=0)
