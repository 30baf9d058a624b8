"""The route client: cached routes kept fresh by push, with polling as the safety net.

Twisted glue around pure parts: ``PushSession`` decides everything the push contract asks
(route-push contract v1, docs/protocol-extension.md) and returns actions; ``HeldRoutes`` keeps
the route cache, the negative cache and known absences in step. This module carries the
actions out over a ``NameServerLink`` (fetches in ``fetches``, SUBSCRIBE and UNSUBSCRIBE in
``push_requests``), calls the listeners and runs the timers on the injected clock.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet import defer, task

from client_push.config import ClientConfig
from client_push.errors import ClientStoppedError
from client_push.routes.events import (
    CACHED,
    FIRST,
    INLINE,
    BrokerEvent,
    BrokerListener,
    Listeners,
    RouteEvent,
    RouteListener,
    log,
)
from client_push.routes.fetches import RouteFetches
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.negative_cache import NegativeCache
from client_push.routes.push_actions import (
    Action,
    Announce,
    FollowUp,
    InstallRoute,
    MoveTo,
    Refetch,
    SendSubscribe,
    SendUnsubscribe,
    SetPushHealthy,
    WakeAt,
)
from client_push.routes.push_requests import PushRequests
from client_push.routes.push_session import PushSession
from client_push.routes.route_cache import (
    CachedRoute,
    PublishInfo,
    RouteCache,
    RouteTooLargeError,
)
from client_push.routes.telemetry import TelemetrySink, open_telemetry
from client_push.wire.connection import LinkListener, NameServerLink
from client_push.wire.remoting import RemotingProtocol
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.push_codec import decode_go_away, decode_notification

__all__ = ["BrokerEvent", "BrokerListener", "RouteClient", "RouteEvent", "RouteListener"]


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
        self.counters: Counter[str] = Counter()
        self._link = NameServerLink(
            config, reactor, self._clock, self._rng, self._handle_request, self
        )
        self._cache = RouteCache(
            config.topic_idle_expiry_ms, config.max_queue_nums, config.max_route_queues
        )
        self._negative = NegativeCache(config.negative_ttl_ms)
        self._telemetry = (
            telemetry
            if telemetry is not None
            else open_telemetry(config.telemetry_path, config.telemetry_memory_bytes)
        )
        link = self._link
        self._routes = HeldRoutes(self._cache, self._negative, self._telemetry, lambda: link.addr)
        self._listeners = Listeners(self.counters)
        marks = itertools.count(1)
        self._session = PushSession(
            config,
            self._routes,
            clock=self._clock.seconds,
            rng=self._rng,
            counters=self.counters,
            marks=marks,
        )
        self._fetches = RouteFetches(
            self._link,
            self._routes,
            self._session,
            self._listeners,
            clock=self._clock,
            counters=self.counters,
            marks=marks,
        )
        self._fetch = self._fetches.fetch
        """Start a fetch of a topic, or join the one in flight (remembering why)."""
        self._join = self._fetches.join
        self._inflight = self._fetches.inflight
        """topic → fetch in flight (for inspection)."""
        self._subscriptions = PushRequests(
            config,
            self._link,
            self._session,
            self._run,
            reactor=reactor,
            counters=self.counters,
            client_id=config.client_id or f"{socket.gethostname()}@{os.getpid()}",
        )
        self._spread_timer = EarliestCall(self._clock, self._run_spread)
        self._version_check_loop: task.LoopingCall | None = None
        self._version_check_start: Any | None = None
        self._poll_call: Any | None = None
        self._expiry_loop: task.LoopingCall | None = None
        self._started = False
        self._stopped = False

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
            if topic not in self._cache and topic not in self._routes.absent:
                self._fetch(topic, FIRST)

    def stop(self) -> defer.Deferred[None]:
        """Stop timers, fail waiting lookups with ``ClientStoppedError`` and close connections."""
        self._stopped = True
        self._subscriptions.stop()
        self._spread_timer.cancel()
        for call in (self._poll_call, self._version_check_start):
            if call is not None and call.active():
                call.cancel()
        for periodic in (self._expiry_loop, self._version_check_loop):
            if periodic is not None and periodic.running:
                periodic.stop()
        self._fetches.stop()
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
            self._subscriptions.want(topic)
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
        remove = self._listeners.add_route(topic, callback)
        now = self._now_ms()
        if self._cache.touch(topic, now):
            self._subscriptions.want(topic)
        entry = self._cache.peek(topic)
        if entry is not None:
            callback(self._routes.event(topic, True, entry.version, entry, CACHED, now))
        elif topic in self._routes.absent:
            callback(self._routes.event(topic, False, 0, None, CACHED, now))
        elif self._started:
            self._fetch(topic, FIRST)
        return remove

    def add_broker_listener(self, callback: BrokerListener) -> Callable[[], None]:
        """Call ``callback`` with every broker arrival or departure announced; returns a remover.

        Departures are reported after every held route has dropped the broker, so a producer
        reacting to one already sees routes without it.
        """
        return self._listeners.add_broker(callback)

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
        return self._session.push_healthy

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
            subscribed=self._session.subscription_count,
            push_active=self._session.push_healthy,
            namesrv=self._link.addr,
            connects=self._link.connects,
            connect_failures=self._link.connect_failures,
        )
        return out

    # -- the push session's actions ------------------------------------------------------------

    def _run(self, actions: list[Action], proto: RemotingProtocol | None) -> None:
        """Carry out ``actions`` in order; wire actions go to ``proto`` (dropped when None)."""
        for action in actions:
            if isinstance(action, Refetch):
                self._fetches.fetch(
                    action.topic,
                    action.cause,
                    notified_at_ms=action.notified_at_ms,
                    wanted_version=action.wanted_version,
                )
            elif isinstance(action, InstallRoute):
                self._install(action)
            elif isinstance(action, Announce):
                self._listeners.tell(action.event)
            elif isinstance(action, FollowUp):
                self._fetches.follow_up(
                    action.topic, action.cause, action.notified_at_ms, action.wanted_version
                )
            elif isinstance(action, WakeAt):
                if not self._stopped:
                    self._spread_timer.arm(action.due_ms)
            elif isinstance(action, SetPushHealthy):
                if self._started and not self._stopped:
                    self._schedule_poll()
            elif proto is None:
                continue
            elif isinstance(action, SendSubscribe):
                self._subscriptions.subscribe(proto, action.topics, action.cause)
            elif isinstance(action, SendUnsubscribe):
                self._subscriptions.unsubscribe(proto, action.topics)
            elif isinstance(action, MoveTo):
                self._link.go_away(proto, action.alternatives, still_serving=action.still_serving)

    def _handle_request(
        self, proto: RemotingProtocol, cmd: RemotingCommand
    ) -> RemotingCommand | None:
        if cmd.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED:
            if not self._link.is_current(proto):
                self.counters["notify_from_old_connection"] += 1
                return cmd.make_response(ResponseCode.SUCCESS)
            self.counters["notify_received"] += 1
            try:
                msg = decode_notification(cmd.body)
            except ProtocolError as exc:
                actions = self._session.notification_unreadable(self._link.addr, exc.remark)
            else:
                actions = self._session.notified(msg)
            self._run(actions, proto)
            return cmd.make_response(ResponseCode.SUCCESS)
        if cmd.code == RequestCode.GO_AWAY:
            try:
                go_away = decode_go_away(cmd.body)
                alternatives: list[str] = list(go_away.alternative_addrs)
                reason = go_away.reason
            except ProtocolError as exc:
                alternatives, reason = [], exc.remark
            log.info("GO_AWAY from %s (%s); alternatives %s", proto.label, reason, alternatives)
            self._run(self._session.go_away(alternatives), proto)
            return cmd.make_response(ResponseCode.SUCCESS)
        return None

    # -- LinkListener ----------------------------------------------------------------------------

    def on_connected(self, proto: RemotingProtocol, addr: str) -> None:
        self._run(self._session.connected(), proto)

    def on_disconnected(self, addr: str) -> None:
        self._run(self._session.disconnected(), None)

    def on_switching(self, old: RemotingProtocol, old_addr: str, *, going_away: bool) -> None:
        actions = self._session.switching(going_away=going_away, old_connected=bool(old.connected))
        self._run(actions, old)

    # -- timers --------------------------------------------------------------------------------

    def _run_spread(self) -> None:
        self._run(self._session.spread_due(), self._link.current)

    def _version_check(self) -> None:
        proto = self._link.current
        if proto is not None:
            self._run(self._session.version_check(), proto)

    def _schedule_poll(self) -> None:
        if self._poll_call is not None and self._poll_call.active():
            self._poll_call.cancel()
        interval = self._session.poll_interval_ms
        self._poll_call = self._clock.callLater(interval / 1000.0, self._poll)

    def _poll(self) -> None:
        self._poll_call = None
        self._guarded(self._poll_once)
        if not self._stopped:
            self._schedule_poll()

    def _poll_once(self) -> None:
        self._expire_idle()
        proto = self._link.current
        if proto is None:
            return  # the next connection refetches what changed
        self._run(self._session.poll(), proto)

    def _expire_idle(self) -> None:
        self._run(self._session.expire_idle(self._listeners.topics()), self._link.current)

    # -- helpers -------------------------------------------------------------------------------

    def _install(self, action: InstallRoute) -> None:
        """Hold an inline route as a fetched one is held, with no request."""
        now = self._now_ms()
        try:
            _entry, changed = self._routes.learn_route(
                action.topic, action.route, action.version, INLINE, action.notified_at_ms, now, now
            )
        except RouteTooLargeError as exc:
            self.counters["routes_refused"] += 1
            log.warning("inline route of %s refused: %s", action.topic, exc)
            return
        if changed is not None:
            self._listeners.tell(changed)

    def _check_usable(self, topic: str) -> None:
        if self._stopped:
            raise ClientStoppedError("route client stopped")
        if not topic:
            raise ValueError("topic must not be empty")

    def _guarded(self, call: Callable[[], None]) -> None:
        """Run a periodic job; an error is logged and counted, never stops the timer."""
        try:
            call()
        except Exception:
            self.counters["internal_errors"] += 1
            log.exception("error in periodic %s", getattr(call, "__name__", call))

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)


class EarliestCall:
    """One delayed call of ``function``, kept at the earliest time asked for (clock ms)."""

    def __init__(self, clock: Any, function: Callable[[], None]) -> None:
        self._clock = clock
        self._function = function
        self._call: Any | None = None

    def arm(self, due_ms: float) -> None:
        call = self._call
        if call is not None and call.active():
            if call.getTime() * 1000.0 <= due_ms:
                return
            call.cancel()
        delay = max(0.0, due_ms / 1000.0 - self._clock.seconds())
        self._call = self._clock.callLater(delay, self._fire)

    def cancel(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()

    def _fire(self) -> None:
        self._call = None
        self._function()
