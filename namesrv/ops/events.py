"""What route push tells the operator's side: typed events, and the one sink that hears them.

The change detector, the broker-event book, the SUBSCRIBE handler and the departure of a
connection each hand a typed value to an :class:`EventSink`; the journal writes them
(``docs/journal.md`` names each record), :class:`EventCounters` counts them for the metrics,
and :class:`EventFanOut` hands each to several sinks. Nothing routes by an event's name: a
sink has one method per kind, so a reader follows an event from where it is made to every
place that hears it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

TOPIC_LIST_LIMIT = 100
"""``notification_sent``, ``subscribe`` and ``unsubscribe`` name at most this many topics; the
counts cover all of them."""


def topic_list_fields(topics: Sequence[str]) -> dict[str, Any]:
    """The topics of a ``subscribe`` or ``unsubscribe`` record: the first ``TOPIC_LIST_LIMIT``
    in ``topics``, and ``topics_omitted``, how many more there were, when any were left out."""
    if len(topics) <= TOPIC_LIST_LIMIT:
        return {"topics": list(topics)}
    return {
        "topics": list(topics[:TOPIC_LIST_LIMIT]),
        "topics_omitted": len(topics) - TOPIC_LIST_LIMIT,
    }


class RouteChanged(NamedTuple):
    """A topic's route settled at a new version (a named tuple: one per settled topic)."""

    topic: str
    version: int
    kind: str
    """``protocol.push_events.ChangeKind``'s name, as notified."""
    causes: list[str]
    """Why it was touched, sorted (``namesrv.routes.change_cause.ChangeCause`` values)."""
    notify: bool
    """False when every cause is suppressed by ``[push.suppress]``."""
    mutated_at_ms: int | None = None
    """When its first mutation since the last settle was marked, when the detector knows."""

    def fields(self) -> dict[str, Any]:
        """The journal's fields of a ``route_changed`` event."""
        out: dict[str, Any] = {
            "topic": self.topic,
            "version": self.version,
            "kind": self.kind,
            "causes": list(self.causes),
            "notify": self.notify,
        }
        if self.mutated_at_ms is not None:
            out["mutated_at_ms"] = self.mutated_at_ms
        return out


class RouteSuppressed(NamedTuple):
    """A silent change: the ``[push.suppress]`` rules that kept it from subscribers."""

    topic: str
    version: int
    rules: list[str]

    def fields(self) -> dict[str, Any]:
        return {"topic": self.topic, "version": self.version, "rules": list(self.rules)}


class SuppressionsCounted(NamedTuple):
    """Silent changes settled in one batch without a per-topic event: how many per rule."""

    rules: dict[str, int]


class BrokerChanged(NamedTuple):
    """A broker address arrived or left, and whether subscribers are told."""

    kind: str
    """``protocol.push_events.BrokerChangeKind``'s name."""
    cause: str
    cluster: str
    broker_name: str
    addrs: list[str]
    name_gone: bool
    topics: int
    """Topics whose route it changed."""
    notify: bool

    def fields(self) -> dict[str, Any]:
        """The journal's fields of a ``broker_event`` record."""
        return self._asdict()


class SubscriptionsChanged(NamedTuple):
    """A connection subscribed to topics new to it, or gave up topics it held."""

    subscribed: bool
    conn_id: int
    topics: list[str]

    @property
    def event(self) -> str:
        """The journal record's name."""
        return "subscribe" if self.subscribed else "unsubscribe"

    def fields(self) -> dict[str, Any]:
        return {"conn": self.conn_id, **topic_list_fields(self.topics)}


class ConnectionClosed(NamedTuple):
    """A connection that held subscriptions is gone; its topics were released."""

    conn_id: int
    released_topics: int


class EventSink(Protocol):
    """Hears route push's events, one method per kind."""

    def route_changed(self, change: RouteChanged) -> None: ...
    def route_suppressed(self, suppressed: RouteSuppressed) -> None: ...
    def suppressions_counted(self, counted: SuppressionsCounted) -> None: ...
    def broker_changed(self, change: BrokerChanged) -> None: ...
    def subscriptions_changed(self, change: SubscriptionsChanged) -> None: ...
    def connection_closed(self, closed: ConnectionClosed) -> None: ...


class EventCounters:
    """The sink the metrics read: suppressions per rule and broker changes per kind, counted
    into the server's counters (``suppressed.<rule>``, ``broker_events.<kind>``)."""

    def __init__(self, counters: Counter[str]) -> None:
        self._counters = counters

    def route_changed(self, change: RouteChanged) -> None:
        pass  # counted by the detector's own stats

    def route_suppressed(self, suppressed: RouteSuppressed) -> None:
        for rule in suppressed.rules:
            self._counters[f"suppressed.{rule}"] += 1

    def suppressions_counted(self, counted: SuppressionsCounted) -> None:
        for rule, count in counted.rules.items():
            self._counters[f"suppressed.{rule}"] += count

    def broker_changed(self, change: BrokerChanged) -> None:
        self._counters[f"broker_events.{change.kind.lower()}"] += 1

    def subscriptions_changed(self, change: SubscriptionsChanged) -> None:
        pass  # the subscription registry's totals are the figures

    def connection_closed(self, closed: ConnectionClosed) -> None:
        pass  # the connection counters are the hub's


class EventFanOut:
    """Hands each event to every one of ``sinks``, in order."""

    def __init__(self, *sinks: EventSink) -> None:
        self._sinks = sinks

    def route_changed(self, change: RouteChanged) -> None:
        for sink in self._sinks:
            sink.route_changed(change)

    def route_suppressed(self, suppressed: RouteSuppressed) -> None:
        for sink in self._sinks:
            sink.route_suppressed(suppressed)

    def suppressions_counted(self, counted: SuppressionsCounted) -> None:
        for sink in self._sinks:
            sink.suppressions_counted(counted)

    def broker_changed(self, change: BrokerChanged) -> None:
        for sink in self._sinks:
            sink.broker_changed(change)

    def subscriptions_changed(self, change: SubscriptionsChanged) -> None:
        for sink in self._sinks:
            sink.subscriptions_changed(change)

    def connection_closed(self, closed: ConnectionClosed) -> None:
        for sink in self._sinks:
            sink.connection_closed(closed)
