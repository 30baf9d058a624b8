"""Turns route-registry mutations into per-topic versions and per-connection notifications.

The registry marks exactly the topics whose assembled route a mutation changed (it compares
queue data and broker groups where it writes them, see ``RouteRegistry``); the KV store marks a
topic whose order conf moved. The detector trusts the mark: settling a topic is O(1), a version
bump without looking at the route, done when asked for its version or at the next tick, so a
burst of mutations to one topic costs one bump and at most one notification per subscriber. Work
is proportional to what changed: idle topics and idle subscribers are never visited. A tick
settles at most ``max_settle`` topics, so a register that changed 100,000 topics is settled over
several slices (the server runs them in successive reactor turns).

Versions start at 0 for a topic never seen and grow by one per real change of its route,
including creation and deletion; the record of a deleted topic is kept so a recreated topic
continues above its old versions.

A topic whose route leaves is announced ``DELETED`` only when a deletion caused it
(DELETE_TOPIC_IN_NAMESRV, or a live broker's full register without it: ``DELETION_CAUSES``),
and ``UNROUTED`` when its brokers departed: absence learned by not hearing from brokers is
never announced as a deletion. A topic left by several causes in one settle is deleted when
any was a deletion. Deleted topics are remembered (``DeletedTopics``) until they come back.

A change whose every cause is suppressed by config still bumps the version (a client learns it
by poll or GET_ROUTEINFO) but notifies no one.

Each connection owes at most one entry per subscribed topic (a later change overwrites an
earlier one), so notification debt is bounded by subscriptions however long degradation or a
slow reader lasts.
"""

from __future__ import annotations

import operator
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from itertools import compress, islice, repeat
from typing import NamedTuple

from namesrv.config import PushConfig, SuppressionConfig
from namesrv.ops.events import (
    ConnectionClosed,
    EventSink,
    RouteChanged,
    RouteSuppressed,
    SuppressionsCounted,
)
from namesrv.push.broker_events import BrokerEventBook
from namesrv.push.deleted_topics import DeletedTopics
from namesrv.push.subscriber import Subscriber
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.routes.change_cause import ChangeCause
from protocol.push_events import BrokerChange, ChangeKind

RULE_OF_CAUSE: dict[ChangeCause, str] = {
    ChangeCause.BROKER_STARTUP: "broker_startup",
    ChangeCause.UNREGISTER: "unregister",
    ChangeCause.CHANNEL_CLOSE: "channel_close",
    ChangeCause.EXPIRY: "expiry",
    ChangeCause.DELETE_TOPIC: "delete_topic",
    ChangeCause.UNLISTED: "register",
    ChangeCause.REGISTER: "register",
    ChangeCause.REGISTER_TOPIC: "register",
    ChangeCause.ORDER_CONF: "register",
    ChangeCause.WIPE_WRITE_PERM: "write_perm",
    ChangeCause.ADD_WRITE_PERM: "write_perm",
}
"""The ``SuppressionConfig`` field (True = stay silent) that governs each cause."""

ChangeTuple = tuple[str, int, int]
"""(topic, version, kind): a ``protocol.push_events.TopicChange``'s fields, as a plain tuple
(see :func:`_pending`)."""


class Notification(NamedTuple):
    """One NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED frame to build for one connection."""

    conn: Subscriber
    changes: tuple[ChangeTuple, ...]
    """The change of every topic the connection is owed."""
    sequence: int
    emitted_at_ms: int
    epoch: str
    brokers: tuple[BrokerChange, ...] = ()
    """Broker arrivals and departures owed (``namesrv.push.broker_events``), one per broker."""


_BIT_OF_CAUSE: dict[ChangeCause, int] = {cause: 1 << i for i, cause in enumerate(ChangeCause)}


def _causes_of(mask: int) -> frozenset[ChangeCause]:
    causes = _CAUSES_OF_MASK.get(mask)
    if causes is None:
        causes = _CAUSES_OF_MASK[mask] = frozenset(
            cause for cause, bit in _BIT_OF_CAUSE.items() if mask & bit
        )
    return causes


_CAUSES_OF_MASK: dict[int, frozenset[ChangeCause]] = {}
"""At most 2 ** len(ChangeCause) masks: a settled topic's causes without building a set."""

DELETION_CAUSES = frozenset({ChangeCause.DELETE_TOPIC, ChangeCause.UNLISTED})
"""The causes that make a topic's leaving a deletion; any other leaves it unrouted."""
_DELETION_MASK = sum(_BIT_OF_CAUSE[cause] for cause in DELETION_CAUSES)


@dataclass(slots=True)
class DetectorStats:
    topics_settled: int = 0
    """Marked topics settled (each O(1))."""
    versions_bumped: int = 0
    notifications_built: int = 0
    topics_notified: int = 0
    """Sum over built notifications of the topics each carries."""
    suppressed_changes: int = 0
    slow_skips: int = 0
    """Connections with debt passed over because they could not take a frame, per tick."""
    ticks: int = 0


SETTLE_CHECK = 256
"""Topics settled between two looks at a tick's time budget."""
SETTLE_BATCH_MAX = 1_024
"""The largest batch settled in C between two looks at the budget, so the most a turn's settling
runs past ``push.settle_slice_ms``: kept under a millisecond where a large register's topics miss
the cache and the version table grows as they are settled."""
_TOPIC_OF = operator.itemgetter(0)
_CAUSES_OF_ENTRY = operator.itemgetter(1)


class _Pending(NamedTuple):
    version: int
    existed: bool
    """Whether the topic existed before the first change this entry covers."""
    exists: bool
    """Whether it exists after the latest one."""
    deleted: bool
    """Whether a change this entry covers was a deletion."""
    change: ChangeTuple
    """The change as a notification carries it; one object for all owed."""

    @property
    def kind(self) -> ChangeKind:
        return ChangeKind(self.change[2])


def _pending(topic: str, version: int, existed: bool, exists: bool, deleted: bool) -> _Pending:
    if not exists:
        kind = ChangeKind.DELETED if deleted else ChangeKind.UNROUTED
    else:
        kind = ChangeKind.UPDATED if existed else ChangeKind.CREATED
    # A plain tuple, not a TopicChange: an exact tuple of atomic values is untracked by the
    # cycle collector, a named tuple stays tracked, and one is held per owed topic.
    return _Pending(version, existed, exists, deleted, (topic, version, int(kind)))


class ChangeDetector:
    """Versions topics and schedules notifications; pure, driven by ``mark`` and ``tick``."""

    def __init__(
        self,
        route_exists: Callable[[str], bool],
        subscriptions: SubscriptionRegistry,
        suppress: SuppressionConfig,
        epoch: str,
        events: EventSink | None = None,
        broker_events: BrokerEventBook | None = None,
        clock_ms: Callable[[], int] | None = None,
        report_routes: bool = True,
        deleted_topics: DeletedTopics | None = None,
    ) -> None:
        self._exists = route_exists
        if deleted_topics is None:
            deleted_topics = DeletedTopics(PushConfig().deleted_topics_remembered)
        self.deleted_topics = deleted_topics
        """The topics deleted in this epoch (the newest), until they have a route again."""
        self.broker_events = broker_events
        """Announces broker arrivals and departures; None keeps them silent."""
        self._subs = subscriptions
        self._epoch = epoch
        self.events = events
        """Hears each settled change and each suppression (docs/journal.md), and a connection
        gone with its subscriptions. Without ``report_routes``, suppressions of topics nobody
        subscribes to come as one ``SuppressionsCounted`` per settle batch."""
        self.report_routes = report_routes
        """Whether ``events`` hears a ``RouteChanged`` per settled topic; off when no one
        records them (no journal), which spares a 100,000-topic register 100,000 dicts."""
        self._silent_mask = sum(
            _BIT_OF_CAUSE[cause] for cause, rule in RULE_OF_CAUSE.items() if getattr(suppress, rule)
        )
        self._dirty: dict[str, int] = {}
        """topic → bit mask of the causes marked since it was last settled."""
        self._clock_ms = clock_ms
        """When given, a change's journal record says when its first mutation was marked."""
        self._marked_at: dict[str, int] = {}
        """Per dirty topic, the clock at its first mark (only with ``clock_ms``)."""
        self._known: dict[str, int] = {}
        """topic → its version, negated while the topic does not exist (deleted)."""
        self._debt: dict[Subscriber, dict[str, _Pending]] = {}
        """Insertion order is the order connections got debt: served first-come."""
        self._pending_pairs = 0
        self._sequence: dict[Subscriber, int] = {}
        self._cause_names: dict[int, list[str]] = {}
        self.stats = DetectorStats()

    @property
    def epoch(self) -> str:
        return self._epoch

    @property
    def pending_connections(self) -> int:
        """Connections owed a notification."""
        if self.broker_events is None or not self.broker_events.pending_connections:
            return len(self._debt)
        return len(self._debt.keys() | self.broker_events.debtors())

    @property
    def pending_topic_count(self) -> int:
        """(connection, topic) entries owed, summed over connections."""
        return self._pending_pairs

    @property
    def dirty_count(self) -> int:
        """Topics marked since they were last settled."""
        return len(self._dirty)

    @property
    def tracked_topics(self) -> int:
        """Topics with a version record, deleted ones included."""
        return len(self._known)

    def figures(self) -> dict[str, int]:
        """The detector's figures for the server's stats."""
        return {
            "ticks": self.stats.ticks,
            "suppressed_changes": self.stats.suppressed_changes,
            "push_pending_connections": self.pending_connections,
            "push_pending_topics": self.pending_topic_count,
            "deleted_topics": len(self.deleted_topics),
            "deleted_topics_forgotten": self.deleted_topics.forgotten,
        }

    def mark(self, topics: Collection[str], cause: ChangeCause) -> None:
        """Record that a mutation for ``cause`` changed these topics' routes."""
        dirty = self._dirty
        bit = _BIT_OF_CAUSE[cause]
        # All in C, each topic looked up once (a large register marks 100,000 at once, often
        # while the last register's topics are still marked): those marked already gain the
        # bit and keep their place in line (a dict update leaves a key where it is); the
        # others join at the end. A topic's mask is one of a handful of small ints, so the
        # distinct ones are few: when each holds the bit already, nothing changes.
        if dirty:
            masks = list(map(dirty.get, topics, repeat(0)))
            if all(mask & bit for mask in set(masks)):
                return
            dirty.update(zip(topics, map(operator.or_, masks, repeat(bit)), strict=True))
            fresh: Iterable[str] = compress(topics, map(operator.not_, masks))
        else:
            dirty.update(dict.fromkeys(topics, bit))
            fresh = topics
        if self._clock_ms is not None and self.report_routes:  # only a journal records it
            self._marked_at.update(dict.fromkeys(fresh, self._clock_ms()))

    def version(self, topic: str) -> tuple[int, bool]:
        """(version, exists) of ``topic`` now, settling it first if it was marked.

        GET_ROUTEINFO and SUBSCRIBE ask here, so the version a client is told is never older
        than the route it is given. Call it before subscribing a connection so the change it
        settles is not also owed to that connection. Topics never seen are (0, False).
        """
        causes = self._dirty.pop(topic, None)
        if causes is not None:
            self._settle(topic, causes, self._marked_at.pop(topic, None))
        known = self._known.get(topic, 0)
        return abs(known), known > 0

    settle = version

    def subscribed(self, topics: Collection[str]) -> None:
        """A connection just subscribed to ``topics``, each settled first (:meth:`version`):
        a broker event whose table is still being applied owes it those the table has yet to
        mark."""
        if self.broker_events is not None:
            self.broker_events.subscribed(topics)

    def deleted(self, topic: str) -> bool:
        """Whether ``topic`` was deleted in this epoch and has no route since (as of its last
        settle: :meth:`version` settles it)."""
        return topic in self.deleted_topics

    def settled_version(self, topic: str) -> int | None:
        """The version of ``topic`` when it exists and nothing is marked since it was settled
        (the registry's route is then exactly that version's); None otherwise. Settles nothing."""
        if topic in self._dirty:
            return None
        known = self._known.get(topic, 0)
        return known if known > 0 else None

    def tick(
        self,
        now_ms: int,
        *,
        can_send: Callable[[Subscriber], bool],
        degraded: bool,
        max_notifications: int | None = None,
        max_settle: int | None = None,
        out_of_time: Callable[[], bool] | None = None,
        subscribed_only: bool = False,
    ) -> list[Notification]:
        """Settle marked topics, then build at most one notification per owed connection.

        ``subscribed_only`` settles just the marked topics somebody subscribes to; the others
        stay marked, so while brokers keep registering the same topics a topic nobody watches
        is settled once for the lot (a lookup settles its topic when it asks).

        While ``degraded`` nothing is built and every debt is kept. A connection for which
        ``can_send`` is False keeps its debt and place in line. ``max_notifications`` caps the
        frames built now; connections left over are first in line next tick. ``max_settle``
        caps the topics settled now, oldest marks first; the rest stay marked (``dirty_count``)
        for the next call; so do those left when ``out_of_time`` (asked after every
        ``SETTLE_CHECK`` topics) says the turn's time is spent. ``can_send`` is called during
        the walk over owed connections and must not change subscriptions or debt.
        """
        self.stats.ticks += 1
        if self._dirty and subscribed_only:
            self._settle_subscribed()
        elif self._dirty:
            self._settle_some(max_settle, out_of_time)
        book = self.broker_events
        owes_brokers = book is not None and book.pending_connections > 0
        if degraded or not (self._debt or owes_brokers):
            return []
        return self._notify(now_ms, can_send, max_notifications, book if owes_brokers else None)

    def _notify(
        self,
        now_ms: int,
        can_send: Callable[[Subscriber], bool],
        max_notifications: int | None,
        book: BrokerEventBook | None,
    ) -> list[Notification]:
        """One notification per owed connection that ``can_send``, at most
        ``max_notifications``; ``book``: it owes broker events too (None: it owes none)."""
        built: list[Notification] = []
        served: list[Subscriber] = []
        owed: Iterable[Subscriber] = self._debt
        window_ms = 0
        if book is not None:
            owed = list(self._debt) + [c for c in book.debtors() if c not in self._debt]
            window_ms = book.refetch_window_ms()
        no_debt: dict[str, _Pending] = {}
        for conn in owed:
            if max_notifications is not None and len(built) >= max_notifications:
                break
            debt = self._debt.get(conn, no_debt)
            held = self._subs.topics_of(conn)
            changes = tuple([entry.change for topic, entry in debt.items() if topic in held])
            brokers = book.owed(conn, held, window_ms) if book is not None else ()
            if not changes and not brokers:
                served.append(conn)
                continue
            if not can_send(conn):
                self.stats.slow_skips += 1
                continue
            sequence = self._sequence.get(conn, 0) + 1
            self._sequence[conn] = sequence
            built.append(Notification(conn, changes, sequence, now_ms, self._epoch, brokers))
            self.stats.topics_notified += len(changes)
            served.append(conn)
        for conn in served:
            self._pending_pairs -= len(self._debt.pop(conn, no_debt))
            if book is not None:
                book.served(conn)
        self.stats.notifications_built += len(built)
        return built

    def _settle_subscribed(self) -> None:
        """Settle the marked topics somebody subscribes to (a C-level intersection of the two
        key sets, walking the smaller), in name order."""
        dirty = self._dirty
        watched = sorted(self._subs.subscribed_among(dirty.keys()))
        if not watched:
            return
        batch = list(zip(watched, map(dirty.pop, watched), strict=True))
        pop = self._marked_at.pop
        self._settle_batch(batch, lambda topic: pop(topic, None))

    def _settle_some(self, max_settle: int | None, out_of_time: Callable[[], bool] | None) -> None:
        """Settle marked topics, oldest marks first, up to ``max_settle`` or the time budget.

        The budget is asked after ``SETTLE_CHECK`` topics; while batches take the C-level path
        (nobody subscribed, no journal) they grow to ``SETTLE_BATCH_MAX``, whose cost is still
        a fraction of a millisecond.
        """
        dirty = self._dirty
        limit = len(dirty) if max_settle is None else min(max_settle, len(dirty))
        if out_of_time is None and limit == len(dirty):
            batch, self._dirty = dirty, {}
            marked_at, self._marked_at = self._marked_at, {}
            self._settle_batch(list(batch.items()), marked_at.get)
            return
        pop = self._marked_at.pop
        done = 0
        size = SETTLE_CHECK
        while done < limit:
            batch_items = list(islice(dirty.items(), min(size, limit - done)))
            deque(map(dirty.__delitem__, map(_TOPIC_OF, batch_items)), 0)
            fast = self._settle_batch(batch_items, lambda topic: pop(topic, None))
            done += len(batch_items)
            if out_of_time is not None and out_of_time():
                break
            size = min(size * 4, SETTLE_BATCH_MAX) if fast else SETTLE_CHECK

    def _settle_batch(
        self, batch: list[tuple[str, int]], marked_at: Callable[[str], int | None]
    ) -> bool:
        """:meth:`_settle` for each topic of ``batch``; for the usual topic of a large register
        (nobody subscribed to it, picked out in C first) without a journal, in C: versions
        bumped by ``map`` and suppressions counted per batch. Returns whether it went that
        way."""
        topics = list(map(_TOPIC_OF, batch))
        special = self._subs.subscribed_among(topics)
        book = self.broker_events
        if book is not None and book.waiting:
            # A broker event only waits for the topics nobody subscribes to; nothing is owed.
            book.unsubscribed_settled(special.symmetric_difference(topics))
        per_topic = self.events is not None and self.report_routes
        if special or per_topic:
            self._settle_each(batch, special, marked_at)
            return False
        known = self._known
        if not all(map(self._exists, topics)):
            # A topic left: its sign flips, or it is not versioned at all.
            self._settle_each(batch, special, marked_at)
            return False
        versions = map(abs, map(known.get, topics, repeat(0)))
        known.update(zip(topics, map(operator.add, versions, repeat(1)), strict=True))
        if self.deleted_topics:
            self.deleted_topics.discard_all(topics)  # registered again: no longer deleted
        counts = Counter(map(_CAUSES_OF_ENTRY, batch))
        silent_mask = self._silent_mask
        quiet = {c: n for c, n in counts.items() if c | silent_mask == silent_mask}
        stats = self.stats
        stats.topics_settled += len(batch)
        stats.versions_bumped += len(batch)
        stats.suppressed_changes += sum(quiet.values())
        self._count_quiet(quiet)
        return True

    def _settle_each(
        self,
        batch: list[tuple[str, int]],
        special: set[str],
        marked_at: Callable[[str], int | None],
    ) -> None:
        settle = self._settle
        known = self._known
        known_get = known.get
        exists_now = self._exists
        silent_mask = self._silent_mask
        deleted_topics = self.deleted_topics
        per_topic = self.events is not None and self.report_routes
        quiet: dict[int, int] = {}
        settled = bumped = suppressed = 0
        for topic, causes in batch:
            when = marked_at(topic)
            if topic in special:
                settle(topic, causes, when)
                continue
            settled += 1
            previous = known_get(topic, 0)
            exists = exists_now(topic)
            if previous <= 0 and not exists:
                continue  # neither existed nor exists: nothing a client could see
            version = (previous if previous > 0 else -previous) + 1
            known[topic] = version if exists else -version
            deleted = False
            if not exists:
                if causes & _DELETION_MASK:
                    deleted_topics.add(topic)
                    deleted = True
            elif previous <= 0 and deleted_topics:
                deleted_topics.discard(topic)  # registered again: no longer deleted
            bumped += 1
            silent = causes | silent_mask == silent_mask
            if silent:
                suppressed += 1
            if per_topic:
                self._report(topic, version, previous > 0, exists, deleted, causes, silent, when)
            elif silent:
                quiet[causes] = quiet.get(causes, 0) + 1
        stats = self.stats
        stats.topics_settled += settled
        stats.versions_bumped += bumped
        stats.suppressed_changes += suppressed
        self._count_quiet(quiet)

    def _count_quiet(self, quiet: dict[int, int]) -> None:
        """Tell ``events`` the suppressions settled without a per-topic event, by rule."""
        if not quiet or self.events is None:
            return
        rules: dict[str, int] = {}
        for causes, count in quiet.items():
            for rule in {RULE_OF_CAUSE[cause] for cause in _causes_of(causes)}:
                rules[rule] = rules.get(rule, 0) + count
        self.events.suppressions_counted(SuppressionsCounted(rules))

    def pending_topics_of(self, conn: Subscriber) -> int:
        """Topics ``conn`` is owed a notification for."""
        return len(self._debt.get(conn, ()))

    def discard_debt(self, conn: Subscriber, topics: Iterable[str]) -> None:
        """Forget what ``conn`` is owed for ``topics`` (it unsubscribed them)."""
        if self.broker_events is not None:
            topics = list(topics)
            self.broker_events.discard_topics(conn, topics)
        debt = self._debt.get(conn)
        if debt is None:
            return
        for topic in topics:
            if debt.pop(topic, None) is not None:
                self._pending_pairs -= 1
        if not debt:
            del self._debt[conn]

    def connection_closed(self, conn: Subscriber) -> None:
        """``conn`` is gone: its subscriptions are released and everything kept for it is
        dropped; ``events`` hears of it when it held subscriptions."""
        released = self._subs.drop_connection(conn)
        self.forget_connection(conn)
        if released and self.events is not None:
            self.events.connection_closed(ConnectionClosed(conn.conn_id, len(released)))

    def forget_connection(self, conn: Subscriber) -> None:
        """Drop everything kept for a closed connection: its debt and its sequence."""
        debt = self._debt.pop(conn, None)
        if debt is not None:
            self._pending_pairs -= len(debt)
        self._sequence.pop(conn, None)
        if self.broker_events is not None:
            self.broker_events.forget(conn)

    def _settle(self, topic: str, causes: int, marked_at: int | None = None) -> None:
        stats = self.stats
        stats.topics_settled += 1
        known = self._known.get(topic, 0)
        existed = known > 0
        exists = self._exists(topic)
        previous_version = known if existed else -known
        book = self.broker_events
        if book is not None and not book.watches(topic):
            book = None  # no broker event waits on this topic: nothing to tell the book
        if not existed and not exists:
            # Marked, but it neither existed nor exists: nothing a client could see.
            if book is not None:
                book.settled(topic, previous_version, None, _causes_of(causes))
            return
        version = previous_version + 1
        self._known[topic] = version if exists else -version
        deleted = self._note_deletion(topic, existed, exists, causes)
        stats.versions_bumped += 1
        if book is not None:
            book.settled(topic, previous_version, version, _causes_of(causes))
        silent = causes | self._silent_mask == self._silent_mask
        if silent:
            stats.suppressed_changes += 1
        else:
            subscribers = self._subs.subscribers(topic)
            if subscribers:
                change = _pending(topic, version, existed, exists, deleted)
                self._owe(topic, subscribers, change)
        if self.events is not None and (self.report_routes or silent):
            self._report(topic, version, existed, exists, deleted, causes, silent, marked_at)

    def _note_deletion(self, topic: str, existed: bool, exists: bool, causes: int) -> bool:
        """Remember or forget ``topic`` as deleted now that it was settled (it changed);
        returns whether its leaving was a deletion."""
        if exists:
            if not existed and self.deleted_topics:
                self.deleted_topics.discard(topic)  # registered again: no longer deleted
            return False
        if causes & _DELETION_MASK:
            self.deleted_topics.add(topic)
            return True
        return False

    def _report(
        self,
        topic: str,
        version: int,
        existed: bool,
        exists: bool,
        deleted: bool,
        causes: int,
        silent: bool,
        marked_at: int | None,
    ) -> None:
        events = self.events
        assert events is not None
        names = self._cause_names.get(causes)
        if names is None:
            names = self._cause_names[causes] = sorted(c.value for c in _causes_of(causes))
        if self.report_routes:
            kind = _pending(topic, version, existed, exists, deleted).kind.name
            events.route_changed(
                RouteChanged(topic, version, kind, list(names), not silent, marked_at)
            )
        if silent:
            rules = sorted({RULE_OF_CAUSE[cause] for cause in _causes_of(causes)})
            events.route_suppressed(RouteSuppressed(topic, version, rules))

    def _owe(self, topic: str, subscribers: Iterable[Subscriber], change: _Pending) -> None:
        """Queue ``change`` for every current subscriber, merging with what each is owed."""
        for conn in subscribers:
            debt = self._debt.get(conn)
            if debt is None:
                debt = self._debt[conn] = {}
            earlier = debt.get(topic)
            if earlier is None:
                debt[topic] = change
                self._pending_pairs += 1
            else:
                # The client last knew the state before the earliest unsent change; a deletion
                # among the changes it missed is news even if the topic came back and left.
                debt[topic] = _pending(
                    topic,
                    change.version,
                    earlier.existed,
                    change.exists,
                    earlier.deleted or change.deleted,
                )
