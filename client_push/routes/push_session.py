"""The route-push contract as a state machine: events in, actions out (route-push contract v1).

Everything the client decides about push lives in this class: which notified versions are worth
a request, when held versions cannot be trusted (a sequence gap, a new epoch, a reconnect), a
departed broker dropped locally and when its step may be adopted, arrivals spread over a
window, what a SUBSCRIBE answer means, when the session falls back to polling. Nothing here
touches a socket, a reactor or the wall clock: time comes from an injected callable (seconds,
as ``IReactorTime.seconds``), randomness from an injected ``random.Random``, and every effect
on the outside world is returned as an action for the glue (``RouteClient``) to carry out, in
order (``push_actions``).

The held routes themselves (``HeldRoutes``) are changed here directly where the contract
changes them (a DELETED notification, a departure), so the rest of one frame already sees it.

Absence is news only when it is a deletion: ``DELETED``, an ack's ``deleted`` and
``topicDeleted=true`` drop a held route; ``UNROUTED``, an ack's ``exists = false``, a departure
of the last broker keep it, stale (``HeldRoutes.keep_stale``). A server's SubscribeAck says
whether it is warming up (its absences are then "not heard of yet") and how long it has been
up (``ServerUp``: the glue may move to a server up longer).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence

from client_push.config import ClientConfig
from client_push.routes.broker_departure import without_broker
from client_push.routes.events import (
    BROKER_ARRIVED,
    BROKER_GONE,
    CONFIRM,
    EPOCH,
    GAP,
    NOTIFY,
    POLL,
    RECONNECT,
    RETRY,
    SUBSCRIBE,
    VERSION_CHECK,
    BrokerEvent,
    log,
)
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.push_actions import (
    Action,
    Announce,
    FollowUp,
    InstallRoute,
    MoveTo,
    Refetch,
    SendSubscribe,
    SendUnsubscribe,
    ServerUp,
    SetPushHealthy,
    WakeAt,
)
from client_push.routes.push_tracker import PushTracker, Verdict, needs_refetch
from client_push.routes.refetch_spread import SpreadQueue
from client_push.routes.untrusted_retries import UntrustedRetries
from protocol.bodies import decode_route
from protocol.codes import ResponseCode
from protocol.errors import ProtocolError
from protocol.paced_log import PacedLog
from protocol.push_events import (
    BrokerChange,
    BrokerChangeKind,
    ChangeKind,
    RouteChanged,
    SubscribeAck,
)

# -- the session -----------------------------------------------------------------------------


class PushSession:
    """One client's push state: epoch and sequence, subscriptions, local changes, spreads.

    ``clock`` returns seconds; ``marks`` numbers fetches and local changes in one order (the
    fetch glue draws from the same iterator), so an answer to a fetch sent before a local
    change is told from one sent after it.
    """

    def __init__(
        self,
        config: ClientConfig,
        routes: HeldRoutes,
        *,
        clock: Callable[[], float],
        rng: random.Random,
        counters: Counter[str],
        marks: Iterator[int],
    ) -> None:
        self.config = config
        self._routes = routes
        self._cache = routes.cache
        self._clock = clock
        self._rng = rng
        self.counters = counters
        self._marks = marks
        self._tracker = PushTracker()
        self._local: dict[str, tuple[int, int]] = {}
        """topic → (version a fetch must reach, mark at the change) for routes changed
        locally by a departure: an answer to a fetch sent earlier and older than that is stale."""
        self._spread = SpreadQueue()
        self._subscribed: set[str] = set()
        self._to_subscribe: set[str] = set()
        self._unsupported = False
        self._healthy = False
        self._connected_before = False
        self._warm_until_ms: int | None = None
        """While the current server's start-up window lasts (its SubscribeAck said so)."""
        self._retries = UntrustedRetries(
            config.untrusted_retry_initial_ms, config.untrusted_retry_max_ms, rng
        )
        self.paced = PacedLog(log, clock, burst=1)
        """Warnings a server can provoke at will (malformed frames, failing fetches), paced."""

    # -- state ---------------------------------------------------------------------------------

    @property
    def push_healthy(self) -> bool:
        """True while the current name server has acknowledged our subscriptions."""
        return self._healthy

    @property
    def push_unsupported(self) -> bool:
        """True when the current name server does not know SUBSCRIBE: polling only."""
        return self._unsupported

    @property
    def subscription_count(self) -> int:
        return len(self._subscribed)

    @property
    def server_warming(self) -> bool:
        """Whether the current name server is in its start-up window: its absences and errors
        say nothing about a topic."""
        until = self._warm_until_ms
        return until is not None and self._now_ms() < until

    @property
    def retries_pending(self) -> int:
        """Held topics whose last answer could not be trusted, to be asked again."""
        return len(self._retries)

    def untrusted(self, topic: str) -> list[Action]:
        """A route answer for ``topic`` that cannot be trusted: ask again after a backoff."""
        if not self._cache.is_held(topic):
            return []
        delay = self._retries.next_delay_ms(topic)
        self.counters["untrusted_answers"] += 1
        out: list[Action] = []
        self._spread_refetch([(topic, None)], RETRY, delay, 0, out)
        return out

    def trusted(self, topic: str) -> None:
        """A route answer for ``topic`` that can be trusted: any backoff of it ends."""
        self._retries.trusted(topic)

    @property
    def poll_interval_ms(self) -> int:
        """Polling is the safety net: rare while push is healthy, the only news otherwise."""
        cfg = self.config
        return cfg.poll_interval_with_push_ms if self._healthy else cfg.poll_interval_ms

    def answer_is_current(self, topic: str, fetch_mark: int, version: int) -> bool:
        """Whether a route answer may be taken: not when its fetch was sent before a local
        change (``fetch_mark`` earlier) and answered from before it (an older version)."""
        local = self._local.get(topic)
        if local is None:
            return True
        required, since = local
        if fetch_mark < since and version < required:
            self.counters["fetch_older_than_local"] += 1
            return False
        del self._local[topic]
        return True

    # -- connection events ---------------------------------------------------------------------

    def connected(self) -> list[Action]:
        """A new connection is up: sequences restart and every held topic is subscribed."""
        self._tracker.new_connection()
        self._local.clear()
        self._subscribed.clear()
        self._to_subscribe.clear()
        self._unsupported = False
        self._warm_until_ms = None
        out: list[Action] = []
        self._set_healthy(False, out)
        cause = RECONNECT if self._connected_before else SUBSCRIBE
        self._connected_before = True
        held = self._cache.held()
        if held:
            out.append(SendSubscribe(tuple(held), cause))
        return out

    def disconnected(self) -> list[Action]:
        self._subscribed.clear()
        out: list[Action] = []
        self._set_healthy(False, out)
        return out

    def switching(self, *, going_away: bool, old_connected: bool) -> list[Action]:
        """The current connection is left for another one.

        A server left for good is told to stop notifying (#3870 3.1.1.1); a server going away
        drops its subscriptions itself.
        """
        out: list[Action] = []
        if not going_away and old_connected and self._subscribed and not self._unsupported:
            out.append(SendUnsubscribe(tuple(sorted(self._subscribed))))
        self._subscribed.clear()
        self._set_healthy(False, out)
        return out

    def go_away(self, alternatives: Sequence[str]) -> list[Action]:
        """A oneway GO_AWAY: the server serves its grace period, we move on."""
        self.counters["go_away_received"] += 1
        return [MoveTo(tuple(alternatives), still_serving=True)]

    # -- subscriptions -------------------------------------------------------------------------

    def want_subscription(self, topic: str) -> bool:
        """A topic became held; True when a SUBSCRIBE of it should follow (``flush``)."""
        if self._unsupported:
            return False
        self._to_subscribe.add(topic)
        return True

    def flush(self) -> list[Action]:
        """One SUBSCRIBE for the topics that became held since the last flush."""
        topics = [
            t for t in self._to_subscribe if self._cache.is_held(t) and t not in self._subscribed
        ]
        self._to_subscribe.clear()
        if not topics or self._unsupported:
            return []
        return [SendSubscribe(tuple(sorted(topics)), SUBSCRIBE)]

    def subscribe_acked(self, batch: Sequence[str], cause: str, ack: SubscribeAck) -> list[Action]:
        """The server now notifies changes of ``batch``; its versions show what we missed."""
        out: list[Action] = []
        held = [t for t in batch if self._cache.is_held(t)]
        self._subscribed.update(held)
        gone = sorted(set(batch) - set(held))
        if gone:  # expired while the request was in flight
            out.append(SendUnsubscribe(tuple(gone)))
        self._set_healthy(True, out)
        now = self._now_ms()
        self._warm_until_ms = now + max(0, ack.warm_in_ms) if ack.warming_up else None
        if ack.warming_up or ack.uptime_ms > 0:
            # First: a move to a server up longer sends the refetches below there.
            out.append(ServerUp(max(0, ack.uptime_ms), ack.warming_up))
        if self._tracker.on_ack(ack.epoch):
            # Held versions come from another name-server process: not comparable.
            self._refetch_all(RECONNECT if cause == RECONNECT else EPOCH, None, out)
            return out
        for tv in ack.topics:
            topic = tv.topic
            if not self._cache.is_held(topic):
                continue
            if tv.deleted:
                self._deleted(topic, tv.version, cause, None, now, out)
                continue
            if cause == VERSION_CHECK and topic in self._spread:
                continue  # a spread refetch is already on its way
            entry = self._cache.peek(topic)
            if tv.exists:
                if needs_refetch(entry.version if entry else None, tv.version):
                    out.append(Refetch(topic, cause, tv.version))
            elif entry is not None:
                # No broker serves it now, or a warming server has not heard of it yet.
                event = self._routes.keep_stale(topic, cause, now)
                if event is not None:
                    self.counters["routes_kept_stale"] += 1
                    out.append(Announce(event))
                if ack.warming_up:
                    out.extend(self.untrusted(topic))
                else:
                    out.append(Refetch(topic, cause))
        return out

    def subscribe_refused(
        self, server: str, batch: Sequence[str], cause: str, code: int, remark: str | None
    ) -> list[Action]:
        """A SUBSCRIBE answered with ``code`` other than SUCCESS."""
        out: list[Action] = []
        if code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            if not self._unsupported:
                log.info(
                    "name server %s does not support route push (%s); polling every %d ms",
                    server,
                    remark or "",
                    self.config.poll_interval_ms,
                )
            self._unsupported = True
            self._set_healthy(False, out)
            if cause == RECONNECT:
                self._refetch_all(RECONNECT, None, out)
            return out
        if code == ResponseCode.GO_AWAY:
            out.append(MoveTo((), still_serving=False))
            return out
        self.counters["subscribe_refused"] += 1
        log.warning(
            "name server %s refused SUBSCRIBE of %d topics: code %d, %s",
            server,
            len(batch),
            code,
            remark or "",
        )
        self._set_healthy(False, out)
        if cause == RECONNECT:
            self._refetch_held(batch, RECONNECT, out)
        return out

    def subscribe_unreadable(self, server: str, remark: str) -> list[Action]:
        """A SUBSCRIBE ack whose body cannot be read."""
        self.counters["subscribe_refused"] += 1
        self.paced.warning("ack", "malformed SUBSCRIBE ack from %s: %s", server, remark)
        out: list[Action] = []
        self._set_healthy(False, out)
        return out

    def subscribe_failed(self, batch: Sequence[str], cause: str) -> list[Action]:
        """A SUBSCRIBE got no answer (timeout, connection lost)."""
        out: list[Action] = []
        self._set_healthy(False, out)
        if cause == RECONNECT:
            self._refetch_held(batch, RECONNECT, out)
        return out

    # -- notifications -------------------------------------------------------------------------

    def notified(self, msg: RouteChanged) -> list[Action]:
        """A NOTIFY frame from the current connection."""
        out: list[Action] = []
        emitted = msg.emitted_at_ms or None
        verdict = self._tracker.on_notify(msg.epoch, msg.sequence)
        if verdict is Verdict.STALE:
            self.counters["notify_stale"] += 1
            return out
        departures = [b for b in msg.brokers if b.kind == BrokerChangeKind.DEPARTED]
        if verdict is not Verdict.IN_ORDER:
            # Versions cannot be trusted, but a departed broker is gone whatever they say.
            for departure in departures:
                self._apply_departure(departure, emitted, False, out)
            self._refetch_all(GAP if verdict is Verdict.GAP else EPOCH, emitted, out)
            return out
        # Departures first: a topic change of the same frame at a higher version still refetches.
        for departure in departures:
            self._apply_departure(departure, emitted, True, out)
        now = self._now_ms()
        for change in msg.changes:
            topic = change.topic
            if not self._cache.is_held(topic):
                self.counters["notify_not_held"] += 1
                continue
            if change.kind == ChangeKind.DELETED:
                self._deleted(topic, change.version, NOTIFY, emitted, now, out)
                continue
            if change.kind == ChangeKind.UNROUTED:
                # Its brokers left: they may come back, and may still serve it meanwhile.
                event = self._routes.keep_stale(topic, NOTIFY, now)
                if event is not None:
                    self.counters["routes_kept_stale"] += 1
                    out.append(Announce(event))
                out.append(FollowUp(topic, NOTIFY, change.version, emitted))
                continue
            if change.kind == ChangeKind.CREATED:
                self._routes.negative.clear(topic)
            entry = self._cache.peek(topic)
            if entry is not None and not needs_refetch(entry.version, change.version):
                self.counters["notify_already_held"] += 1
                continue
            if change.route:
                self._install_inline(topic, change.version, change.route, emitted, out)
                continue
            out.append(Refetch(topic, NOTIFY, change.version, emitted))
        for arrival in msg.brokers:
            if arrival.kind == BrokerChangeKind.ARRIVED:
                self._apply_arrival(arrival, out)
        return out

    def notification_unreadable(self, server: str, remark: str) -> list[Action]:
        """A change was announced but cannot be read: any held topic may be stale."""
        self.counters["notifications_unreadable"] += 1
        self.paced.warning("notify", "malformed NOTIFY from %s: %s", server, remark)
        out: list[Action] = []
        self._refetch_all(GAP, None, out)
        return out

    # -- timers --------------------------------------------------------------------------------

    def spread_due(self) -> list[Action]:
        """The spread refetches whose time has come (after a ``WakeAt``)."""
        out: list[Action] = []
        for topic, cause, wanted in self._spread.pop_due(self._clock() * 1000.0):
            if not self._cache.is_held(topic):
                continue
            held = self._cache.peek(topic)
            if (
                wanted is not None
                and held is not None
                and cause != CONFIRM
                and not needs_refetch(held.version, wanted)
            ):
                self.counters["spread_already_held"] += 1
                continue
            out.append(Refetch(topic, cause, wanted))
        due = self._spread.next_due_ms()
        if due is not None:
            out.append(WakeAt(due))
        return out

    def version_check(self) -> list[Action]:
        """Re-SUBSCRIBE held topics: the ack's versions reveal changes push did not deliver."""
        if not self._healthy or self._unsupported:
            return []
        held = self._cache.held()
        if not held:
            return []
        self.counters["version_checks"] += 1
        return [SendSubscribe(tuple(sorted(held)), VERSION_CHECK)]

    def poll(self) -> list[Action]:
        """The safety net, on a connection: refetch every held topic (absences only once
        their TTL is over) and subscribe what a failed SUBSCRIBE left out.

        While push is not known to work (a SUBSCRIBE, a version check included, timed out or
        was refused), every held topic is subscribed again, not only those never
        acknowledged: whether the server still holds the others is unknown, and only an
        acknowledged SUBSCRIBE makes push healthy again (and version checks run again)."""
        self.counters["polls"] += 1
        now = self._now_ms()
        negative = self._routes.negative
        held = self._cache.held()
        out: list[Action] = [Refetch(t, POLL) for t in held if not negative.is_absent(t, now)]
        if not self._unsupported:
            again = held if not self._healthy else [t for t in held if t not in self._subscribed]
            if again:
                out.append(SendSubscribe(tuple(sorted(again)), SUBSCRIBE))
        return out

    def expire_idle(self, keep: set[str]) -> list[Action]:
        """Stop holding topics idle past the expiry and unsubscribe them (#3870 3.2)."""
        gone = self._routes.expire(self._now_ms(), keep)
        if not gone:
            return []
        self.counters["topics_expired"] += len(gone)
        log.info("%d idle topics expired: %s", len(gone), ", ".join(sorted(gone)[:20]))
        return self._dropped(gone)

    def release(self, topics: Sequence[str]) -> list[Action]:
        """Stop holding ``topics`` now (the lookup that made them held was given up) and
        unsubscribe the subscribed ones."""
        gone = [t for t in topics if self._cache.is_held(t)]
        for topic in gone:
            self._routes.release(topic)
        self.counters["topics_released"] += len(gone)
        return self._dropped(gone)

    def _dropped(self, gone: Sequence[str]) -> list[Action]:
        for topic in gone:
            self._to_subscribe.discard(topic)
            self._local.pop(topic, None)
            self._spread.discard(topic)
            self._retries.discard(topic)
        subscribed = [t for t in gone if t in self._subscribed]
        self._subscribed.difference_update(subscribed)
        return [SendUnsubscribe(tuple(sorted(subscribed)))] if subscribed else []

    # -- broker changes ------------------------------------------------------------------------

    def _apply_departure(
        self, entry: BrokerChange, emitted: int | None, exact_allowed: bool, out: list[Action]
    ) -> None:
        """Drop the broker from every held route now; adopt exact steps; queue confirmations."""
        self.counters["broker_departures"] += 1
        now = self._now_ms()
        gone_addrs = {a.addr for a in entry.addrs}
        steps = {s.topic: (s.from_version, s.version) for s in entry.topics}
        since = next(self._marks)
        touched: list[str] = []
        confirm: list[tuple[str, int | None]] = []
        for topic in self._cache.held():
            held = self._cache.peek(topic)
            step = steps.get(topic)
            if held is None:
                continue
            after = without_broker(
                held.route,
                entry.broker_name,
                gone_addrs,
                name_gone=entry.broker_name_gone,
                read_only=entry.read_only,
            )
            if after is held.route and step is None:
                continue
            exact = exact_allowed and step is not None and step[0] != 0 and step[0] == held.version
            version = step[1] if exact and step is not None else held.version
            touched.append(topic)
            if step is not None and step[1] > held.version:
                self._local[topic] = (step[1], since)
            if exact:
                self.counters["departure_exact"] += 1
            else:
                self.counters["departure_inexact"] += 1
            if not exact or self.config.confirm_exact_departures:
                confirm.append((topic, step[1] if step is not None else None))
            if after is None:  # its last broker left: kept, stale, never emptied
                event = self._routes.keep_stale(topic, BROKER_GONE, now)
                if event is not None:
                    self.counters["routes_kept_stale"] += 1
            else:
                event = self._routes.adopt(topic, after, version, now)
            if event is not None:
                out.append(Announce(event))
        if confirm:
            self._spread_refetch(
                confirm,
                CONFIRM,
                self.config.departure_confirm_delay_ms,
                max(self.config.departure_confirm_window_ms, entry.refetch_window_ms),
                out,
            )
        out.append(Announce(_broker_event(entry, "departed", touched, now, self._routes.namesrv)))

    def _apply_arrival(self, entry: BrokerChange, out: list[Action]) -> None:
        """Queue the held topics the arrival changed for a refetch spread over the window."""
        self.counters["broker_arrivals"] += 1
        now = self._now_ms()
        due: list[tuple[str, int | None]] = []
        for step in entry.topics:
            topic = step.topic
            if not self._cache.is_held(topic):
                continue
            held = self._cache.peek(topic)
            if held is not None and not needs_refetch(held.version, step.version):
                continue
            # A lookup now should ask rather than trust an absence the arrival ended.
            self._routes.negative.clear(topic)
            due.append((topic, step.version))
        if due:
            # The server may ask for a longer window: it sizes it from the whole fleet's debt.
            window = max(self.config.arrival_refetch_window_ms, entry.refetch_window_ms)
            self._spread_refetch(due, BROKER_ARRIVED, 0, window, out)
        out.append(
            Announce(
                _broker_event(entry, "arrived", [t for t, _ in due], now, self._routes.namesrv)
            )
        )

    # -- helpers -------------------------------------------------------------------------------

    def _deleted(
        self,
        topic: str,
        version: int,
        cause: str,
        emitted: int | None,
        now: int,
        out: list[Action],
    ) -> None:
        """The server saw ``topic`` deleted: drop it (lookups then fail as for an unknown one)."""
        self._retries.discard(topic)
        self._spread.discard(topic)
        had_route = self._cache.peek(topic) is not None
        event = self._routes.learn_absent(topic, version, cause, emitted, now, now, deleted=True)
        if had_route:
            self.counters["routes_dropped_deleted"] += 1
        if event is not None:
            out.append(Announce(event))
        # A fetch in flight may be answered from before the delete.
        out.append(FollowUp(topic, cause, version, emitted))

    def _install_inline(
        self, topic: str, version: int, body: bytes, emitted: int | None, out: list[Action]
    ) -> None:
        """A route sent inside its notification (for exactly ``version``, newer than held):
        install it with no request; an unreadable one takes the refetch path."""
        if len(body) > self.config.max_route_body_bytes:
            self.counters["routes_refused"] += 1
            out.append(Refetch(topic, NOTIFY, version, emitted))
            return
        try:
            route = decode_route(body)
        except ProtocolError as exc:
            self.counters["inline_unreadable"] += 1
            log.warning("unreadable inline route of %s: %s", topic, exc.remark)
            out.append(Refetch(topic, NOTIFY, version, emitted))
            return
        self.counters["inline_installed"] += 1
        out.append(InstallRoute(topic, route, version, emitted))
        # A fetch in flight may be answered from before this version: fetch again after it.
        out.append(FollowUp(topic, NOTIFY, version, emitted))

    def _spread_refetch(
        self,
        topics: list[tuple[str, int | None]],
        cause: str,
        delay_ms: int,
        window_ms: int,
        out: list[Action],
    ) -> None:
        queued = self._spread.spread(
            topics,
            cause,
            now_ms=self._clock() * 1000.0,
            delay_ms=delay_ms,
            window_ms=window_ms,
            rng=self._rng,
        )
        self.counters[f"spread_queued.{cause}"] += queued
        due = self._spread.next_due_ms()
        if due is not None:
            out.append(WakeAt(due))

    def _refetch_all(self, cause: str, notified_at_ms: int | None, out: list[Action]) -> None:
        if cause in (EPOCH, RECONNECT):
            # Versions of another server process are not comparable: a held route stays
            # (stale until answered afresh), but its version must not hide the new epoch's news.
            self._local.clear()
            self._cache.forget_versions()
        topics = self._cache.held()
        self.counters[f"refetch_all.{cause}"] += 1
        log.info("refetching all %d held topics (%s)", len(topics), cause)
        out.extend(Refetch(topic, cause, None, notified_at_ms) for topic in topics)

    def _refetch_held(self, topics: Iterable[str], cause: str, out: list[Action]) -> None:
        is_held = self._cache.is_held
        out.extend(Refetch(topic, cause) for topic in topics if is_held(topic))

    def _set_healthy(self, healthy: bool, out: list[Action]) -> None:
        if healthy != self._healthy:
            self._healthy = healthy
            out.append(SetPushHealthy(healthy))

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


def _broker_event(
    entry: BrokerChange, kind: str, topics: list[str], now: int, namesrv: str
) -> BrokerEvent:
    return BrokerEvent(
        kind=kind,
        broker_name=entry.broker_name,
        cluster=entry.cluster,
        addrs=tuple((a.broker_id, a.addr) for a in entry.addrs),
        cause=entry.cause,
        broker_name_gone=entry.broker_name_gone,
        topics=tuple(topics),
        learned_at_ms=now,
        namesrv=namesrv,
    )
