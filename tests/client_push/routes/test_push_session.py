"""The push contract as a sans-I/O core: events in, actions out, no reactor and no socket.

This module imports no Twisted, directly or through what it imports (the first test checks
that in a fresh interpreter).
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.departures import ONLY_B, TWO

from client_push.config import ClientConfig
from client_push.routes.events import (
    BROKER_ARRIVED,
    BROKER_GONE,
    CONFIRM,
    EPOCH,
    GAP,
    NOTIFY,
    RECONNECT,
    SUBSCRIBE,
    VERSION_CHECK,
    BrokerEvent,
    RouteEvent,
)
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.negative_cache import NegativeCache
from client_push.routes.push_actions import (
    Action,
    AdoptRoute,
    Announce,
    AwaitVersion,
    BackOff,
    ClearAbsence,
    DropRoute,
    FollowUp,
    ForgetVersions,
    InstallRoute,
    KeepStale,
    MoveTo,
    Refetch,
    SendSubscribe,
    SendUnsubscribe,
    SetPushHealthy,
    SpreadRefetch,
)
from client_push.routes.push_session import PushSession
from client_push.routes.refetch_schedule import RefetchSchedule
from client_push.routes.route_cache import RouteCache
from client_push.routes.subscriptions import Subscriptions
from client_push.routes.telemetry import RefetchRecord
from protocol.bodies import encode_route
from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import encode_notification, read_server_request
from protocol.push_events import (
    BrokerAddress,
    BrokerChange,
    BrokerChangeKind,
    ChangeKind,
    RouteChanged,
    SubscribeAck,
    TopicStep,
    TopicVersion,
    Unreadable,
)
from protocol.route_model import TopicRouteData

NS = "10.0.0.9:9876"
NOTIFY_CODE = RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED


class Records:
    """A telemetry sink that keeps what it is given."""

    def __init__(self) -> None:
        self.records: list[RefetchRecord] = []

    def record(self, rec: RefetchRecord) -> None:
        self.records.append(rec)

    def close(self) -> None:
        pass


class Rig:
    """A session and its subscriptions over held routes, on a clock the test moves by hand
    (seconds). What they decide about the held routes and the refetch schedule is carried out
    on the real tables (``HeldRoutes.apply``, ``RefetchSchedule``), as the client's glue does;
    the actions that remain, with ``Announce`` for each route state that changed, are returned.
    """

    def __init__(self, held: dict[str, int], **overrides: Any) -> None:
        self.now = 100.0
        self.config = ClientConfig(namesrv_addrs=(NS,), **overrides)
        self.cache = RouteCache(self.config.topic_idle_expiry_ms)
        self.negative = NegativeCache(self.config.negative_ttl_ms)
        self.telemetry = Records()
        self.routes = HeldRoutes(self.cache, self.negative, self.telemetry, lambda: NS)
        self.counters: Counter[str] = Counter()
        cfg = self.config
        self.schedule = RefetchSchedule(
            cfg.untrusted_retry_initial_ms, cfg.untrusted_retry_max_ms, random.Random(5)
        )
        self.session = PushSession(
            cfg,
            self.cache,
            clock=lambda: self.now,
            counters=self.counters,
            namesrv=lambda: NS,
        )
        self.subs = Subscriptions(
            cfg,
            self.session,
            self.cache,
            self.negative,
            self.schedule,
            clock=lambda: self.now,
            counters=self.counters,
        )
        self.sequence = 0
        for topic, version in held.items():
            self.hold(topic, version)

    def hold(self, topic: str, version: int, route: TopicRouteData = TWO) -> None:
        now = self.now_ms
        self.cache.touch(topic, now)
        self.cache.put(topic, route, version, now)

    def version(self, topic: str) -> int:
        held = self.cache.peek(topic)
        assert held is not None
        return held.version

    @property
    def now_ms(self) -> int:
        return int(self.now * 1000)

    def carry(self, actions: list[Action]) -> list[Action]:
        out: list[Action] = []
        for action in actions:
            if isinstance(
                action, AdoptRoute | KeepStale | DropRoute | ClearAbsence | ForgetVersions
            ):
                event = self.routes.apply(action, self.now_ms)
                if isinstance(action, DropRoute):
                    self.schedule.discard(action.topic)
                if event is not None:
                    self.counters["routes_kept_stale"] += isinstance(action, KeepStale)
                    out.append(Announce(event))
            elif isinstance(action, SpreadRefetch | BackOff):
                cause, queued = self.schedule.apply(action, self.now * 1000.0)
                self.counters[f"spread_queued.{cause}"] += queued
            else:
                out.append(action)
        return out

    def subscribed(self, epoch: str = "e1") -> list[Action]:
        """Connect and have every held topic acknowledged at the version held."""
        self.subs.connected()
        held = self.cache.held()
        versions = tuple(TopicVersion(t, self.version(t), True) for t in held)
        return self.acked(held, SUBSCRIBE, SubscribeAck(versions, epoch))

    def acked(self, batch: Sequence[str], cause: str, ack: SubscribeAck) -> list[Action]:
        return self.carry(self.subs.acked(batch, cause, ack))

    def refused(self, *args: Any) -> list[Action]:
        return self.carry(self.subs.refused(*args))

    def notify(
        self,
        changes: Sequence[tuple[str, int, int] | tuple[str, int, int, bytes]] = (),
        brokers: tuple[BrokerChange, ...] = (),
        *,
        sequence: int | None = None,
        epoch: str = "e1",
    ) -> list[Action]:
        """A NOTIFY as the client's edge reads it (inline routes decoded there)."""
        self.sequence = sequence if sequence is not None else self.sequence + 1
        plain = [c[:3] for c in changes]
        routes = [c[3] if len(c) > 3 else b"" for c in changes]  # type: ignore[misc]
        body = encode_notification(plain, self.sequence, 5_000, epoch, brokers, routes)
        code = RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED
        note = read_server_request(code, body, max_route_bytes=self.config.max_route_body_bytes)
        assert isinstance(note, RouteChanged)
        return self.carry(self.session.on_server_request(note, NS))

    def spread_due(self) -> list[Action]:
        due, skipped = self.schedule.due(self.now * 1000.0, self.cache)
        self.counters["spread_already_held"] += skipped
        return list(due)

    def expire_idle(self, keep: set[str]) -> list[Action]:
        return self.subs.dropped(self.routes.expire(self.now_ms, keep))

    def release(self, topics: list[str]) -> list[Action]:
        gone = [t for t in topics if self.cache.is_held(t)]
        for topic in gone:
            self.routes.release(topic)
            self.schedule.discard(topic)
        return self.subs.dropped(gone)


def refetched(actions: list[Action]) -> list[tuple[str, str, int | None]]:
    return [(a.topic, a.cause, a.wanted_version) for a in actions if isinstance(a, Refetch)]


def broker_change(
    kind: BrokerChangeKind, steps: tuple[tuple[str, int, int], ...], window_ms: int = 0
) -> BrokerChange:
    return BrokerChange(
        kind=int(kind),
        broker_name="broker-a",
        cluster="DefaultCluster",
        addrs=(BrokerAddress(0, "10.0.0.1:10911"),),
        cause="unregister" if kind == BrokerChangeKind.DEPARTED else "register",
        broker_name_gone=kind == BrokerChangeKind.DEPARTED,
        read_only=False,
        topics=tuple(TopicStep(*s) for s in steps),
        refetch_window_ms=window_ms,
    )


UPDATED = int(ChangeKind.UPDATED)


# -- the core is sans-I/O ---------------------------------------------------------------------


def test_the_push_session_and_these_tests_import_no_twisted():
    """In a fresh interpreter: the session, its actions and this very module."""
    probe = (
        "import importlib.util, sys, client_push.routes.push_session, "
        "client_push.routes.push_actions\n"
        f"sys.path.insert(0, {str(Path(__file__).parents[2])!r})\n"
        f"spec = importlib.util.spec_from_file_location('probe', {__file__!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('twisted'))\n"
        "assert not loaded, loaded\n"
    )
    root = Path(__file__).resolve().parents[3]  # the code under test, not an installed copy
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=root, check=False
    )
    assert done.returncode == 0, done.stderr


# -- notifications ----------------------------------------------------------------------------


def test_an_in_order_notification_refetches_only_topics_notified_newer_than_held():
    rig = Rig({"A": 3, "B": 5, "C": 2})
    rig.subscribed()
    actions = rig.notify([("A", 4, UPDATED), ("B", 5, UPDATED), ("C", 1, UPDATED), ("D", 9, 0)])
    assert actions == [Refetch("A", NOTIFY, 4, 5_000)]
    assert rig.counters["notify_already_held"] == 2
    assert rig.counters["notify_not_held"] == 1


def test_a_notified_version_already_held_asks_nothing():
    rig = Rig({"A": 7})
    rig.subscribed()
    assert rig.notify([("A", 7, UPDATED)]) == []
    assert rig.notify([("A", 6, UPDATED)]) == []
    assert rig.counters["notify_already_held"] == 2


def test_a_sequence_gap_refetches_every_held_topic_whatever_its_version():
    rig = Rig({"A": 3, "B": 5})
    rig.subscribed()
    rig.notify([("A", 4, UPDATED)])
    actions = rig.notify([("B", 5, UPDATED)], sequence=3)  # frame 2 was lost
    assert refetched(actions) == [("A", GAP, None), ("B", GAP, None)]
    assert all(a.notified_at_ms == 5_000 for a in actions if isinstance(a, Refetch))
    assert rig.counters["refetch_all.gap"] == 1


def test_a_new_epoch_refetches_every_held_topic():
    rig = Rig({"A": 3, "B": 5})
    rig.subscribed(epoch="e1")
    actions = rig.notify([("A", 1, UPDATED)], epoch="e2")
    assert refetched(actions) == [("A", EPOCH, None), ("B", EPOCH, None)]


def test_a_frame_older_than_one_seen_is_ignored():
    rig = Rig({"A": 3})
    rig.subscribed()
    rig.notify([], sequence=5)
    assert rig.notify([("A", 9, UPDATED)], sequence=4) == []
    assert rig.counters["notify_stale"] == 1


def test_an_unreadable_notification_refetches_every_held_topic():
    rig = Rig({"A": 3, "B": 5})
    rig.subscribed()
    actions = rig.carry(rig.session.on_server_request(Unreadable(NOTIFY_CODE, "truncated"), NS))
    assert refetched(actions) == [("A", GAP, None), ("B", GAP, None)]


def test_deleted_makes_the_topic_absent_and_follows_up_a_fetch_in_flight():
    rig = Rig({"A": 3})
    rig.subscribed()
    actions = rig.notify([("A", 4, int(ChangeKind.DELETED))])
    event = RouteEvent("A", False, 4, None, NOTIFY, rig.now_ms, NS)
    assert actions == [Announce(event), FollowUp("A", NOTIFY, 4, 5_000)]
    assert rig.cache.peek("A") is None and rig.cache.is_held("A")
    assert "A" in rig.routes.absent and rig.negative.is_absent("A", rig.now_ms)
    assert [(r.topic, r.version, r.exists) for r in rig.telemetry.records] == [("A", 4, False)]
    # Known absent already: a second DELETED tells no listener again.
    assert rig.notify([("A", 5, int(ChangeKind.DELETED))]) == [FollowUp("A", NOTIFY, 5, 5_000)]


def test_created_clears_a_remembered_absence_and_refetches():
    rig = Rig({"A": 3})
    rig.subscribed()
    rig.notify([("A", 4, int(ChangeKind.DELETED))])
    actions = rig.notify([("A", 5, int(ChangeKind.CREATED))])
    assert refetched(actions) == [("A", NOTIFY, 5)]
    assert not rig.negative.is_absent("A", rig.now_ms)


# -- broker changes ---------------------------------------------------------------------------


def test_an_exact_departure_step_is_adopted_without_a_request():
    rig = Rig({"T": 4}, confirm_exact_departures=False)
    rig.subscribed()
    actions = rig.notify(brokers=(broker_change(BrokerChangeKind.DEPARTED, (("T", 5, 4),)),))
    held = rig.cache.peek("T")
    assert held is not None and held.version == 5 and held.route == ONLY_B
    assert refetched(actions) == []
    route_events = [
        a.event for a in actions if isinstance(a, Announce) and isinstance(a.event, RouteEvent)
    ]
    assert [(e.topic, e.version, e.cause) for e in route_events] == [("T", 5, BROKER_GONE)]
    broker = actions[-1]
    assert isinstance(broker, Announce) and isinstance(broker.event, BrokerEvent)
    assert broker.event.kind == "departed" and broker.event.topics == ("T",)
    assert rig.counters["departure_exact"] == 1 and rig.telemetry.records == []


def test_an_inexact_departure_drops_the_broker_keeps_the_version_and_confirms_later():
    rig = Rig({"T": 4})
    rig.subscribed()
    actions = rig.notify(brokers=(broker_change(BrokerChangeKind.DEPARTED, (("T", 6, 5),)),))
    held = rig.cache.peek("T")
    assert held is not None and held.version == 4 and held.route == ONLY_B
    assert rig.counters["departure_inexact"] == 1
    assert len(rig.schedule) == 1  # the confirmation, after its delay
    due = rig.schedule.next_due_ms()
    assert due is not None and due >= rig.now_ms + 1_000
    # An answer to a fetch sent earlier, from before the departure, must not undo it.
    assert AwaitVersion("T", 6) in actions
    rig.now += 11.0  # past the delay and the window
    assert refetched(rig.spread_due()) == [("T", CONFIRM, 6)]


def test_a_departure_during_a_gap_is_applied_but_never_exactly():
    rig = Rig({"T": 4})
    rig.subscribed()
    entry = broker_change(BrokerChangeKind.DEPARTED, (("T", 5, 4),))
    actions = rig.notify(brokers=(entry,), sequence=3)
    held = rig.cache.peek("T")
    assert held is not None and held.version == 4 and held.route == ONLY_B
    assert refetched(actions) == [("T", GAP, None)]
    assert rig.counters["departure_inexact"] == 1


def test_an_arrival_spreads_the_refetches_of_changed_topics_over_its_window():
    topics = {f"T{i}": 4 for i in range(20)}
    rig = Rig({**topics, "U": 2})
    rig.subscribed()
    start = rig.now_ms
    steps = (*((t, 5, 4) for t in topics), ("U", 2, 1))
    actions = rig.notify(brokers=(broker_change(BrokerChangeKind.ARRIVED, steps, 20_000),))
    assert refetched(actions) == []
    broker = actions[-1]
    assert isinstance(broker, Announce) and isinstance(broker.event, BrokerEvent)
    assert set(broker.event.topics) == set(topics)  # U holds the arrival's version already
    due: dict[str, float] = {}
    for _ in range(200):
        wake = rig.schedule.next_due_ms()
        if wake is None:
            break
        rig.now = wake / 1000.0
        actions = rig.spread_due()
        for topic, cause, wanted in refetched(actions):
            assert cause == BROKER_ARRIVED and wanted == 5 and topic not in due
            due[topic] = rig.now * 1000.0
    assert set(due) == set(topics)
    assert all(start <= at < start + 20_000 for at in due.values())
    assert max(due.values()) - min(due.values()) > 10_000  # spread, not bunched
    assert rig.counters["spread_queued.broker_arrived"] == 20


# -- subscribe answers and connections --------------------------------------------------------


def test_a_subscribe_ack_with_newer_versions_refetches_those_topics():
    rig = Rig({"A": 3, "B": 5, "C": 1})
    assert rig.subs.connected() == [SendSubscribe(("A", "B", "C"), SUBSCRIBE)]
    ack = SubscribeAck(
        (TopicVersion("A", 4, True), TopicVersion("B", 5, True), TopicVersion("C", 1, False)),
        "e1",
    )
    actions = rig.acked(["A", "B", "C"], SUBSCRIBE, ack)
    # C exists no more there: its route is kept, stale, and asked for again.
    kept = rig.cache.peek("C")
    assert kept is not None and kept.stale and kept.version == 1
    stale_c = RouteEvent("C", True, 1, kept, SUBSCRIBE, rig.now_ms, NS, stale=True)
    assert actions == [
        SetPushHealthy(True),
        Refetch("A", SUBSCRIBE, 4),
        Announce(stale_c),
        Refetch("C", SUBSCRIBE),
    ]
    assert rig.subs.push_healthy and rig.subs.count == 3
    assert rig.subs.poll_interval_ms == rig.config.poll_interval_with_push_ms


def test_an_ack_for_topics_expired_meanwhile_unsubscribes_them():
    rig = Rig({"A": 3})
    rig.subs.connected()
    ack = SubscribeAck((TopicVersion("A", 3, True), TopicVersion("Z", 1, True)), "e1")
    actions = rig.acked(["A", "Z"], SUBSCRIBE, ack)
    assert actions == [SendUnsubscribe(("Z",)), SetPushHealthy(True)]


def test_a_reconnect_to_another_epoch_refetches_everything_held():
    rig = Rig({"A": 3, "B": 5})
    rig.subscribed(epoch="e1")
    rig.subs.disconnected()
    assert rig.subs.connected() == [SendSubscribe(("A", "B"), RECONNECT)]
    ack = SubscribeAck((TopicVersion("A", 3, True), TopicVersion("B", 5, True)), "e2")
    actions = rig.acked(["A", "B"], RECONNECT, ack)
    assert refetched(actions) == [("A", RECONNECT, None), ("B", RECONNECT, None)]


def test_request_code_not_supported_falls_back_to_polling():
    rig = Rig({"A": 3})
    rig.subscribed()
    rig.subs.disconnected()
    rig.subs.connected()
    actions = rig.refused(
        NS, ["A"], RECONNECT, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "no push here"
    )
    assert refetched(actions) == [("A", RECONNECT, None)]
    session = rig.subs
    assert session.push_unsupported and not session.push_healthy
    assert session.poll_interval_ms == rig.config.poll_interval_ms
    assert session.version_check() == []
    assert not session.want("B") and session.flush() == []
    assert [a for a in session.poll() if isinstance(a, SendSubscribe)] == []


def test_another_refusal_marks_push_unhealthy_and_counts():
    rig = Rig({"A": 3})
    rig.subscribed()
    actions = rig.refused(NS, ["A"], SUBSCRIBE, ResponseCode.SYSTEM_BUSY, "")
    assert actions == [SetPushHealthy(False)]
    assert rig.counters["subscribe_refused"] == 1 and not rig.subs.push_unsupported


def test_go_away_moves_to_another_name_server():
    rig = Rig({"A": 3})
    rig.subscribed()
    assert rig.session.go_away(["10.0.0.7:9876"]) == [MoveTo(("10.0.0.7:9876",), True)]
    assert rig.counters["go_away_received"] == 1
    refused = rig.refused(NS, ["A"], SUBSCRIBE, ResponseCode.GO_AWAY, "bye")
    assert refused == [MoveTo((), False)]


def test_leaving_a_server_for_good_unsubscribes_but_a_server_going_away_is_not_told():
    rig = Rig({"B": 1, "A": 3})
    rig.subscribed()
    left = rig.subs.switching(going_away=False, old_connected=True)
    assert left == [SendUnsubscribe(("A", "B")), SetPushHealthy(False)]
    rig.subscribed()
    assert rig.subs.switching(going_away=True, old_connected=True) == [SetPushHealthy(False)]


def test_the_version_check_resubscribes_held_topics_but_skips_spread_ones_in_its_answer():
    rig = Rig({"A": 3, "B": 5})
    rig.subscribed()
    assert rig.subs.version_check() == [SendSubscribe(("A", "B"), VERSION_CHECK)]
    rig.notify(brokers=(broker_change(BrokerChangeKind.ARRIVED, (("B", 6, 5),)),))
    ack = SubscribeAck((TopicVersion("A", 4, True), TopicVersion("B", 6, True)), "e1")
    actions = rig.acked(["A", "B"], VERSION_CHECK, ack)
    assert refetched(actions) == [("A", VERSION_CHECK, 4)]


def test_a_failed_version_check_is_subscribed_again_at_the_next_poll_and_push_recovers():
    rig = Rig({"A": 3, "B": 5})
    rig.subscribed()
    assert rig.subs.version_check() == [SendSubscribe(("A", "B"), VERSION_CHECK)]
    # The version check timed out: whether the server still holds them is unknown.
    assert rig.subs.failed(["A", "B"], VERSION_CHECK) == [SetPushHealthy(False)]
    assert rig.subs.version_check() == []  # none while push is not known to work
    again = [a for a in rig.subs.poll() if isinstance(a, SendSubscribe)]
    assert again == [SendSubscribe(("A", "B"), SUBSCRIBE)]
    ack = SubscribeAck((TopicVersion("A", 3, True), TopicVersion("B", 6, True)), "e1")
    actions = rig.acked(["A", "B"], SUBSCRIBE, ack)
    assert SetPushHealthy(True) in actions and refetched(actions) == [("B", SUBSCRIBE, 6)]
    assert rig.subs.poll_interval_ms == rig.config.poll_interval_with_push_ms


@pytest.mark.parametrize("how", ["refused", "unreadable"])
def test_a_refused_or_unreadable_resubscribe_is_tried_again_at_the_next_poll(how):
    rig = Rig({"A": 3})
    rig.subscribed()
    if how == "refused":
        rig.refused(NS, ["A"], VERSION_CHECK, ResponseCode.SYSTEM_BUSY, "")
    else:
        rig.subs.unreadable(NS, "garbage")
    assert [a for a in rig.subs.poll() if isinstance(a, SendSubscribe)] == [
        SendSubscribe(("A",), SUBSCRIBE)
    ]


def test_a_healthy_poll_subscribes_only_what_is_missing():
    rig = Rig({"A": 3})
    rig.subscribed()
    rig.hold("B", 1)
    assert [a for a in rig.subs.poll() if isinstance(a, SendSubscribe)] == [
        SendSubscribe(("B",), SUBSCRIBE)
    ]


def test_idle_topics_expire_and_are_unsubscribed_unless_kept():
    rig = Rig({"A": 3, "B": 5, "C": 1})
    rig.subscribed()
    rig.now += rig.config.topic_idle_expiry_ms / 1000.0
    assert rig.expire_idle(keep={"B"}) == [SendUnsubscribe(("A", "C"))]
    assert rig.cache.held() == ["B"] and rig.subs.count == 1


# -- the invariant ----------------------------------------------------------------------------


@given(
    st.dictionaries(
        st.sampled_from([f"t{i}" for i in range(12)]),
        st.tuples(st.integers(0, 20), st.integers(0, 20)),
        max_size=12,
    ),
    st.sets(st.sampled_from([f"t{i}" for i in range(12)]), max_size=12),
)
def test_every_notified_version_newer_than_held_leads_to_exactly_one_refetch(
    versions: dict[str, tuple[int, int]], not_held: set[str]
):
    """In an in-order frame, a change refetches its topic once iff it is held at an older
    version; an equal or older notified version, or a topic not held, asks nothing."""
    held = {t: h for t, (h, _) in versions.items() if t not in not_held}
    rig = Rig(held)
    rig.subscribed()
    actions = rig.notify([(t, n, UPDATED) for t, (_, n) in versions.items()])
    expected = sorted(
        (t, NOTIFY, n) for t, (h, n) in versions.items() if t not in not_held and n > h
    )
    assert sorted(refetched(actions)) == expected
    assert all(isinstance(a, Refetch) for a in actions)


# -- inline routes ----------------------------------------------------------------------------


def test_an_inline_route_newer_than_held_is_installed_with_no_request():
    rig = Rig({"A": 3, "B": 5, "C": 2})
    rig.subscribed()
    body = encode_route(ONLY_B, standard_json=True)
    actions = rig.notify(
        [("A", 4, UPDATED, body), ("B", 5, UPDATED, body), ("C", 3, UPDATED), ("D", 9, 0, body)]
    )
    assert actions == [
        InstallRoute("A", ONLY_B, 4, 5_000),
        FollowUp("A", NOTIFY, 4, 5_000),  # a fetch in flight may answer from before it
        Refetch("C", NOTIFY, 3, 5_000),  # sent without its route: the refetch path
    ]
    assert rig.counters["inline_installed"] == 1
    assert rig.counters["notify_already_held"] == 1 and rig.counters["notify_not_held"] == 1


def test_an_inline_route_that_cannot_be_read_is_refetched():
    rig = Rig({"A": 3})
    rig.subscribed()
    assert rig.notify([("A", 4, UPDATED, b"{not json")]) == [Refetch("A", NOTIFY, 4, 5_000)]
    assert rig.counters["inline_unreadable"] == 1


def test_inline_routes_of_a_frame_after_a_gap_are_not_trusted():

    rig = Rig({"A": 3, "B": 1})
    rig.subscribed()
    body = encode_route(ONLY_B, standard_json=True)
    actions = rig.notify([("A", 4, UPDATED, body)], sequence=3)
    assert sorted(refetched(actions)) == [("A", GAP, None), ("B", GAP, None)]
    assert rig.version("A") == 3


def test_an_inline_route_of_a_created_topic_ends_its_absence():

    rig = Rig({})
    rig.cache.touch("N", rig.now_ms)
    rig.routes.learn_absent("N", 1, NOTIFY, None, rig.now_ms, rig.now_ms)
    rig.subs.connected()
    ack = SubscribeAck((TopicVersion("N", 1, False),), "e1")
    rig.acked(["N"], SUBSCRIBE, ack)
    body = encode_route(TWO, standard_json=True)
    actions = rig.notify([("N", 2, int(ChangeKind.CREATED), body)])
    assert actions[0] == InstallRoute("N", TWO, 2, 5_000)
    assert not rig.negative.is_absent("N", rig.now_ms)


# -- untrusted answers: retried with backoff, bounded ------------------------------------------


def test_a_server_that_never_answers_trustworthily_is_asked_at_a_bounded_rate():
    """A hostile (or forever warming) server: each held topic is asked again at most once per
    backoff, the pause grows to ``untrusted_retry_max_ms``, and the retry table never holds
    more than the held topics; released topics leave nothing behind."""
    topics = {f"T{i}": 1 for i in range(200)}
    rig = Rig(topics)
    rig.subscribed()
    asked = 0
    for _ in range(3_600):  # an hour, one second at a time
        rig.now += 1.0
        due = rig.spread_due()
        retries = [a for a in due if isinstance(a, Refetch)]
        asked += len(retries)
        for action in retries:
            rig.carry(rig.session.untrusted(action.topic))  # its answer: SYSTEM_ERROR again
        if rig.now == 101.0:
            for topic in topics:
                rig.carry(rig.session.untrusted(topic))
        assert rig.schedule.backing_off <= len(topics)
    # 1 s doubling to 30 s (each pause at least half of it): under 3600/15 + 5 per topic.
    assert asked <= len(topics) * (3_600 // 15 + 5)
    assert asked >= len(topics) * (3_600 // 30 - 1)
    rig.release(list(topics))
    assert rig.schedule.backing_off == 0 and not rig.spread_due()
