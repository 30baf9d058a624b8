"""What a name server's news means for the routes a client holds: events in, actions out.

Everything that affects this state machine lives in this file (route-push contract v1): the
order of NOTIFY frames on a connection (a sequence gap or a new epoch means every held topic
may be stale), which notified versions are worth a request, a departed broker dropped from the
held routes and when its step may be adopted, arrivals and confirmations spread over a window,
deletions, and GO_AWAY. ``Subscriptions`` hands it what a SubscribeAck says of epochs and
deletions.

Nothing here touches a socket, a clock or a table: time comes from an injected callable
(seconds), the held routes are read through ``HeldView`` and never written. Every effect is an
action (``push_actions``) the glue carries out in order, held routes and the refetch schedule
included; the rest of one event sees what its own earlier actions will make of the held routes
(``_Actions``). Requests arrive read (``protocol.push_codec.read_server_request``): typed
values, inline routes already decoded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from typing import Protocol

from client_push.config import ClientConfig
from client_push.routes.events import (
    BROKER_ARRIVED,
    BROKER_GONE,
    CONFIRM,
    EPOCH,
    GAP,
    NOTIFY,
    RECONNECT,
    BrokerEvent,
    log,
)
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
    SpreadRefetch,
)
from client_push.routes.route_cache import CachedRoute
from protocol.codes import Perm, RequestCode
from protocol.paced_log import PacedLog
from protocol.push_events import (
    BrokerChange,
    BrokerChangeKind,
    ChangeKind,
    GoAway,
    InlineRoute,
    RouteChanged,
    TopicChange,
    Unreadable,
)
from protocol.route_model import TopicRouteData

IN_ORDER = "in_order"
STALE = "stale"
"""A frame older than one already seen on the connection (never expected): ignored."""


class HeldView(Protocol):
    """The held routes as the session reads them (``RouteCache``)."""

    def is_held(self, topic: str) -> bool: ...

    def peek(self, topic: str) -> CachedRoute | None: ...

    def held(self) -> list[str]: ...


def needs_refetch(held_version: int | None, notified_version: int) -> bool:
    """Refetch unless the held route is already at least as new as the notified one."""
    return held_version is None or held_version < notified_version


class PushSession:
    """One client's reading of its name server: the epoch and sequence of its frames."""

    def __init__(
        self,
        config: ClientConfig,
        held: HeldView,
        *,
        clock: Callable[[], float],
        counters: Counter[str],
        namesrv: Callable[[], str],
    ) -> None:
        self.config = config
        self._held = held
        self._clock = clock
        self.counters = counters
        self._namesrv = namesrv
        self._epoch: str | None = None
        """The epoch the held versions belong to; None before any SUBSCRIBE ack."""
        self._last_sequence = 0
        self.paced = PacedLog(log, clock, burst=1)
        """Warnings a server can provoke at will (malformed frames, failing fetches), paced."""

    # -- the server's requests -----------------------------------------------------------------

    def on_server_request(
        self, request: RouteChanged | GoAway | Unreadable, server: str
    ) -> list[Action]:
        """A NOTIFY or GO_AWAY from the current connection, as read at the edge."""
        if isinstance(request, RouteChanged):
            self.counters["notify_received"] += 1
            return self.notified(request)
        if isinstance(request, GoAway):
            alternatives = request.alternative_addrs
            log.info("GO_AWAY from %s (%s); alternatives %s", server, request.reason, alternatives)
            return self.go_away(alternatives)
        if request.code == RequestCode.GO_AWAY:
            log.info("GO_AWAY from %s (%s); alternatives []", server, request.remark)
            return self.go_away(())
        self.counters["notify_received"] += 1
        self.counters["notifications_unreadable"] += 1
        self.paced.warning("notify", "malformed NOTIFY from %s: %s", server, request.remark)
        return self.refetch_all(GAP)

    def go_away(self, alternatives: Iterable[str]) -> list[Action]:
        """A oneway GO_AWAY: the server serves its grace period, we move on."""
        self.counters["go_away_received"] += 1
        return [MoveTo(tuple(alternatives), still_serving=True)]

    def notified(self, note: RouteChanged) -> list[Action]:
        """A NOTIFY frame: departures first (a topic change of the same frame at a higher
        version still refetches), then the topic changes, then arrivals."""
        acts = _Actions(self._held)
        emitted = note.emitted_at_ms or None
        order = self._order(note.epoch, note.sequence)
        if order == STALE:
            self.counters["notify_stale"] += 1
            return acts.out
        departures = [b for b in note.brokers if b.kind == BrokerChangeKind.DEPARTED]
        for departure in departures:
            # Out of order, versions cannot be trusted; a departed broker is gone regardless.
            self._depart(departure, emitted, order == IN_ORDER, acts)
        if order != IN_ORDER:
            self._refetch_all(order, emitted, acts)
            return acts.out
        inline = note.inline or (None,) * len(note.changes)
        for change, route in zip(note.changes, inline, strict=True):
            self._changed(change, route, emitted, acts)
        for arrival in note.brokers:
            if arrival.kind == BrokerChangeKind.ARRIVED:
                self._arrive(arrival, acts)
        return acts.out

    def _order(self, epoch: str, sequence: int) -> str:
        """What a frame's epoch and sequence say, given what the connection has seen: in
        order, a gap (a lost frame may have named any topic), a new epoch (versions of another
        server process are not comparable) or stale."""
        if self._epoch is not None and epoch and epoch != self._epoch:
            self._epoch = epoch
            self._last_sequence = sequence
            return EPOCH
        if epoch:
            self._epoch = epoch
        if sequence <= self._last_sequence:
            return STALE
        expected = self._last_sequence + 1
        self._last_sequence = sequence
        return IN_ORDER if sequence == expected else GAP

    def _changed(
        self,
        change: TopicChange,
        inline: InlineRoute | None,
        emitted: int | None,
        acts: _Actions,
    ) -> None:
        topic = change.topic
        if not self._held.is_held(topic):
            self.counters["notify_not_held"] += 1
            return
        if change.kind == ChangeKind.DELETED:
            self._deleted(topic, change.version, NOTIFY, emitted, acts)
            return
        if change.kind == ChangeKind.UNROUTED:
            # Its brokers left: they may come back, and may still serve it meanwhile.
            acts.out.append(KeepStale(topic, NOTIFY))
            acts.out.append(FollowUp(topic, NOTIFY, change.version, emitted))
            return
        if change.kind == ChangeKind.CREATED:
            acts.out.append(ClearAbsence(topic))
        if not needs_refetch(acts.version(topic), change.version):
            self.counters["notify_already_held"] += 1
            return
        if inline is None:
            acts.out.append(Refetch(topic, NOTIFY, change.version, emitted))
            return
        self._install(topic, change.version, inline, emitted, acts)

    def _install(
        self, topic: str, version: int, inline: InlineRoute, emitted: int | None, acts: _Actions
    ) -> None:
        """A route sent inside its notification (for exactly ``version``, newer than held):
        installed with no request; a refused one takes the refetch path."""
        if inline.route is None:
            if inline.oversize:
                self.counters["routes_refused"] += 1
            else:
                self.counters["inline_unreadable"] += 1
                log.warning("unreadable inline route of %s: %s", topic, inline.unreadable)
            acts.out.append(Refetch(topic, NOTIFY, version, emitted))
            return
        self.counters["inline_installed"] += 1
        acts.out.append(InstallRoute(topic, inline.route, version, emitted))
        # A fetch in flight may be answered from before this version: fetch again after it.
        acts.out.append(FollowUp(topic, NOTIFY, version, emitted))

    def _deleted(
        self, topic: str, version: int, cause: str, emitted: int | None, acts: _Actions
    ) -> None:
        """The server saw ``topic`` deleted: drop it (lookups then fail as for an unknown one)."""
        if acts.route(topic) is not None:
            self.counters["routes_dropped_deleted"] += 1
        acts.drop(topic, version, cause, emitted)
        # A fetch in flight may be answered from before the delete.
        acts.out.append(FollowUp(topic, cause, version, emitted))

    # -- broker changes ------------------------------------------------------------------------

    def _depart(
        self, entry: BrokerChange, emitted: int | None, exact_allowed: bool, acts: _Actions
    ) -> None:
        """Drop the broker from every held route now; adopt exact steps; queue confirmations."""
        self.counters["broker_departures"] += 1
        steps = {s.topic: (s.from_version, s.version) for s in entry.topics}
        gone = {a.addr for a in entry.addrs}
        touched: list[str] = []
        confirm: list[tuple[str, int | None]] = []
        for topic in self._held.held():
            held = acts.route(topic)
            if held is None:
                continue
            step = steps.get(topic)
            after = without_broker(held[0], entry, gone)
            if after is held[0] and step is None:
                continue
            touched.append(topic)
            exact = exact_allowed and step is not None and step[0] != 0 and step[0] == held[1]
            self.counters["departure_exact" if exact else "departure_inexact"] += 1
            if step is not None and step[1] > held[1]:
                acts.out.append(AwaitVersion(topic, step[1]))
            if not exact or self.config.confirm_exact_departures:
                confirm.append((topic, step[1] if step is not None else None))
            if after is None:  # its last broker left: kept, stale, never emptied
                acts.out.append(KeepStale(topic, BROKER_GONE))
            else:
                acts.adopt(topic, after, step[1] if exact and step is not None else held[1])
        if confirm:
            delay = self.config.departure_confirm_delay_ms
            window = max(self.config.departure_confirm_window_ms, entry.refetch_window_ms)
            acts.out.append(SpreadRefetch(tuple(confirm), CONFIRM, delay, window))
        acts.out.append(Announce(self._broker_event(entry, "departed", touched)))

    def _arrive(self, entry: BrokerChange, acts: _Actions) -> None:
        """Queue the held topics the arrival changed for a refetch spread over the window."""
        self.counters["broker_arrivals"] += 1
        due: list[tuple[str, int | None]] = []
        for step in entry.topics:
            topic = step.topic
            if not self._held.is_held(topic) or not needs_refetch(
                acts.version(topic), step.version
            ):
                continue
            # A lookup now should ask rather than trust an absence the arrival ended.
            acts.out.append(ClearAbsence(topic))
            due.append((topic, step.version))
        if due:
            # The server may ask for a longer window: it sizes it from the whole fleet's debt.
            window = max(self.config.arrival_refetch_window_ms, entry.refetch_window_ms)
            acts.out.append(SpreadRefetch(tuple(due), BROKER_ARRIVED, 0, window))
        acts.out.append(Announce(self._broker_event(entry, "arrived", [t for t, _ in due])))

    def _broker_event(self, entry: BrokerChange, kind: str, topics: list[str]) -> BrokerEvent:
        return BrokerEvent(
            kind=kind,
            broker_name=entry.broker_name,
            cluster=entry.cluster,
            addrs=tuple((a.broker_id, a.addr) for a in entry.addrs),
            cause=entry.cause,
            broker_name_gone=entry.broker_name_gone,
            topics=tuple(topics),
            learned_at_ms=self._now_ms(),
            namesrv=self._namesrv(),
        )

    # -- subscriptions' news -------------------------------------------------------------------

    def connected(self) -> None:
        """A new connection: its sequences count from 1."""
        self._last_sequence = 0

    def epoch_acked(self, epoch: str, cause: str) -> list[Action] | None:
        """A SubscribeAck's epoch: the refetch of every held topic when it is not the one the
        held versions come from (another name-server process); None when it is."""
        changed = self._epoch is not None and epoch != self._epoch
        self._epoch = epoch
        return self.refetch_all(RECONNECT if cause == RECONNECT else EPOCH) if changed else None

    def deleted(self, topic: str, version: int, cause: str) -> list[Action]:
        """The server says held ``topic`` was deleted (a SubscribeAck's ``deleted``)."""
        acts = _Actions(self._held)
        self._deleted(topic, version, cause, None, acts)
        return acts.out

    def refetch_all(self, cause: str) -> list[Action]:
        """Every held topic may be stale (``cause`` says why)."""
        acts = _Actions(self._held)
        self._refetch_all(cause, None, acts)
        return acts.out

    def _refetch_all(self, cause: str, notified_at_ms: int | None, acts: _Actions) -> None:
        if cause in (EPOCH, RECONNECT):
            # Versions of another server process are not comparable: a held route stays
            # (stale until answered afresh), but its version must not hide the new epoch's news.
            acts.out.append(ForgetVersions())
        topics = self._held.held()
        self.counters[f"refetch_all.{cause}"] += 1
        log.info("refetching all %d held topics (%s)", len(topics), cause)
        acts.out.extend(Refetch(topic, cause, None, notified_at_ms) for topic in topics)

    def untrusted(self, topic: str) -> list[Action]:
        """A route answer for held ``topic`` that cannot be trusted: ask again after a backoff."""
        return [BackOff(topic)] if self._held.is_held(topic) else []

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


class _Actions:
    """The actions of one event, and the held routes as those actions will leave them: a
    second departure in a frame drops its broker from what the first one left."""

    def __init__(self, held: HeldView) -> None:
        self.out: list[Action] = []
        self._held = held
        self._after: dict[str, tuple[TopicRouteData, int] | None] = {}

    def route(self, topic: str) -> tuple[TopicRouteData, int] | None:
        """(route, version) held for ``topic`` after this event's actions; None: no route."""
        if topic in self._after:
            return self._after[topic]
        entry = self._held.peek(topic)
        return None if entry is None else (entry.route, entry.version)

    def version(self, topic: str) -> int | None:
        held = self.route(topic)
        return None if held is None else held[1]

    def adopt(self, topic: str, route: TopicRouteData, version: int) -> None:
        self._after[topic] = (route, version)
        self.out.append(AdoptRoute(topic, route, version))

    def drop(self, topic: str, version: int, cause: str, emitted: int | None) -> None:
        self._after[topic] = None
        self.out.append(DropRoute(topic, version, cause, emitted))


def without_broker(
    route: TopicRouteData, entry: BrokerChange, gone: Collection[str]
) -> TopicRouteData | None:
    """``route`` after the departure ``entry`` (``gone``: its addresses), as the name server
    drops the broker from its tables: the same object when the route does not list it, None
    when no queue data is left (the topic then has no route). Adopting exactly this is what
    lets a client holding a step's ``from_version`` take its ``version`` without asking."""
    name = entry.broker_name
    if not any(b.broker_name == name for b in route.broker_datas) and not any(
        q.broker_name == name for q in route.queue_datas
    ):
        return route
    queue_datas, broker_datas = route.queue_datas, route.broker_datas
    if entry.broker_name_gone:  # its queue data leaves every topic
        queue_datas = [q for q in queue_datas if q.broker_name != name]
        broker_datas = [b for b in broker_datas if b.broker_name != name]
    else:
        if entry.read_only:  # acting master without a master: the group turned read-only
            queue_datas = [
                replace(q, perm=q.perm & ~Perm.WRITE) if q.broker_name == name else q
                for q in queue_datas
            ]
        broker_datas = [
            replace(b, broker_addrs={i: a for i, a in b.broker_addrs.items() if a not in gone})
            if b.broker_name == name
            else b
            for b in broker_datas
        ]
    if not queue_datas:
        return None
    mapping = route.topic_queue_mapping_by_broker
    if entry.broker_name_gone and mapping and name in mapping:
        mapping = {n: info for n, info in mapping.items() if n != name} or None
    filters = {a: s for a, s in route.filter_server_table.items() if a not in gone}
    return replace(
        route,
        queue_datas=queue_datas,
        broker_datas=broker_datas,
        filter_server_table=filters,
        topic_queue_mapping_by_broker=mapping,
    )
