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
from client_push.routes.client_core import RouteClientCore
from client_push.routes.events import (
    FIRST,
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
)
from client_push.routes.telemetry import TelemetrySink, open_telemetry
from client_push.wire.connection import NameServerLink
from client_push.wire.remoting import RemotingProtocol

__all__ = ["BrokerEvent", "BrokerListener", "RouteClient", "RouteEvent", "RouteListener"]


class RouteClient(RouteClientCore[RemotingProtocol]):
    """Holds topic routes for producers and consumers of one process.

    ``reactor`` carries the sockets; ``clock`` (default: the reactor) drives every timer, so
    tests can run loopback traffic under ``twisted.internet.task.Clock``.
    """

    _link: NameServerLink
    _subscriptions: PushRequests

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
        client_id = config.client_id or f"{socket.gethostname()}@{os.getpid()}"
        self._telemetry = (
            telemetry
            if telemetry is not None
            else open_telemetry(
                config.telemetry_path,
                config.telemetry_memory_bytes,
                {"client_id": client_id, "host": socket.gethostname()},
            )
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
            client_id=client_id,
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
        entry = self._cached(topic)
        if entry is not None:
            return entry
        self._miss(topic)
        return await self._join(self._fetch(topic, FIRST))

    async def get_publish_info(self, topic: str) -> PublishInfo:
        """The queues a producer may send ``topic`` to (write perm and a master required)."""
        return (await self.get_route(topic)).publish_info

    def add_listener(self, topic: str, callback: RouteListener) -> Callable[[], None]:
        """Call ``callback`` with every route state learned for ``topic``; returns a remover.

        The state already held is replayed at once (cause ``cached``); a topic not held yet is
        fetched. A topic with listeners never expires.
        """
        remove, unknown = self._listen(topic, callback)
        if unknown and self._started:
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

    # -- helpers -------------------------------------------------------------------------------

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
