"""Route push's typed events: each sink hears every event handed to the fan-out, in order, and
the counters sink counts suppressions per rule and broker changes per kind."""

from __future__ import annotations

from collections import Counter

from namesrv.ops.events import (
    TOPIC_LIST_LIMIT,
    BrokerChanged,
    ConnectionClosed,
    EventCounters,
    EventFanOut,
    RouteChanged,
    RouteSuppressed,
    SubscriptionsChanged,
    SuppressionsCounted,
)
from namesrv.ops.journal import NullJournal

ARRIVAL = BrokerChanged("ARRIVED", "register", "c1", "b1", ["10.0.0.1:10911"], False, 3, True)


class Heard:
    """A sink that keeps (sink name, event) as it hears them."""

    def __init__(self, name: str, into: list[tuple[str, object]]) -> None:
        self.name, self.into = name, into

    def hear(self, event: object) -> None:
        self.into.append((self.name, event))

    route_changed = route_suppressed = suppressions_counted = hear
    broker_changed = subscriptions_changed = connection_closed = hear


def test_the_fan_out_hands_every_kind_of_event_to_each_sink_in_order() -> None:
    heard: list[tuple[str, object]] = []
    fan = EventFanOut(Heard("first", heard), NullJournal(), Heard("second", heard))
    changed = RouteChanged("a", 2, "UPDATED", ["register"], True)
    suppressed = RouteSuppressed("a", 3, ["expiry"])
    counted = SuppressionsCounted({"expiry": 4})
    subscribed = SubscriptionsChanged(True, 7, ["a"])
    closed = ConnectionClosed(7, 1)
    fan.route_changed(changed)
    fan.route_suppressed(suppressed)
    fan.suppressions_counted(counted)
    fan.broker_changed(ARRIVAL)
    fan.subscriptions_changed(subscribed)
    fan.connection_closed(closed)
    events = [changed, suppressed, counted, ARRIVAL, subscribed, closed]
    assert heard == [(sink, event) for event in events for sink in ("first", "second")]


def test_the_counters_count_suppressions_per_rule_and_broker_changes_per_kind() -> None:
    counters: Counter[str] = Counter()
    sink = EventCounters(counters)
    sink.route_suppressed(RouteSuppressed("a", 3, ["expiry", "unregister"]))
    sink.suppressions_counted(SuppressionsCounted({"expiry": 4, "broker_startup": 2}))
    sink.broker_changed(ARRIVAL)
    sink.broker_changed(ARRIVAL._replace(kind="DEPARTED", cause="expiry"))
    sink.route_changed(RouteChanged("a", 2, "UPDATED", ["register"], True))
    sink.subscriptions_changed(SubscriptionsChanged(True, 7, ["a"]))
    sink.connection_closed(ConnectionClosed(7, 1))
    assert counters == {
        "suppressed.expiry": 5,
        "suppressed.unregister": 1,
        "suppressed.broker_startup": 2,
        "broker_events.arrived": 1,
        "broker_events.departed": 1,
    }


def test_the_journal_fields_of_an_event_are_those_docs_journal_md_names() -> None:
    change = RouteChanged("a", 2, "UPDATED", ["register"], True)
    assert change.fields() == {
        "topic": "a",
        "version": 2,
        "kind": "UPDATED",
        "causes": ["register"],
        "notify": True,
    }
    assert change._replace(mutated_at_ms=5)._asdict()["mutated_at_ms"] == 5
    assert change._replace(mutated_at_ms=5).fields()["mutated_at_ms"] == 5
    assert ARRIVAL.fields()["addrs"] == ["10.0.0.1:10911"]
    topics = [f"t{i}" for i in range(TOPIC_LIST_LIMIT + 7)]
    gone = SubscriptionsChanged(False, 9, topics)
    assert gone.event == "unsubscribe"
    assert gone.fields() == {"conn": 9, "topics": topics[:TOPIC_LIST_LIMIT], "topics_omitted": 7}
