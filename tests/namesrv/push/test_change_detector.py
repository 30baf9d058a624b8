from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from namesrv.config import SuppressionConfig
from namesrv.ops.events import (
    BrokerChanged,
    ConnectionClosed,
    RouteChanged,
    RouteSuppressed,
    SubscriptionsChanged,
    SuppressionsCounted,
)
from namesrv.push.change_detector import (
    RULE_OF_CAUSE,
    SETTLE_BATCH_MAX,
    SETTLE_CHECK,
    ChangeDetector,
    Notification,
)
from namesrv.push.subscriber import Subscriber
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.routes.change_cause import ChangeCause
from protocol.push_codec import ChangeKind

CREATED, UPDATED, DELETED = ChangeKind.CREATED, ChangeKind.UPDATED, ChangeKind.DELETED
UNROUTED = ChangeKind.UNROUTED
LOUD = ChangeCause.REGISTER  # notifies under the default config
QUIET = ChangeCause.BROKER_STARTUP  # silent under the default config
DELETE = object()
"""A step that deletes the topic (DELETE_TOPIC), where None only leaves it without a route."""
ALL_LOUD = SuppressionConfig(
    broker_startup=False, unregister=False, channel_close=False, expiry=False
)


class RecordedEvents:
    """An event sink that hands each event on as the journal names it: (name, fields)."""

    def __init__(self, hear: Callable[[str, dict[str, Any]], None]) -> None:
        self.hear = hear

    def route_changed(self, change: RouteChanged) -> None:
        self.hear("route_changed", change.fields())

    def route_suppressed(self, suppressed: RouteSuppressed) -> None:
        self.hear("suppressed", suppressed.fields())

    def suppressions_counted(self, counted: SuppressionsCounted) -> None:
        self.hear("suppressed_counts", {"rules": counted.rules})

    def broker_changed(self, change: BrokerChanged) -> None:
        self.hear("broker_event", change.fields())

    def subscriptions_changed(self, change: SubscriptionsChanged) -> None:
        self.hear(change.event, change.fields())

    def connection_closed(self, closed: ConnectionClosed) -> None:
        self.hear("connection_closed", closed._asdict())


class Routes:
    """A stand-in route table that counts how often it is asked whether a topic exists."""

    def __init__(self) -> None:
        self.table: dict[str, bytes] = {}
        self.calls = 0

    def exists(self, topic: str) -> bool:
        self.calls += 1
        return topic in self.table


class Harness:
    def __init__(
        self,
        suppress: SuppressionConfig | None = None,
        per_conn: int = 1000,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.routes = Routes()
        self.subs = SubscriptionRegistry(per_conn, 10_000_000)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.detector = ChangeDetector(
            self.routes.exists,
            self.subs,
            suppress or SuppressionConfig(),
            "epoch-1",
            events=RecordedEvents(lambda name, data: self.events.append((name, data))),
            clock_ms=clock_ms,
        )
        self.now = 1_000

    def set(self, topic: str, route: bytes | None, cause: ChangeCause = LOUD) -> None:
        """Change the route and mark it, as the registry does: only when it really changed."""
        if self.routes.table.get(topic) == route:
            return
        if route is None:
            self.routes.table.pop(topic, None)
        else:
            self.routes.table[topic] = route
        self.detector.mark([topic], cause)

    def subscribe(self, conn: Subscriber, *topics: str) -> None:
        for topic in topics:
            self.detector.version(topic)
        self.subs.subscribe(conn, topics)

    def unsubscribe(self, conn: Subscriber, *topics: str) -> None:
        removed = self.subs.unsubscribe(conn, topics)
        self.detector.discard_debt(conn, removed)

    def tick(self, **kwargs: Any) -> list[Notification]:
        self.now += 1_000
        kwargs.setdefault("can_send", lambda conn: True)
        kwargs.setdefault("degraded", False)
        return self.detector.tick(self.now, **kwargs)


def by_conn(notes: list[Notification]) -> dict[Subscriber, Notification]:
    result = {n.conn: n for n in notes}
    assert len(result) == len(notes), "more than one frame for a connection in one tick"
    return result


def test_every_cause_maps_to_a_suppression_rule() -> None:
    rule_names = {f.name for f in fields(SuppressionConfig)}
    assert set(RULE_OF_CAUSE) == set(ChangeCause)
    assert set(RULE_OF_CAUSE.values()) == rule_names


def test_an_unmarked_topic_bumps_nothing_and_notifies_no_one() -> None:
    h = Harness()
    h.set("a", b"r1")
    h.subscribe("c1", "a")
    assert h.detector.version("a") == (1, True)
    h.tick()
    h.set("a", b"r1")  # the same route again: the registry reports nothing
    assert h.tick() == []
    assert h.detector.version("a") == (1, True)
    assert h.detector.stats.versions_bumped == 1


def test_settling_never_looks_at_the_route_only_at_whether_it_exists() -> None:
    h = Harness()
    h.subscribe("c1", "a")
    h.set("a", b"1")
    h.set("a", b"2")
    h.set("a", b"3")
    assert h.tick()[0].changes == (("a", 1, CREATED),)
    assert h.routes.calls == 1  # one O(1) existence check for three marks


def test_max_settle_spreads_a_large_change_set_over_ticks_in_mark_order() -> None:
    h = Harness(per_conn=10_000)
    topics = [f"T{i}" for i in range(10)]
    h.subscribe("c1", *topics)
    for topic in topics:
        h.set(topic, b"1")
    first = h.tick(max_settle=4)
    assert [c[0] for c in first[0].changes] == topics[:4]
    assert h.detector.dirty_count == 6
    assert [c[0] for c in h.tick(max_settle=4)[0].changes] == topics[4:8]
    assert [c[0] for c in h.tick(max_settle=4)[0].changes] == topics[8:]
    assert h.detector.dirty_count == 0
    assert h.detector.stats.versions_bumped == 10


def test_between_two_looks_at_the_time_budget_at_most_a_batch_is_settled() -> None:
    # No journal and nobody subscribed: the batches take the C-level path and grow.
    routes = Routes()
    detector = ChangeDetector(
        routes.exists, SubscriptionRegistry(1000, 10_000_000), SuppressionConfig(), "epoch-1"
    )
    topics = [f"T{i}" for i in range(20_000)]
    routes.table.update(dict.fromkeys(topics, b"1"))
    detector.mark(topics, LOUD)
    gaps: list[int] = []
    left = [len(topics)]

    def out_of_time() -> bool:
        gaps.append(left[0] - detector.dirty_count)
        left[0] = detector.dirty_count
        return len(gaps) >= 8

    detector.tick(2_000, can_send=lambda conn: True, degraded=False, out_of_time=out_of_time)
    assert gaps[0] == SETTLE_CHECK
    assert max(gaps) == SETTLE_BATCH_MAX  # grown to the cap, never past it
    assert detector.dirty_count == len(topics) - sum(gaps) > 0  # the rest waits


def test_marking_a_topic_that_never_existed_records_nothing() -> None:
    h = Harness()
    h.detector.mark(["ghost"], ChangeCause.DELETE_TOPIC)
    assert h.tick() == []
    assert h.detector.version("ghost") == (0, False)
    assert h.detector.tracked_topics == 0


def test_one_frame_per_connection_per_tick_holds_all_its_changed_topics() -> None:
    h = Harness()
    h.subscribe("c1", "a", "b", "c")
    h.set("a", b"1")
    h.set("b", b"1")
    h.set("a", b"2")
    notes = h.tick()
    assert len(notes) == 1
    (note,) = notes
    assert note.conn == "c1"
    assert note.changes == (("a", 1, CREATED), ("b", 1, CREATED))
    assert (note.sequence, note.emitted_at_ms, note.epoch) == (1, h.now, "epoch-1")
    h.set("c", b"1")
    assert [n.sequence for n in h.tick()] == [2]


def test_only_subscribers_of_a_changed_topic_are_notified() -> None:
    h = Harness()
    h.set("a", b"1")
    h.set("b", b"1")
    h.tick()
    h.subscribe("c1", "a")
    h.subscribe("c2", "b")
    h.subscribe("c3", "a", "b")
    h.set("a", b"2", ChangeCause.WIPE_WRITE_PERM)
    notes = by_conn(h.tick())
    assert set(notes) == {"c1", "c3"}
    assert notes["c1"].changes == (("a", 2, UPDATED),)
    assert notes["c3"].changes == (("a", 2, UPDATED),)


def test_topic_subscribed_before_it_exists_is_notified_as_created() -> None:
    h = Harness()
    h.subscribe("c1", "later")
    assert h.detector.version("later") == (0, False)
    assert h.tick() == []
    h.set("later", b"1", ChangeCause.REGISTER_TOPIC)
    assert h.tick()[0].changes == (("later", 1, CREATED),)


def test_deleted_topic_is_notified_and_recreation_continues_its_versions() -> None:
    h = Harness()
    h.set("a", b"1")
    h.set("a", b"2")
    h.tick()
    h.set("a", b"3")
    h.tick()
    h.subscribe("c1", "a")
    h.set("a", None, ChangeCause.DELETE_TOPIC)
    assert h.tick()[0].changes == (("a", 3, DELETED),)
    assert h.detector.version("a") == (3, False)
    h.set("a", b"1")
    assert h.tick()[0].changes == (("a", 4, CREATED),)


def test_get_routeinfo_settles_before_the_tick_without_double_bumping() -> None:
    h = Harness()
    h.subscribe("c1", "a")
    h.set("a", b"1")
    assert h.detector.version("a") == (1, True)
    assert h.tick()[0].changes == (("a", 1, CREATED),)
    assert h.detector.stats.versions_bumped == 1


def test_subscribing_after_a_settled_change_owes_nothing() -> None:
    h = Harness()
    h.set("a", b"1")
    h.subscribe("c1", "a")  # settles via version() first, as the server does
    assert h.tick() == []


CAUSE_CASES = [(cause, RULE_OF_CAUSE[cause]) for cause in ChangeCause]


@pytest.mark.parametrize(("cause", "rule"), CAUSE_CASES, ids=[c.value for c in ChangeCause])
@pytest.mark.parametrize("silent", [True, False])
def test_each_suppression_rule_switches_its_causes(
    cause: ChangeCause, rule: str, silent: bool
) -> None:
    h = Harness(replace(ALL_LOUD, **{rule: silent}))
    h.set("a", b"1")
    h.tick()
    before = h.detector.stats.suppressed_changes
    h.subscribe("c1", "a")
    h.events.clear()
    h.set("a", b"2", cause)
    notes = h.tick()
    assert h.detector.version("a") == (2, True), "a suppressed change still bumps the version"
    changed = [data for name, data in h.events if name == "route_changed"]
    assert changed == [
        {
            "topic": "a",
            "version": 2,
            "kind": "UPDATED",
            "causes": [cause.value],
            "notify": not silent,
        }
    ]
    if silent:
        assert notes == []
        assert ("suppressed", {"topic": "a", "version": 2, "rules": [rule]}) in h.events
        assert h.detector.stats.suppressed_changes == before + 1
    else:
        assert notes[0].changes == (("a", 2, UPDATED),)
        assert all(name != "suppressed" for name, _ in h.events)


def test_by_default_only_broker_start_up_and_departures_are_silent() -> None:
    h = Harness()
    h.subscribe("c1", "a")
    for cause in ChangeCause:
        h.set("a", cause.value.encode(), cause)
        notified = bool(h.tick())
        silent = cause in {
            ChangeCause.BROKER_STARTUP,
            ChangeCause.UNREGISTER,
            ChangeCause.CHANNEL_CLOSE,
            ChangeCause.EXPIRY,
        }
        assert notified is not silent, cause


def test_mixed_suppressed_and_loud_causes_in_one_tick_notify() -> None:
    h = Harness()
    h.subscribe("c1", "a")
    h.set("a", b"1", ChangeCause.BROKER_STARTUP)
    h.set("a", b"2", ChangeCause.DELETE_TOPIC)
    h.set("a", b"3", ChangeCause.EXPIRY)
    notes = h.tick()
    assert notes[0].changes == (("a", 1, CREATED),)
    (changed,) = [data for name, data in h.events if name == "route_changed"]
    assert changed["causes"] == ["broker_startup", "delete_topic", "expiry"]
    assert changed["notify"] is True


def test_degraded_builds_nothing_then_recovery_sends_each_topic_once_at_latest_version() -> None:
    h = Harness()
    h.subscribe("c1", "a", "b")
    h.subscribe("c2", "b")
    for version in range(1, 4):
        h.set("a", b"%d" % version)
        h.set("b", b"%d" % version)
        assert h.tick(degraded=True) == []
    assert (h.detector.pending_connections, h.detector.pending_topic_count) == (2, 3)
    notes = by_conn(h.tick())
    assert notes["c1"].changes == (("a", 3, CREATED), ("b", 3, CREATED))
    assert notes["c2"].changes == (("b", 3, CREATED),)
    assert {n.sequence for n in notes.values()} == {1}
    assert h.tick() == []
    assert (h.detector.pending_connections, h.detector.pending_topic_count) == (0, 0)


def test_max_notifications_spreads_frames_over_ticks_without_loss() -> None:
    h = Harness()
    conns = [f"c{i}" for i in range(10)]
    for conn in conns:
        h.subscribe(conn, "a")
    h.set("a", b"1")
    h.tick(degraded=True)
    served: list[Subscriber] = []
    for _ in range(4):
        batch = h.tick(max_notifications=3)
        assert len(batch) <= 3
        served.extend(n.conn for n in batch)
    assert sorted(served) == conns  # nobody twice, nobody lost
    assert h.detector.pending_connections == 0


def test_leftovers_of_a_capped_tick_go_before_newer_debt() -> None:
    h = Harness()
    h.subscribe("old1", "a1")
    h.subscribe("old2", "a2")
    h.subscribe("new", "b")
    h.set("a1", b"1")
    h.set("a2", b"1")
    assert [n.conn for n in h.tick(max_notifications=1)] == ["old1"]
    h.set("b", b"1")
    assert [n.conn for n in h.tick(max_notifications=1)] == ["old2"]
    assert [n.conn for n in h.tick(max_notifications=1)] == ["new"]


def test_slow_connection_is_skipped_then_served_once_without_sequence_gap() -> None:
    h = Harness()
    h.subscribe("slow", "a", "b")
    h.subscribe("fast", "a")
    h.set("a", b"1")
    first = by_conn(h.tick())
    assert first["slow"].sequence == 1
    blocked = {"slow"}
    h.set("a", b"2")
    assert [n.conn for n in h.tick(can_send=lambda c: c not in blocked)] == ["fast"]
    h.set("b", b"1")
    h.set("a", b"3")
    assert [n.conn for n in h.tick(can_send=lambda c: c not in blocked)] == ["fast"]
    assert h.detector.stats.slow_skips == 2
    assert h.detector.pending_topics_of("slow") == 2
    blocked.clear()
    (caught_up,) = h.tick()
    assert caught_up.conn == "slow"
    assert caught_up.sequence == 2
    assert caught_up.changes == (("a", 3, UPDATED), ("b", 1, CREATED))


def test_unsubscribe_discards_debt_and_drops_connections_left_with_none() -> None:
    h = Harness()
    h.subscribe("c1", "a", "b")
    h.set("a", b"1")
    h.set("b", b"1")
    h.tick(degraded=True)
    h.unsubscribe("c1", "a")
    assert h.detector.pending_topic_count == 1
    assert h.tick()[0].changes == (("b", 1, CREATED),)
    h.set("b", b"2")
    h.tick(degraded=True)
    h.unsubscribe("c1", "b")
    assert h.detector.pending_connections == 0
    assert h.tick() == []


def test_debt_for_topics_unsubscribed_behind_its_back_is_dropped_at_tick() -> None:
    h = Harness()
    h.subscribe("c1", "a")
    h.set("a", b"1")
    h.tick(degraded=True)
    h.subs.unsubscribe("c1", ["a"])  # discard_debt not called
    assert h.tick() == []
    assert h.detector.pending_connections == 0


def test_forget_connection_drops_debt_and_restarts_sequence() -> None:
    h = Harness()
    h.subscribe("c1", "a")
    h.set("a", b"1")
    assert h.tick()[0].sequence == 1
    h.set("a", b"2")
    h.tick(degraded=True)
    h.detector.forget_connection("c1")
    h.subs.drop_connection("c1")
    assert (h.detector.pending_connections, h.detector.pending_topic_count) == (0, 0)
    h.subscribe("c1", "a")
    h.set("a", b"3")
    assert h.tick()[0].sequence == 1


@pytest.mark.parametrize(
    ("steps", "kind"),
    [
        ([b"1", b"2"], CREATED),  # created then updated, unsent: still new to the client
        ([None], UNROUTED),  # left by a register (not a deletion): no broker serves it now
        ([DELETE], DELETED),
        ([None, b"9"], UPDATED),  # left and came back, unsent: the client's route moved
        ([DELETE, b"9"], UPDATED),
        ([b"2", None], UNROUTED),
        ([b"2", DELETE], DELETED),
        ([DELETE, b"9", None], DELETED),  # a deletion the client missed is news
    ],
)
def test_merged_debt_reports_kind_relative_to_what_the_client_knew(
    steps: list[bytes | object | None], kind: ChangeKind
) -> None:
    h = Harness()
    if kind is not CREATED:
        h.set("a", b"0")
        h.tick()
    h.subscribe("c1", "a")
    for route in steps:
        if route is DELETE:
            h.set("a", None, ChangeCause.DELETE_TOPIC)
        else:
            assert route is None or isinstance(route, bytes)
            h.set("a", route)
        h.tick(degraded=True)
    ((topic, _, got),) = h.tick()[0].changes
    assert (topic, got) == ("a", kind)


def test_stats_count_what_happened() -> None:
    h = Harness()
    h.subscribe("c1", "a", "b")
    h.subscribe("c2", "a")
    h.set("a", b"1")
    h.set("b", b"1", QUIET)
    h.tick()
    s = h.detector.stats
    assert (s.ticks, s.topics_settled, s.versions_bumped) == (1, 2, 2)
    assert (s.notifications_built, s.topics_notified, s.suppressed_changes) == (2, 2, 1)


def test_idle_ticks_cost_nothing_however_many_topics_are_subscribed() -> None:
    topics = [f"T{i}" for i in range(100_000)]
    h = Harness(per_conn=len(topics))
    conns = [f"c{i}" for i in range(10)]
    for i, conn in enumerate(conns):
        h.subs.subscribe(conn, topics[i::10])
    for topic in topics:
        h.routes.table[topic] = b"1"
    h.detector.mark(topics, QUIET)
    h.tick()
    assert h.routes.calls == len(topics)
    h.routes.calls = 0
    for _ in range(5):
        assert h.tick() == []
    assert h.routes.calls == 0
    h.set("T7", b"2")
    h.set("T12345", b"2")
    h.set("T7", b"3")
    notes = h.tick()
    assert h.routes.calls == 2
    assert sorted(n.conn for n in notes) == ["c5", "c7"]


# --- property: every unsuppressed change reaches every subscriber that stays subscribed ------

TOPICS = ["t0", "t1", "t2", "t3"]
CONNS = ["k0", "k1", "k2"]


class DetectorMachine(RuleBasedStateMachine):
    """Random marks, (un)subscriptions, closes and ticks against a plain model of obligations."""

    def __init__(self) -> None:
        super().__init__()
        self.h: Harness
        self.owed: dict[tuple[Subscriber, str], int] = {}
        """(conn, topic) -> the latest unsuppressed version not yet delivered."""
        self.delivered: dict[tuple[Subscriber, str], int] = {}
        self.loud_versions: dict[str, set[int]] = {}
        self.sequence: dict[Subscriber, int] = {}
        self.last_version: dict[str, int] = {}
        self.route_counter = 0
        self.marked: dict[str, set[ChangeCause]] = {}
        self.settled_route: dict[str, bytes | None] = {}
        self.fired: list[str] = []

    @initialize(suppress=st.builds(SuppressionConfig, *[st.booleans()] * 7))
    def setup(self, suppress: SuppressionConfig) -> None:
        self.h = Harness(suppress)
        self.h.detector.events = RecordedEvents(self._on_event)
        self.silent = {c for c, r in RULE_OF_CAUSE.items() if getattr(suppress, r)}

    def _on_event(self, name: str, data: dict[str, Any]) -> None:
        if name != "route_changed":
            return
        topic, version = data["topic"], data["version"]
        self.fired.append(topic)
        causes = self.marked.get(topic, set())
        assert data["causes"] == sorted(c.value for c in causes)
        assert data["notify"] is not (causes <= self.silent)
        assert version == self.last_version.get(topic, 0) + 1
        self.last_version[topic] = version
        if data["notify"]:
            self.loud_versions.setdefault(topic, set()).add(version)
            for conn in self.h.subs.subscribers(topic):
                self.owed[(conn, topic)] = version

    def _settled(self, topics: list[str]) -> None:
        """The detector just settled ``topics`` (all marked): every one that existed before or
        exists now fired, even one changed back to its settled route (two real changes)."""
        moved = set()
        for topic in topics:
            route = self.h.routes.table.get(topic)
            if route is not None or self.settled_route.get(topic) is not None:
                moved.add(topic)
            self.settled_route[topic] = route
            self.marked.pop(topic, None)
        assert sorted(self.fired) == sorted(moved)
        self.fired.clear()

    @rule(
        topic=st.sampled_from(TOPICS),
        cause=st.sampled_from(list(ChangeCause)),
        action=st.sampled_from(["change", "same", "delete"]),
    )
    def mutate(self, topic: str, cause: ChangeCause, action: str) -> None:
        if action == "change":
            self.route_counter += 1
            self.h.set(topic, b"%d" % self.route_counter, cause)
        elif action == "delete":
            if topic not in self.h.routes.table:
                return  # nothing to delete: the registry reports nothing
            self.h.set(topic, None, cause)
        else:
            self.h.set(topic, self.h.routes.table.get(topic), cause)  # reports nothing
            return
        self.marked.setdefault(topic, set()).add(cause)

    @rule(conn=st.sampled_from(CONNS), topics=st.lists(st.sampled_from(TOPICS), min_size=1))
    def subscribe(self, conn: str, topics: list[str]) -> None:
        settling = sorted(set(topics) & set(self.marked))
        self.h.subscribe(conn, *topics)
        self._settled(settling)

    @rule(conn=st.sampled_from(CONNS), topics=st.lists(st.sampled_from(TOPICS), min_size=1))
    def unsubscribe(self, conn: str, topics: list[str]) -> None:
        removed = self.h.subs.unsubscribe(conn, topics)
        self.h.detector.discard_debt(conn, removed)
        for topic in removed:
            self.owed.pop((conn, topic), None)
            self.delivered.pop((conn, topic), None)

    @rule(conn=st.sampled_from(CONNS))
    def close(self, conn: str) -> None:
        self.h.detector.forget_connection(conn)
        for topic in self.h.subs.drop_connection(conn):
            self.owed.pop((conn, topic), None)
            self.delivered.pop((conn, topic), None)
        self.sequence.pop(conn, None)

    @rule(topic=st.sampled_from(TOPICS))
    def get_routeinfo(self, topic: str) -> None:
        settling = [topic] if topic in self.marked else []
        version, exists = self.h.detector.version(topic)
        self._settled(settling)
        assert version == self.last_version.get(topic, 0)
        assert exists is (topic in self.h.routes.table)

    @rule(
        degraded=st.booleans(),
        slow=st.sets(st.sampled_from(CONNS)),
        cap=st.none() | st.integers(min_value=0, max_value=3),
    )
    def tick(self, degraded: bool, slow: set[str], cap: int | None) -> None:
        settling = list(self.marked)
        notes = self.h.tick(
            degraded=degraded, can_send=lambda c: c not in slow, max_notifications=cap
        )
        self._settled(settling)
        self._check(notes, slow, degraded, cap)

    def _check(
        self, notes: list[Notification], slow: set[str], degraded: bool, cap: int | None
    ) -> None:
        if degraded:
            assert notes == []
        if cap is not None:
            assert len(notes) <= cap
        by_conn(notes)
        for note in notes:
            assert note.conn not in slow
            assert note.sequence == self.sequence.get(note.conn, 0) + 1, "sequence gap"
            self.sequence[note.conn] = note.sequence
            topics = [topic for topic, _, _ in note.changes]
            assert len(topics) == len(set(topics))
            for topic, version, _ in note.changes:
                key = (note.conn, topic)
                assert self.h.subs.is_subscribed(note.conn, topic)
                assert version in self.loud_versions[topic], "notified a silent version"
                assert version > self.delivered.get(key, 0), "versions must strictly increase"
                assert key in self.owed, "notified without an unsuppressed change owed"
                assert self.owed.pop(key) == version, "not the latest version owed"
                self.delivered[key] = version

    @invariant()
    def debt_is_bounded_by_subscriptions(self) -> None:
        if hasattr(self, "h"):
            assert self.h.detector.pending_topic_count <= self.h.subs.total

    def teardown(self) -> None:
        if not hasattr(self, "h"):
            return
        for _ in range(len(CONNS) + 1):
            self.tick(degraded=False, slow=set(), cap=None)
        assert self.owed == {}, "an unsuppressed change was never delivered"
        assert self.h.detector.pending_connections == 0


DetectorMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_every_unsuppressed_change_is_eventually_notified = DetectorMachine.TestCase


def timed_harness(start_ms: int) -> tuple[Harness, list[int]]:
    """A harness whose detector stamps its marks with ``clock[0]``."""
    clock = [start_ms]
    return Harness(clock_ms=lambda: clock[0]), clock


def test_the_journal_record_says_when_the_first_mutation_was_marked() -> None:
    h, clock = timed_harness(5_000)
    h.set("a", b"1")
    clock[0] = 5_300
    h.set("a", b"2")  # a later mutation before the tick: the change began at the first
    h.set("b", b"1")
    h.tick()
    clock[0] = 7_000
    h.set("a", b"3")
    assert h.detector.version("a") == (2, True)  # settled by a lookup, not a tick
    h.set("c", b"1")
    h.set("c", None)  # back where it was: no change, and its mark is forgotten
    h.tick()
    changed = {(d["topic"], d["version"]): d for n, d in h.events if n == "route_changed"}
    assert {k: d["mutated_at_ms"] for k, d in changed.items()} == {
        ("a", 1): 5_000,
        ("b", 1): 5_300,
        ("a", 2): 7_000,
    }
    plain = Harness()
    plain.set("a", b"1")
    plain.tick()
    assert "mutated_at_ms" not in plain.events[0][1]


def test_a_capped_settle_keeps_the_mutation_time_of_what_it_leaves_marked() -> None:
    h, clock = timed_harness(1_000)
    h.set("a", b"1")
    clock[0] = 1_500
    h.set("b", b"1")
    h.tick(max_settle=1)
    h.tick(max_settle=1)
    times = [(d["topic"], d["mutated_at_ms"]) for n, d in h.events if n == "route_changed"]
    assert times == [("a", 1_000), ("b", 1_500)]


@pytest.mark.parametrize(
    ("causes", "kind"),
    [
        ([ChangeCause.UNREGISTER], UNROUTED),
        ([ChangeCause.CHANNEL_CLOSE], UNROUTED),
        ([ChangeCause.EXPIRY], UNROUTED),
        ([ChangeCause.REGISTER], UNROUTED),  # an address leaving its broker name, say
        ([ChangeCause.DELETE_TOPIC], DELETED),
        ([ChangeCause.UNLISTED], DELETED),
        ([ChangeCause.EXPIRY, ChangeCause.DELETE_TOPIC], DELETED),
        ([ChangeCause.UNLISTED, ChangeCause.UNREGISTER], DELETED),
    ],
)
def test_a_topic_that_leaves_is_deleted_only_when_a_deletion_caused_it(
    causes: list[ChangeCause], kind: ChangeKind
) -> None:
    h = Harness(ALL_LOUD)
    h.set("a", b"0")
    h.subscribe("c1", "a")
    h.routes.table.pop("a")
    for cause in causes:
        h.detector.mark(["a"], cause)
    assert h.tick()[0].changes == (("a", 2, kind),)
    [record] = [data for name, data in h.events if name == "route_changed" and data["version"] == 2]
    assert record["kind"] == kind.name  # the journal's kind, as notified
    assert h.detector.deleted("a") is (kind is DELETED)
    h.set("a", b"1")  # registered again: no longer remembered as deleted
    assert h.detector.version("a") == (3, True)
    assert not h.detector.deleted("a")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from("abcdefgh"), max_size=10), st.sampled_from(list(ChangeCause))
        ),
        max_size=8,
    )
)
def test_marks_gather_each_topics_causes_in_the_order_topics_were_first_marked(steps) -> None:
    """A topic marked again gains the cause and keeps its place; a new one joins at the end;
    the time recorded is that of its first mark."""
    now = [0]
    detector = ChangeDetector(
        lambda topic: True,
        SubscriptionRegistry(100, 1000),
        ALL_LOUD,
        "e",
        clock_ms=lambda: now[0],
    )
    expected: dict[str, set[ChangeCause]] = {}
    first_marked: dict[str, int] = {}
    for topics, cause in steps:
        now[0] += 1
        detector.mark(topics, cause)
        for topic in topics:
            expected.setdefault(topic, set()).add(cause)
            first_marked.setdefault(topic, now[0])
    marked = {
        topic: {cause for cause in ChangeCause if mask & (1 << list(ChangeCause).index(cause))}
        for topic, mask in detector._dirty.items()
    }
    assert list(marked) == list(expected)
    assert marked == expected
    assert detector._marked_at == first_marked
