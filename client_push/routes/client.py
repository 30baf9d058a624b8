"""The route client: cached routes kept fresh by push, with polling as the safety net.

Decisions live in the pure modules (``route_cache``, ``negative_cache``, ``push_tracker``,
``nameserver_selector``); this module wires them to a ``NameServerLink`` and the clock. The
contract it speaks is ``docs/protocol-extension.md`` (route-push contract v1).
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from twisted.internet import defer, task
from twisted.python.failure import Failure

from client_push.config import ClientConfig
from client_push.errors import (
    ClientStoppedError,
    NameServerError,
    RouteClientError,
    TopicNotExistError,
)
from client_push.routes.broker_departure import without_broker
from client_push.routes.negative_cache import NegativeCache
from client_push.routes.push_tracker import PushTracker, Verdict, needs_refetch
from client_push.routes.refetch_spread import SpreadQueue
from client_push.routes.route_cache import CachedRoute, PublishInfo, RouteCache, RouteTooLargeError
from client_push.routes.telemetry import RefetchRecord, TelemetrySink, open_telemetry
from client_push.wire.connection import LinkListener, NameServerLink
from client_push.wire.remoting import RemotingProtocol, describe
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.push_codec import (
    BrokerChangeKind,
    ChangeKind,
    decode_go_away,
    decode_notification,
    decode_subscribe_ack,
    encode_subscribe,
    encode_unsubscribe,
)

log = logging.getLogger(__name__)

# Why a route was fetched; telemetry and listeners see these.
FIRST = "first"
NOTIFY = "notify"
POLL = "poll"
GAP = "gap"
EPOCH = "epoch"
RECONNECT = "reconnect"
SUBSCRIBE = "subscribe"
CACHED = "cached"
"""Listener-only: the state already held when the listener was added."""
BROKER_GONE = "broker_gone"
"""A departed broker was dropped from the held route locally, without a request."""
BROKER_ARRIVED = "broker_arrived"
"""A refetch of a topic a broker's arrival changed (spread over the arrival window)."""
CONFIRM = "confirm"
"""A refetch confirming a route changed locally by a departure (spread over a window)."""
VERSION_CHECK = "version_check"
"""A refetch the periodic version check (re-SUBSCRIBE) found needed."""

_UNCONDITIONAL = frozenset({GAP, EPOCH, RECONNECT})


@dataclass(frozen=True, slots=True)
class RouteEvent:
    """A route state the client learned: a route (``exists``) or the topic's absence."""

    topic: str
    exists: bool
    version: int
    route: CachedRoute | None
    cause: str
    learned_at_ms: int
    namesrv: str


RouteListener = Callable[[RouteEvent], None]


@dataclass(frozen=True, slots=True)
class BrokerEvent:
    """A broker arrival or departure the name server announced (one per broker per frame)."""

    kind: str
    """``departed`` or ``arrived``."""
    broker_name: str
    cluster: str
    addrs: tuple[tuple[int, str], ...]
    """(broker id, address) of the addresses that left or arrived."""
    cause: str
    """unregister, channel_close, expiry (departures); broker_startup, register (arrivals)."""
    broker_name_gone: bool
    topics: tuple[str, ...]
    """Held topics whose route it changed: dropped locally (departed) or queued for a refetch
    (arrived)."""
    learned_at_ms: int
    namesrv: str


BrokerListener = Callable[[BrokerEvent], None]


class _Fetch:
    """One GET_ROUTEINFO_BY_TOPIC in flight, shared by every caller that wants that topic."""

    __slots__ = (
        "cause",
        "done",
        "follow_up",
        "notified_at_ms",
        "outcome",
        "requested_at_ms",
        "started",
        "topic",
        "waiters",
    )

    def __init__(
        self, topic: str, cause: str, notified_at_ms: int | None, now_ms: int, started: int
    ) -> None:
        self.started = started
        """Order of creation: tells a fetch sent before a local change from one sent after."""
        self.topic = topic
        self.cause = cause
        self.notified_at_ms = notified_at_ms
        self.requested_at_ms = now_ms
        self.waiters: list[defer.Deferred[CachedRoute]] = []
        self.done = False
        self.outcome: CachedRoute | Exception | None = None
        self.follow_up: tuple[str, int | None, int | None] | None = None
        """(cause, notified_at_ms, wanted version or None for "always") of a reason to fetch
        again that arrived while this fetch was in flight, whose answer may predate it."""

    def add_reason(self, cause: str, notified_at_ms: int | None, wanted: int | None) -> None:
        if cause in _UNCONDITIONAL:
            self.follow_up = (cause, notified_at_ms, None)
        elif wanted is not None:
            current = self.follow_up
            if current is None or (current[2] is not None and wanted > current[2]):
                self.follow_up = (cause, notified_at_ms, wanted)


class RouteClient(LinkListener):
    """Holds topic routes for producers and consumers of one process.

    ``reactor`` carries the sockets; ``clock`` (default: the reactor) drives every timer, so
    tests can run loopback traffic under ``twisted.internet.task.Clock``.
    """

    def __init__(
        self,
        config: ClientConfig,
        reactor: Any = None,
        rng: random.Random | None = None,
        *,
        clock: Any | None = None,
        telemetry: TelemetrySink | None = None,
    ) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.config = config
        self._reactor = reactor
        self._clock: Any = clock if clock is not None else reactor
        self._rng = rng or random.Random()
        self._client_id = config.client_id or f"{socket.gethostname()}@{os.getpid()}"
        self._link = NameServerLink(
            config, reactor, self._clock, self._rng, self._handle_request, self
        )
        self._cache = RouteCache(
            config.topic_idle_expiry_ms, config.max_queue_nums, config.max_route_queues
        )
        self._negative = NegativeCache(config.negative_ttl_ms)
        self._tracker = PushTracker()
        self._telemetry = (
            telemetry
            if telemetry is not None
            else open_telemetry(config.telemetry_path, config.telemetry_memory_bytes)
        )
        self._inflight: dict[str, _Fetch] = {}
        self._fetch_seq = itertools.count(1)
        self._local: dict[str, tuple[int, int]] = {}
        """topic → (version a fetch must reach, fetch sequence at the change) for routes changed
        locally by a departure: an answer to a fetch sent earlier and older than that is stale."""
        self._spread = SpreadQueue()
        self._spread_call: Any | None = None
        self._broker_listeners: list[BrokerListener] = []
        self._version_check_loop: task.LoopingCall | None = None
        self._version_check_start: Any | None = None
        self._listeners: dict[str, list[RouteListener]] = {}
        self._absent: set[str] = set()
        """Held topics whose last known state is "does not exist"."""
        self._subscribed: set[str] = set()
        self._to_subscribe: set[str] = set()
        self._flush_call: Any | None = None
        self._push_unsupported = False
        self._push_healthy = False
        self._connected_before = False
        self._poll_call: Any | None = None
        self._expiry_loop: task.LoopingCall | None = None
        self._started = False
        self._stopped = False
        self.counters: Counter[str] = Counter()

    # -- public API ----------------------------------------------------------------------------

    def start(self) -> None:
        """Connect and start the poll and expiry timers; lookups made earlier wait for it."""
        if self._started:
            return
        self._started = True
        self._link.start()
        self._schedule_poll()
        loop = task.LoopingCall(self._guarded, self._expire_idle)
        loop.clock = self._clock
        loop.start(self.config.expiry_check_interval_ms / 1000.0, now=False)
        self._expiry_loop = loop
        check = task.LoopingCall(self._guarded, self._version_check)
        check.clock = self._clock
        self._version_check_loop = check
        # A random phase: clients started together must not check (and refetch) together.
        interval = self.config.version_check_interval_ms / 1000.0
        self._version_check_start = self._clock.callLater(
            interval * self._rng.random(), check.start, interval, True
        )
        for topic in self._cache.held():
            if topic not in self._cache and topic not in self._absent:
                self._fetch(topic, FIRST)

    def stop(self) -> defer.Deferred[None]:
        """Stop timers, fail waiting lookups with ``ClientStoppedError`` and close connections."""
        self._stopped = True
        for call in (
            self._poll_call,
            self._flush_call,
            self._spread_call,
            self._version_check_start,
        ):
            if call is not None and call.active():
                call.cancel()
        for periodic in (self._expiry_loop, self._version_check_loop):
            if periodic is not None and periodic.running:
                periodic.stop()
        for fetch in list(self._inflight.values()):
            self._finish(fetch, ClientStoppedError("route client stopped"))
        d = self._link.stop()
        d.addBoth(lambda _: self._telemetry.close())
        return d

    async def get_route(self, topic: str) -> CachedRoute:
        """The held route of ``topic``, fetched on first use.

        Concurrent first lookups share one request (upstream #4561). A topic remembered as
        absent raises ``TopicNotExistError`` at once, without a request, until its TTL ends.
        """
        self._check_usable(topic)
        now = self._now_ms()
        entry = self._cache.get(topic, now)
        if entry is not None:
            self.counters["lookup_hits"] += 1
            return entry
        if self._cache.touch(topic, now):
            self._want_subscription(topic)
        self._negative.check(topic, now)
        self.counters["lookup_misses"] += 1
        return await self._join(self._fetch(topic, FIRST))

    async def get_publish_info(self, topic: str) -> PublishInfo:
        """The queues a producer may send ``topic`` to (write perm and a master required)."""
        return (await self.get_route(topic)).publish_info

    def add_listener(self, topic: str, callback: RouteListener) -> Callable[[], None]:
        """Call ``callback`` with every route state learned for ``topic``; returns a remover.

        The state already held is replayed at once (cause ``cached``); a topic not held yet is
        fetched. A topic with listeners never expires.
        """
        self._check_usable(topic)
        self._listeners.setdefault(topic, []).append(callback)
        now = self._now_ms()
        if self._cache.touch(topic, now):
            self._want_subscription(topic)
        entry = self._cache.peek(topic)
        if entry is not None:
            callback(self._event(topic, True, entry.version, entry, CACHED, now))
        elif topic in self._absent:
            callback(self._event(topic, False, 0, None, CACHED, now))
        elif self._started:
            self._fetch(topic, FIRST)

        def remove() -> None:
            callbacks = self._listeners.get(topic, [])
            if callback in callbacks:
                callbacks.remove(callback)
            if not callbacks:
                self._listeners.pop(topic, None)

        return remove

    def add_broker_listener(self, callback: BrokerListener) -> Callable[[], None]:
        """Call ``callback`` with every broker arrival or departure announced; returns a remover.

        Departures are reported after every held route has dropped the broker, so a producer
        reacting to one already sees routes without it.
        """
        self._broker_listeners.append(callback)

        def remove() -> None:
            if callback in self._broker_listeners:
                self._broker_listeners.remove(callback)

        return remove

    def update_namesrv_addrs(self, addrs: Sequence[str]) -> None:
        """Replace the name-server list; a changed list picks a server afresh and moves there."""
        self._link.update_addrs(addrs)

    @property
    def namesrv(self) -> str:
        return self._link.addr

    @property
    def connected(self) -> bool:
        return self._link.current is not None

    @property
    def push_active(self) -> bool:
        """True while the current name server has acknowledged our subscriptions."""
        return self._push_healthy

    def held_topics(self) -> list[str]:
        return self._cache.held()

    def cached_route(self, topic: str) -> CachedRoute | None:
        """The held route without counting an access (for inspection, not for sending)."""
        return self._cache.peek(topic)

    def stats(self) -> dict[str, int | str | bool]:
        out: dict[str, int | str | bool] = dict(self.counters)
        out.update(
            held_topics=len(self._cache.held()),
            cached_routes=len(self._cache),
            negative_entries=len(self._negative),
            negative_hits=self._negative.hits,
            subscribed=len(self._subscribed),
            push_active=self._push_healthy,
            namesrv=self._link.addr,
            connects=self._link.connects,
            connect_failures=self._link.connect_failures,
        )
        return out

    # -- fetching ------------------------------------------------------------------------------

    def _check_usable(self, topic: str) -> None:
        if self._stopped:
            raise ClientStoppedError("route client stopped")
        if not topic:
            raise ValueError("topic must not be empty")

    def _join(self, fetch: _Fetch) -> defer.Deferred[CachedRoute]:
        if fetch.done:
            if isinstance(fetch.outcome, CachedRoute):
                return defer.succeed(fetch.outcome)
            return defer.fail(fetch.outcome or RouteClientError(f"fetch of {fetch.topic} failed"))
        waiter: defer.Deferred[CachedRoute] = defer.Deferred()
        fetch.waiters.append(waiter)
        return waiter

    def _fetch(
        self,
        topic: str,
        cause: str,
        *,
        notified_at_ms: int | None = None,
        wanted_version: int | None = None,
    ) -> _Fetch:
        """Start a fetch of ``topic``, or join the one in flight (remembering why)."""
        running = self._inflight.get(topic)
        if running is not None:
            self.counters["fetch_joined"] += 1
            running.add_reason(cause, notified_at_ms, wanted_version)
            return running
        fetch = _Fetch(topic, cause, notified_at_ms, self._now_ms(), next(self._fetch_seq))
        self._inflight[topic] = fetch
        self.counters[f"fetch.{cause}"] += 1
        cmd = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            {"topic": topic, "acceptStandardJsonOnly": "true"},
        )
        d = self._link.request(cmd)
        d.addCallbacks(
            self._fetched, self._fetch_failed, callbackArgs=(fetch,), errbackArgs=(fetch,)
        )
        d.addErrback(self._unexpected, f"handling the route of {topic}")
        return fetch

    def _fetched(self, response: RemotingCommand, fetch: _Fetch) -> None:
        """Handle a route answer; whatever goes wrong here fails the fetch, never strands it."""
        try:
            self._handle_route(response, fetch)
        except Exception as exc:
            self.counters["internal_errors"] += 1
            log.error(
                "error handling the route of %s: %s: %s", fetch.topic, type(exc).__name__, exc
            )
            self._finish(
                fetch,
                RouteClientError(
                    f"route of {fetch.topic} could not be handled: {type(exc).__name__}: {exc}"
                ),
            )

    def _handle_route(self, response: RemotingCommand, fetch: _Fetch) -> None:
        if fetch.done:
            return
        topic = fetch.topic
        now = self._now_ms()
        version = _route_version(response)
        local = self._local.get(topic)
        if local is not None:
            required, since = local
            if fetch.started < since and version < required:
                # Sent before a departure was applied locally and answered from before it.
                self.counters["fetch_older_than_local"] += 1
                held = self._cache.peek(topic)
                self._finish(fetch, held or RouteClientError(f"{topic} changed while fetched"))
                return
            del self._local[topic]
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            self._learn_absent(topic, version, fetch.cause, fetch.notified_at_ms, fetch, now)
            self._finish(fetch, TopicNotExistError(topic, self._negative.retry_at(topic)))
            return
        if response.code != ResponseCode.SUCCESS:
            what = f"GET_ROUTEINFO_BY_TOPIC {topic}"
            self._finish(fetch, NameServerError(response.code, response.remark, what))
            return
        try:
            route = _decode_route(response.body)
        except ProtocolError as exc:
            self._finish(fetch, RouteClientError(f"malformed route of {topic}: {exc.remark}"))
            return
        if not self._cache.is_held(topic) and not fetch.waiters:
            self.counters["fetch_discarded_expired"] += 1
            self._finish(fetch, RouteClientError(f"topic {topic} expired while fetched"))
            return
        try:
            update = self._cache.put(topic, route, version, now)
        except RouteTooLargeError as exc:
            self.counters["routes_refused"] += 1
            self._finish(fetch, RouteClientError(f"route of {topic} refused: {exc}"))
            return
        self._negative.clear(topic)
        self._absent.discard(topic)
        self._record(topic, version, True, fetch, now)
        if update.changed:
            self._emit(self._event(topic, True, version, update.entry, fetch.cause, now))
        self._finish(fetch, update.entry)

    def _fetch_failed(self, failure: Failure, fetch: _Fetch) -> None:
        self.counters["fetch_failed"] += 1
        error = (
            failure.value
            if isinstance(failure.value, Exception)
            else RouteClientError(describe(failure))
        )
        self._finish(fetch, error)

    def _finish(self, fetch: _Fetch, outcome: CachedRoute | Exception) -> None:
        if fetch.done:
            return
        fetch.done = True
        fetch.outcome = outcome
        if self._inflight.get(fetch.topic) is fetch:
            del self._inflight[fetch.topic]
        waiters, fetch.waiters = fetch.waiters, []
        if isinstance(outcome, Exception) and not waiters and not self._stopped:
            level = logging.DEBUG if isinstance(outcome, TopicNotExistError) else logging.WARNING
            log.log(
                level, "background fetch of %s (%s) failed: %s", fetch.topic, fetch.cause, outcome
            )
        for waiter in waiters:
            if isinstance(outcome, Exception):
                waiter.errback(outcome)
            else:
                waiter.callback(outcome)
        follow_up = fetch.follow_up
        if follow_up is None or self._stopped or not self._cache.is_held(fetch.topic):
            return
        cause, notified_at, wanted = follow_up
        held = self._cache.peek(fetch.topic)
        if wanted is None or needs_refetch(held.version if held else None, wanted):
            self.counters["fetch_follow_up"] += 1
            self._fetch(fetch.topic, cause, notified_at_ms=notified_at)

    def _learn_absent(
        self,
        topic: str,
        version: int,
        cause: str,
        notified_at_ms: int | None,
        fetch: _Fetch | None,
        now: int,
    ) -> None:
        """The topic does not exist (TOPIC_NOT_EXIST or DELETED): remember it, tell listeners."""
        if not self._cache.is_held(topic):
            return
        self._negative.put(topic, now)
        self._cache.drop(topic)
        newly_absent = topic not in self._absent
        self._absent.add(topic)
        requested_at = fetch.requested_at_ms if fetch is not None else now
        self._telemetry.record(
            RefetchRecord(
                topic, version, False, cause, notified_at_ms, requested_at, now, self._link.addr
            )
        )
        if newly_absent:
            self._emit(self._event(topic, False, version, None, cause, now))

    def _refetch_all(self, cause: str, notified_at_ms: int | None = None) -> None:
        if cause in (EPOCH, RECONNECT):
            self._local.clear()  # versions of another server process are not comparable
        topics = self._cache.held()
        self.counters[f"refetch_all.{cause}"] += 1
        log.info("refetching all %d held topics (%s)", len(topics), cause)
        for topic in topics:
            self._fetch(topic, cause, notified_at_ms=notified_at_ms)

    def _record(self, topic: str, version: int, exists: bool, fetch: _Fetch, now: int) -> None:
        self._telemetry.record(
            RefetchRecord(
                topic,
                version,
                exists,
                fetch.cause,
                fetch.notified_at_ms,
                fetch.requested_at_ms,
                now,
                self._link.addr,
            )
        )

    # -- listeners -----------------------------------------------------------------------------

    def _event(
        self,
        topic: str,
        exists: bool,
        version: int,
        route: CachedRoute | None,
        cause: str,
        now: int,
    ) -> RouteEvent:
        return RouteEvent(topic, exists, version, route, cause, now, self._link.addr)

    def _emit(self, event: RouteEvent) -> None:
        for callback in list(self._listeners.get(event.topic, ())):
            try:
                callback(event)
            except Exception:
                self.counters["listener_errors"] += 1
                log.exception("route listener for %s failed", event.topic)

    # -- push: subscriptions ------------------------------------------------------------------

    def _want_subscription(self, topic: str) -> None:
        """Subscribe a newly held topic; topics held in one reactor turn share one request."""
        if self._push_unsupported or self._link.current is None or self._stopped:
            return  # on (re)connect every held topic is subscribed anyway
        self._to_subscribe.add(topic)
        if self._flush_call is None or not self._flush_call.active():
            # Zero delay on the reactor (not the clock): "after this turn", not a timer.
            self._flush_call = self._reactor.callLater(0, self._flush_subscriptions)

    def _flush_subscriptions(self) -> None:
        self._flush_call = None
        proto = self._link.current
        topics = [
            t for t in self._to_subscribe if self._cache.is_held(t) and t not in self._subscribed
        ]
        self._to_subscribe.clear()
        if proto is not None and topics and not self._push_unsupported:
            self._subscribe(proto, sorted(topics), SUBSCRIBE)

    def _subscribe(self, proto: RemotingProtocol, topics: list[str], cause: str) -> None:
        for batch in _batches(topics, self.config.subscribe_batch_size):
            cmd = RemotingCommand.request(
                RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
                body=encode_subscribe(batch, self._client_id),
            )
            self.counters["subscribe_sent"] += 1
            d = self._link.send_on(proto, cmd)
            d.addCallbacks(
                self._subscribe_answered,
                self._subscribe_failed,
                callbackArgs=(proto, batch, cause),
                errbackArgs=(proto, batch, cause),
            )
            d.addErrback(self._unexpected, "handling a SUBSCRIBE answer")

    def _subscribe_answered(
        self, response: RemotingCommand, proto: RemotingProtocol, batch: list[str], cause: str
    ) -> None:
        if not self._link.is_current(proto) or self._stopped:
            return
        if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            if not self._push_unsupported:
                log.info(
                    "name server %s does not support route push (%s); polling every %d ms",
                    proto.label,
                    response.remark or "",
                    self.config.poll_interval_ms,
                )
            self._push_unsupported = True
            self._set_push_healthy(False)
            if cause == RECONNECT:
                self._refetch_all(RECONNECT)
            return
        if response.code == ResponseCode.GO_AWAY:
            self._link.go_away(proto, (), still_serving=False)
            return
        if response.code != ResponseCode.SUCCESS:
            self.counters["subscribe_refused"] += 1
            log.warning(
                "name server %s refused SUBSCRIBE of %d topics: code %d, %s",
                proto.label,
                len(batch),
                response.code,
                response.remark or "",
            )
            self._set_push_healthy(False)
            if cause == RECONNECT:
                self._refetch(batch, RECONNECT)
            return
        try:
            ack = decode_subscribe_ack(response.body)
        except ProtocolError as exc:
            self.counters["subscribe_refused"] += 1
            log.warning("malformed SUBSCRIBE ack from %s: %s", proto.label, exc.remark)
            self._set_push_healthy(False)
            return
        held = [t for t in batch if self._cache.is_held(t)]
        self._subscribed.update(held)
        gone = sorted(set(batch) - set(held))
        if gone:  # expired while the request was in flight
            self._unsubscribe(proto, gone)
        self._set_push_healthy(True)
        if self._tracker.on_ack(ack.epoch):
            # Held versions come from another name-server process: not comparable.
            self._refetch_all(RECONNECT if cause == RECONNECT else EPOCH)
            return
        for tv in ack.topics:
            if not self._cache.is_held(tv.topic):
                continue
            if cause == VERSION_CHECK and tv.topic in self._spread:
                continue  # a spread refetch is already on its way
            entry = self._cache.peek(tv.topic)
            if tv.exists:
                if needs_refetch(entry.version if entry else None, tv.version):
                    self._fetch(tv.topic, cause, wanted_version=tv.version)
            elif entry is not None:
                self._fetch(tv.topic, cause)

    def _subscribe_failed(
        self, failure: Failure, proto: RemotingProtocol, batch: list[str], cause: str
    ) -> None:
        self.counters["subscribe_failed"] += 1
        if not self._link.is_current(proto) or self._stopped:
            return
        log.warning(
            "SUBSCRIBE of %d topics at %s failed: %s", len(batch), proto.label, describe(failure)
        )
        self._set_push_healthy(False)
        if cause == RECONNECT:
            self._refetch(batch, RECONNECT)

    def _refetch(self, topics: Iterable[str], cause: str) -> None:
        for topic in topics:
            if self._cache.is_held(topic):
                self._fetch(topic, cause)

    def _unsubscribe(self, proto: RemotingProtocol, topics: list[str]) -> None:
        for batch in _batches(topics, self.config.subscribe_batch_size):
            cmd = RemotingCommand.request(
                RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_unsubscribe(batch)
            )
            self.counters["unsubscribe_sent"] += 1
            d = self._link.send_on(proto, cmd)
            d.addCallbacks(
                self._unsubscribe_answered,
                self._unsubscribe_failed,
                callbackArgs=(proto,),
                errbackArgs=(proto,),
            )

    def _unsubscribe_answered(self, response: RemotingCommand, proto: RemotingProtocol) -> None:
        if response.code != ResponseCode.SUCCESS:
            log.info(
                "UNSUBSCRIBE at %s answered code %d: %s",
                proto.label,
                response.code,
                response.remark,
            )

    def _unsubscribe_failed(self, failure: Failure, proto: RemotingProtocol) -> None:
        # The subscription dies with the connection anyway; nothing to repair.
        log.info("UNSUBSCRIBE at %s failed: %s", proto.label, describe(failure))

    def _set_push_healthy(self, healthy: bool) -> None:
        if healthy == self._push_healthy:
            return
        self._push_healthy = healthy
        if self._started and not self._stopped:
            self._schedule_poll()

    # -- push: requests from the server -------------------------------------------------------

    def _handle_request(
        self, proto: RemotingProtocol, cmd: RemotingCommand
    ) -> RemotingCommand | None:
        if cmd.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED:
            if self._link.is_current(proto):
                self._on_notify(cmd)
            else:
                self.counters["notify_from_old_connection"] += 1
            return cmd.make_response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.GO_AWAY:
            try:
                msg = decode_go_away(cmd.body)
                alternatives: list[str] = list(msg.alternative_addrs)
                reason = msg.reason
            except ProtocolError as exc:
                alternatives, reason = [], exc.remark
            self.counters["go_away_received"] += 1
            log.info("GO_AWAY from %s (%s); alternatives %s", proto.label, reason, alternatives)
            self._link.go_away(proto, alternatives)
            return cmd.make_response(ResponseCode.SUCCESS)
        return None

    def _on_notify(self, cmd: RemotingCommand) -> None:
        self.counters["notify_received"] += 1
        try:
            msg = decode_notification(cmd.body)
        except ProtocolError as exc:
            # A change was announced but cannot be read: any held topic may be stale.
            log.warning("malformed NOTIFY from %s: %s", self._link.addr, exc.remark)
            self._refetch_all(GAP)
            return
        emitted = msg.emitted_at_ms or None
        verdict = self._tracker.on_notify(msg.epoch, msg.sequence)
        if verdict is Verdict.STALE:
            self.counters["notify_stale"] += 1
            return
        departures = [b for b in msg.brokers if b.kind == BrokerChangeKind.DEPARTED]
        if verdict is not Verdict.IN_ORDER:
            # Versions cannot be trusted, but a departed broker is gone whatever they say.
            for departure in departures:
                self._apply_departure(departure, emitted, exact_allowed=False)
            self._refetch_all(GAP if verdict is Verdict.GAP else EPOCH, emitted)
            return
        # Departures first: a topic change of the same frame at a higher version still refetches.
        for departure in departures:
            self._apply_departure(departure, emitted, exact_allowed=True)
        now = self._now_ms()
        for change in msg.changes:
            topic = change.topic
            if not self._cache.is_held(topic):
                self.counters["notify_not_held"] += 1
                continue
            if change.kind == ChangeKind.DELETED:
                self._learn_absent(topic, change.version, NOTIFY, emitted, None, now)
                running = self._inflight.get(topic)
                if running is not None:  # its answer may predate the delete
                    running.add_reason(NOTIFY, emitted, change.version)
                continue
            if change.kind == ChangeKind.CREATED:
                self._negative.clear(topic)
            entry = self._cache.peek(topic)
            if entry is not None and not needs_refetch(entry.version, change.version):
                self.counters["notify_already_held"] += 1
                continue
            self._fetch(topic, NOTIFY, notified_at_ms=emitted, wanted_version=change.version)
        for arrival in msg.brokers:
            if arrival.kind == BrokerChangeKind.ARRIVED:
                self._apply_arrival(arrival)

    # -- push: broker events ---------------------------------------------------------------------

    def _apply_departure(self, entry: Any, emitted: int | None, *, exact_allowed: bool) -> None:
        """Drop the broker from every held route now; adopt exact steps; queue confirmations."""
        self.counters["broker_departures"] += 1
        now = self._now_ms()
        gone_addrs = {a.addr for a in entry.addrs}
        steps = {s.topic: (s.from_version, s.version) for s in entry.topics}
        since = next(self._fetch_seq)
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
            if after is None:
                self._learn_absent(topic, version, BROKER_GONE, emitted, None, now)
                continue
            update = self._cache.put(topic, after, version, now)
            update.entry.fetched_at_ms = held.fetched_at_ms  # still the last server answer
            if update.changed:
                self._emit(self._event(topic, True, version, update.entry, BROKER_GONE, now))
        if confirm:
            self._spread_refetch(
                confirm,
                CONFIRM,
                self.config.departure_confirm_delay_ms,
                max(self.config.departure_confirm_window_ms, entry.refetch_window_ms),
            )
        self._emit_broker(entry, "departed", touched, now)

    def _apply_arrival(self, entry: Any) -> None:
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
            self._negative.clear(topic)
            due.append((topic, step.version))
        if due:
            # The server may ask for a longer window: it sizes it from the whole fleet's debt.
            window = max(self.config.arrival_refetch_window_ms, entry.refetch_window_ms)
            self._spread_refetch(due, BROKER_ARRIVED, 0, window)
        self._emit_broker(entry, "arrived", [t for t, _ in due], now)

    def _spread_refetch(
        self, topics: list[tuple[str, int | None]], cause: str, delay_ms: int, window_ms: int
    ) -> None:
        queued = self._spread.spread(
            topics,
            cause,
            now_ms=self._clock.seconds() * 1000.0,
            delay_ms=delay_ms,
            window_ms=window_ms,
            rng=self._rng,
        )
        self.counters[f"spread_queued.{cause}"] += queued
        self._arm_spread()

    def _arm_spread(self) -> None:
        due = self._spread.next_due_ms()
        if due is None or self._stopped:
            return
        if self._spread_call is not None and self._spread_call.active():
            if self._spread_call.getTime() * 1000.0 <= due:
                return
            self._spread_call.cancel()
        delay = max(0.0, due / 1000.0 - self._clock.seconds())
        self._spread_call = self._clock.callLater(delay, self._run_spread)

    def _run_spread(self) -> None:
        self._spread_call = None
        for topic, cause, wanted in self._spread.pop_due(self._clock.seconds() * 1000.0):
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
            self._fetch(topic, cause, wanted_version=wanted)
        self._arm_spread()

    def _emit_broker(self, entry: Any, kind: str, topics: list[str], now: int) -> None:
        event = BrokerEvent(
            kind=kind,
            broker_name=entry.broker_name,
            cluster=entry.cluster,
            addrs=tuple((a.broker_id, a.addr) for a in entry.addrs),
            cause=entry.cause,
            broker_name_gone=entry.broker_name_gone,
            topics=tuple(topics),
            learned_at_ms=now,
            namesrv=self._link.addr,
        )
        for callback in list(self._broker_listeners):
            try:
                callback(event)
            except Exception:
                self.counters["listener_errors"] += 1
                log.exception("broker listener failed on %s %s", kind, entry.broker_name)

    def _version_check(self) -> None:
        """Re-SUBSCRIBE held topics: the ack's versions reveal changes push did not deliver."""
        proto = self._link.current
        if proto is None or not self._push_healthy or self._push_unsupported:
            return
        held = self._cache.held()
        if held:
            self.counters["version_checks"] += 1
            self._subscribe(proto, sorted(held), VERSION_CHECK)

    # -- LinkListener ----------------------------------------------------------------------------

    def on_connected(self, proto: RemotingProtocol, addr: str) -> None:
        self._tracker.new_connection()
        self._local.clear()
        self._subscribed.clear()
        self._to_subscribe.clear()
        self._push_unsupported = False
        self._set_push_healthy(False)
        cause = RECONNECT if self._connected_before else SUBSCRIBE
        self._connected_before = True
        held = self._cache.held()
        if held:
            self._subscribe(proto, held, cause)

    def on_disconnected(self, addr: str) -> None:
        self._subscribed.clear()
        self._set_push_healthy(False)

    def on_switching(self, old: RemotingProtocol, old_addr: str, *, going_away: bool) -> None:
        # Tell a server we leave for good to stop notifying us (#3870 3.1.1.1); a server going
        # away drops its subscriptions itself.
        if not going_away and old.connected and self._subscribed and not self._push_unsupported:
            self._unsubscribe(old, sorted(self._subscribed))
        self._subscribed.clear()
        self._set_push_healthy(False)

    # -- timers --------------------------------------------------------------------------------

    def _schedule_poll(self) -> None:
        if self._poll_call is not None and self._poll_call.active():
            self._poll_call.cancel()
        interval = (
            self.config.poll_interval_with_push_ms
            if self._push_healthy
            else self.config.poll_interval_ms
        )
        self._poll_call = self._clock.callLater(interval / 1000.0, self._poll)

    def _poll(self) -> None:
        self._poll_call = None
        self._guarded(self._poll_once)
        if not self._stopped:
            self._schedule_poll()

    def _poll_once(self) -> None:
        """The safety net: refetch every held topic (absences only once their TTL is over)."""
        self._expire_idle()
        proto = self._link.current
        if proto is None:
            return  # the next connection refetches what changed
        self.counters["polls"] += 1
        now = self._now_ms()
        for topic in self._cache.held():
            if not self._negative.is_absent(topic, now):
                self._fetch(topic, POLL)
        if not self._push_unsupported:
            missing = [t for t in self._cache.held() if t not in self._subscribed]
            if missing:  # a SUBSCRIBE that failed earlier
                self._subscribe(proto, missing, SUBSCRIBE)

    def _expire_idle(self) -> None:
        """Drop topics idle past the expiry and unsubscribe them (#3870 3.2)."""
        gone = self._cache.expire(self._now_ms(), keep=set(self._listeners))
        if not gone:
            return
        self.counters["topics_expired"] += len(gone)
        for topic in gone:
            self._negative.clear(topic)
            self._absent.discard(topic)
            self._to_subscribe.discard(topic)
            self._local.pop(topic, None)
            self._spread.discard(topic)
        subscribed = [t for t in gone if t in self._subscribed]
        self._subscribed.difference_update(subscribed)
        proto = self._link.current
        if proto is not None and subscribed:
            self._unsubscribe(proto, sorted(subscribed))
        log.info("%d idle topics expired: %s", len(gone), ", ".join(sorted(gone)[:20]))

    def _guarded(self, call: Callable[[], None]) -> None:
        """Run a periodic job; an error is logged and counted, never stops the timer."""
        try:
            call()
        except Exception:
            self.counters["internal_errors"] += 1
            log.exception("error in periodic %s", getattr(call, "__name__", call))

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)

    def _unexpected(self, failure: Failure, what: str) -> None:
        self.counters["internal_errors"] += 1
        log.error("unexpected error %s: %s", what, failure.getTraceback())


def _route_version(response: RemotingCommand) -> int:
    """``routeVersion`` of a route answer; upstream name servers send none (unknown: 0)."""
    text = (response.ext_fields or {}).get("routeVersion", "")
    try:
        return max(0, int(text))
    except ValueError:
        return 0


def _decode_route(body: bytes) -> Any:
    from protocol.bodies import decode_route

    return decode_route(body)


def _batches(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
