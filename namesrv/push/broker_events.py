"""Broker arrivals and departures, announced as one entry per broker instead of per topic.

A broker restart touches every topic it serves: announcing each topic would send a subscriber
thousands of entries and make it refetch thousands of routes at once (the hotspot the default
suppression rules silence). Instead the registry reports the event itself (which addresses of
which broker name left or arrived) and each connection subscribed to any touched topic is owed
one ``BrokerChange`` naming the broker, with the version each of its subscribed topics moved to.

For a departure, a topic's entry also carries ``from_version`` when the step is *exact*: the
route at ``version`` is the route at ``from_version`` with the departure applied, and nothing
else changed in between. A client holding ``from_version`` can then drop the broker itself and
adopt ``version`` without a request, and a later GET_ROUTEINFO at that version returns the same
route. The step is exact only when every cause settled into that version is a departure this
book announces; any other cause (or a rule switched off) leaves ``from_version`` at 0.

Debt is kept per connection per (broker name, kind): a later event of the same broker and kind
merges into the owed entry, so it is bounded by brokers x 2 x subscribed topics, however long
degradation or a slow reader lasts.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from namesrv.config import BrokerEventConfig
from namesrv.ops.events import BrokerChanged, EventSink
from namesrv.push.subscriber import Subscriber
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.events import BrokerEvent
from protocol.push_events import BrokerAddress, BrokerChange, BrokerChangeKind, TopicStep

DEPARTURE_RULE_OF_CAUSE: dict[ChangeCause, str] = {
    ChangeCause.UNREGISTER: "unregister",
    ChangeCause.CHANNEL_CLOSE: "channel_close",
    ChangeCause.EXPIRY: "expiry",
}
"""The ``BrokerEventConfig`` field (True = announce) governing each departure cause."""


@dataclass(slots=True)
class _Owed:
    """One ``BrokerChange`` owed to one connection; merged in place by later events."""

    kind: BrokerChangeKind
    broker_name: str
    cluster: str
    addrs: dict[str, int]
    """address → broker id: an id may be held by successive addresses, each of which left."""
    cause: str
    name_gone: bool
    read_only: bool
    steps: dict[str, tuple[int, int]] = field(default_factory=dict)
    """topic → (version, from_version); from_version 0 when the step is not exact."""

    def as_change(self, held: Collection[str], window_ms: int) -> BrokerChange:
        return BrokerChange(
            int(self.kind),
            self.broker_name,
            self.cluster,
            tuple(sorted(BrokerAddress(broker_id, addr) for addr, broker_id in self.addrs.items())),
            self.cause,
            self.name_gone,
            self.read_only,
            tuple(
                TopicStep(topic, version, origin)
                for topic, (version, origin) in sorted(self.steps.items())
                if topic in held
            ),
            window_ms,
        )


@dataclass(slots=True)
class _Pending:
    """An event whose topics are not all settled yet."""

    event: BrokerEvent
    merged: set[Subscriber] = field(default_factory=set)
    """Connections whose owed entry already took this event's header (addresses, cause)."""
    order: dict[str, int] | None = None
    """Where each topic of the event's table stands in it, built the first time a connection
    subscribes while the table is still being applied."""

    @property
    def applying(self) -> bool:
        """Whether the event's table is still being applied: topics it has yet to mark may
        be subscribed to meanwhile."""
        table = self.event.table
        return table is not None and not table.done


_Key = tuple[str, BrokerChangeKind]


class BrokerEventBook:
    """Pending broker events and the per-connection broker debt they create; pure."""

    def __init__(
        self,
        config: BrokerEventConfig,
        subscriptions: SubscriptionRegistry,
        events: EventSink | None = None,
    ) -> None:
        """``events`` hears every broker event and whether it is announced."""
        self._subs = subscriptions
        self.events = events
        self._departure_causes = frozenset(
            cause for cause, rule in DEPARTURE_RULE_OF_CAUSE.items() if getattr(config, rule)
        )
        self._arrivals = config.arrival
        self._rate = config.refetch_rate_per_second
        self._max_window_ms = config.max_refetch_window_ms
        self._waiting: list[tuple[_Pending, set[str]]] = []
        """Announced events, oldest first, each with its topics not settled yet. A set built
        in C per event, not a per-topic index built in Python: a broker of 100,000 topics
        arrives in one reactor turn."""
        self._debt: dict[Subscriber, dict[_Key, _Owed]] = {}
        self.events_silent = 0

    def announces(self, event: BrokerEvent) -> bool:
        """An arrival (a broker address's first registration) is governed by one field,
        whatever the register's cause; a departure by its cause's field."""
        if event.kind is BrokerChangeKind.ARRIVED:
            return self._arrivals
        return event.cause in self._departure_causes

    def record(self, event: BrokerEvent) -> None:
        """The registry reports ``event`` right after marking its topics changed."""
        announced = self.announces(event)
        if announced:
            # Only a topic somebody subscribes to can be owed: a connection that subscribes
            # later settles the topic first (``ChangeDetector.version``), or, for a topic the
            # event's table has yet to mark, is added to the event then (:meth:`subscribed`).
            # Nobody subscribing, a broker of 100,000 topics costs no per-topic work here.
            pending = _Pending(event)
            subscribed = self._subs.subscribed_among(event.topics)
            if subscribed or pending.applying:
                self._waiting.append((pending, subscribed))
        else:
            self.events_silent += 1
        if self.events is not None:
            self.events.broker_changed(
                BrokerChanged(
                    event.kind.name,
                    event.cause.value,
                    event.cluster,
                    event.broker_name,
                    [addr for _, addr in event.addrs],
                    event.name_gone,
                    len(event.topics),
                    announced,
                )
            )

    def subscribed(self, topics: Collection[str]) -> None:
        """Topics a connection just subscribed to, each settled first: those an event's table
        still being applied has yet to mark wait for the event as well."""
        for pending, left in self._waiting:
            table = pending.event.table
            if table is None or table.done:
                continue
            order = pending.order
            if order is None:
                order = pending.order = dict(zip(table.names, range(len(table.names)), strict=True))
            applied = table.applied
            left.update(topic for topic in topics if order.get(topic, -1) >= applied)

    @property
    def waiting(self) -> bool:
        """Whether some broker event waits for its topics to settle."""
        return bool(self._waiting)

    def watches(self, topic: str) -> bool:
        """Whether a broker event waits for ``topic`` to be settled (:meth:`settled`)."""
        return any(topic in left for _, left in self._waiting)

    def unsubscribed_settled(self, topics: set[str]) -> None:
        """:meth:`settled` for topics nobody subscribes to, at once: the events waiting on
        them stop waiting (nothing is owed to anybody for them)."""
        if not self._waiting or not topics:
            return
        for _, left in self._waiting:
            left.difference_update(topics)
        self._waiting = [entry for entry in self._waiting if entry[1] or entry[0].applying]

    def settled(
        self, topic: str, before: int, version: int | None, causes: Collection[ChangeCause]
    ) -> None:
        """The detector compared ``topic``; ``version`` is None when the route did not move."""
        pendings = []
        emptied = False
        for pending, left in self._waiting:
            if topic in left:
                left.discard(topic)
                pendings.append(pending)
                emptied = emptied or not left
        if emptied:
            self._waiting = [entry for entry in self._waiting if entry[1] or entry[0].applying]
        if not pendings or version is None:
            return
        exact = bool(causes) and all(cause in self._departure_causes for cause in causes)
        subscribers = self._subs.subscribers(topic)
        if not subscribers:
            return
        for pending in pendings:
            event = pending.event
            departed = event.kind is BrokerChangeKind.DEPARTED
            origin = before if departed and exact and before > 0 else 0
            for conn in subscribers:
                owed = self._entry(conn, pending)
                earlier = owed.steps.get(topic)
                step_from = origin
                if earlier is not None:
                    # Exact only if both steps are and they chain without a gap (or are one
                    # settle: two addresses of the broker left together).
                    chained = origin and earlier[1] and earlier[0] in (origin, version)
                    step_from = earlier[1] if chained else 0
                owed.steps[topic] = (version, step_from)

    def _entry(self, conn: Subscriber, pending: _Pending) -> _Owed:
        event = pending.event
        key = (event.broker_name, event.kind)
        debt = self._debt.get(conn)
        if debt is None:
            debt = self._debt[conn] = {}
        owed = debt.get(key)
        if owed is not None and conn in pending.merged:
            return owed
        pending.merged.add(conn)
        addrs = {addr: broker_id for broker_id, addr in event.addrs}
        if owed is None:
            owed = debt[key] = _Owed(
                event.kind,
                event.broker_name,
                event.cluster,
                addrs,
                event.cause.value,
                event.name_gone,
                event.read_only,
            )
        else:
            owed.addrs.update(addrs)
            owed.cause = event.cause.value
            owed.name_gone = event.name_gone
            owed.read_only = event.read_only
        other_kind = (
            BrokerChangeKind.ARRIVED
            if event.kind is BrokerChangeKind.DEPARTED
            else BrokerChangeKind.DEPARTED
        )
        other = debt.get((event.broker_name, other_kind))
        if other is not None:
            # The opposite event still owed is partly undone: its addresses that came back (or
            # left again) are no longer news, and its steps no longer describe one departure.
            for broker_id, addr in event.addrs:
                if other.addrs.get(addr) == broker_id:
                    del other.addrs[addr]
            other.steps = {t: (v, 0) for t, (v, _) in other.steps.items()}
            if not other.addrs:
                for topic, step in other.steps.items():
                    owed.steps.setdefault(topic, step)
                del debt[(event.broker_name, other_kind)]
        return owed

    # -- what the detector's tick asks -----------------------------------------------------------

    def debtors(self) -> Iterable[Subscriber]:
        return self._debt.keys()

    @property
    def pending_connections(self) -> int:
        return len(self._debt)

    def refetch_window_ms(self) -> int:
        """How long the refetches of everything owed now take at the configured rate.

        Every owed topic step may become one refetch (a confirmation or an arrival's), so the
        window is sized from all of them: N clients x T topics over it stays under the rate.
        """
        steps = sum(len(owed.steps) for debt in self._debt.values() for owed in debt.values())
        return min(self._max_window_ms, -(-steps * 1000 // self._rate))

    def owed(
        self, conn: Subscriber, held: Collection[str], window_ms: int = 0
    ) -> tuple[BrokerChange, ...]:
        """The entries owed to ``conn``, limited to topics it still subscribes to."""
        debt = self._debt.get(conn)
        if not debt:
            return ()
        entries = [owed.as_change(held, window_ms) for _, owed in sorted(debt.items())]
        return tuple(entry for entry in entries if entry.topics)

    def served(self, conn: Subscriber) -> None:
        self._debt.pop(conn, None)

    def discard_topics(self, conn: Subscriber, topics: Iterable[str]) -> None:
        """``conn`` unsubscribed ``topics``: entries left without a topic are dropped."""
        debt = self._debt.get(conn)
        if debt is None:
            return
        dropped = set(topics)
        for key in list(debt):
            owed = debt[key]
            for topic in dropped.intersection(owed.steps):
                del owed.steps[topic]
            if not owed.steps:
                del debt[key]
        if not debt:
            del self._debt[conn]

    def forget(self, conn: Subscriber) -> None:
        self._debt.pop(conn, None)
