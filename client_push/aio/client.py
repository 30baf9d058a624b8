"""The asyncio route client: cached routes kept fresh by push, with polling as the safety net.

asyncio glue around the same pure parts as the Twisted ``client_push.routes.client``:
``PushSession`` decides everything the push contract asks (route-push contract v1,
docs/protocol-extension.md) and returns actions, ``FetchTable`` and ``push_exchange`` say
what a request and an answer are, ``HeldRoutes`` keeps the caches in step. This module
carries the actions out, one handler per action type (an action without one is an error, not
a silent skip), and runs the timers on the injected clock. Nothing here imports Twisted.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

from client_push.aio.changes import RouteChanges
from client_push.aio.clock import Clock, LoopClock, Timer
from client_push.aio.fetches import RouteFetches
from client_push.aio.link import NameServerLink
from client_push.aio.push_requests import PushRequests
from client_push.aio.remoting import RemotingConnection
from client_push.config import ClientConfig
from client_push.errors import RouteClientError
from client_push.routes.client_core import RouteClientCore
from client_push.routes.events import FIRST, BrokerListener, Listeners, RouteListener, log
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
from client_push.routes.push_session import PushSession
from client_push.routes.route_cache import CachedRoute, PublishInfo, RouteCache
from client_push.routes.telemetry import TelemetrySink, open_telemetry


class UnknownActionError(RouteClientError):
    """The push session asked for an action this client has no handler for (a bug)."""


class RouteClient(RouteClientCore[RemotingConnection]):
    """Holds topic routes for the producers and consumers of one asyncio program.

    ``async with RouteClient(config) as client:`` connects and starts the timers on the running
    loop; leaving it closes everything. ``clock`` (default: the wall clock with the loop's
    timers) drives every timer, so tests run polls and expiry on a fake one.
    """

    _link: NameServerLink
    _subscriptions: PushRequests

    def __init__(
        self,
        config: ClientConfig,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        telemetry: TelemetrySink | None = None,
    ) -> None:
        self.config = config
        self._given_clock = clock
        self._rng = rng or random.Random()
        self.counters: Counter[str] = Counter()
        self._cache = RouteCache(
            config.topic_idle_expiry_ms, config.max_queue_nums, config.max_route_queues
        )
        self._negative = NegativeCache(config.negative_ttl_ms)
        self._telemetry = (
            telemetry
            if telemetry is not None
            else open_telemetry(config.telemetry_path, config.telemetry_memory_bytes)
        )
        self._listeners = Listeners(self.counters)
        self._streams: set[RouteChanges] = set()
        self._actions: dict[type, Callable[[Any, RemotingConnection | None], None]] = {
            Refetch: self._refetch,
            InstallRoute: lambda action, _conn: self._install(action),
            FollowUp: self._follow_up,
            Announce: self._announce,
            WakeAt: self._wake_at,
            SetPushHealthy: self._push_health_changed,
            SendSubscribe: self._send_subscribe,
            SendUnsubscribe: self._send_unsubscribe,
            MoveTo: self._move_to,
        }
        """One handler per action type; each wire action is dropped without a connection."""
        self._started = False
        self._stopped = False

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> RouteClient:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def start(self) -> None:
        """Connect and start the poll, expiry and version-check timers on the running loop."""
        if self._started:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        self._loop = loop
        clock = self._given_clock if self._given_clock is not None else LoopClock(loop)
        self._clock = clock
        config = self.config
        self._link = NameServerLink(config, loop, clock, self._rng, self._handle_request, self)
        link = self._link
        self._routes = HeldRoutes(self._cache, self._negative, self._telemetry, lambda: link.addr)
        marks = itertools.count(1)
        self._session = PushSession(
            config,
            self._routes,
            clock=clock.time,
            rng=self._rng,
            counters=self.counters,
            marks=marks,
        )
        self._fetches = RouteFetches(
            link,
            self._routes,
            self._session,
            self._listeners,
            loop=loop,
            clock=clock,
            counters=self.counters,
            marks=marks,
        )
        self._subscriptions = PushRequests(
            config,
            link,
            self._session,
            self._run,
            loop=loop,
            counters=self.counters,
            client_id=config.client_id or f"{socket.gethostname()}@{os.getpid()}",
        )
        self._spread_timer = Timer(clock, self._run_spread)
        self._poll_timer = Timer(clock, self._poll)
        self._expiry_timer = Timer(clock, self._expiry_tick)
        self._version_check_timer = Timer(clock, self._version_check_tick)
        self._timers = (
            self._spread_timer,
            self._poll_timer,
            self._expiry_timer,
            self._version_check_timer,
        )
        link.start()
        self._poll_timer.arm(self._session.poll_interval_ms / 1000.0)
        self._expiry_timer.arm(config.expiry_check_interval_ms / 1000.0)
        # A random phase: clients started together must not check (and refetch) together.
        interval = config.version_check_interval_ms / 1000.0
        self._version_check_timer.arm(interval * self._rng.random())

    async def close(self) -> None:
        """Stop timers, fail waiting lookups with ``ClientStoppedError``, end every
        ``changes()`` stream and close connections."""
        if self._stopped:
            return
        self._stopped = True
        for stream in list(self._streams):
            stream.close()
        if not self._started:
            self._telemetry.close()
            return
        self._subscriptions.stop()
        for timer in self._timers:
            timer.cancel()
        self._fetches.stop()
        try:
            await self._link.stop()
        finally:
            self._telemetry.close()

    # -- public API ----------------------------------------------------------------------------

    async def get_route(self, topic: str) -> CachedRoute:
        """The held route of ``topic``, fetched on first use.

        Concurrent first lookups share one request (upstream #4561). A topic remembered as
        absent raises ``TopicNotExistError`` at once, without a request, until its TTL ends.
        A lookup cancelled while the first fetch is in flight takes back what it started:
        with no other caller its request is dropped and the topic is not held any more.
        """
        entry = self._cached(topic)
        if entry is not None:
            return entry
        made_held = self._miss(topic)
        fetch = self._fetches.fetch(topic, FIRST)
        try:
            return await self._fetches.wait(fetch)
        except asyncio.CancelledError:
            self.counters["lookups_cancelled"] += 1
            if (
                made_held
                and not fetch.waiters
                and self._cache.peek(topic) is None
                and topic not in self._routes.absent
                and topic not in self._listeners.topics()
            ):
                self._run(self._session.release([topic]), self._link.current)
            self._fetches.drop_if_unwanted(fetch)
            raise

    async def get_publish_info(self, topic: str) -> PublishInfo:
        """The queues a producer may send ``topic`` to (write perm and a master required)."""
        return (await self.get_route(topic)).publish_info

    def changes(self, topics: Iterable[str]) -> RouteChanges:
        """An async iterator of the route states learned for ``topics`` from now on, starting
        with the ones already held; at most one unread state per topic (the newest)."""
        self._check_started()
        wanted = list(dict.fromkeys(topics))
        for topic in wanted:
            self._check_usable(topic)
        removers: list[Callable[[], None]] = []
        made_held: dict[str, int | None] = {}

        def close() -> None:
            self._streams.discard(stream)
            for remove in removers:
                remove()
            if self._stopped:
                return
            listened = self._listeners.topics()
            alone = [
                t
                for t, at in made_held.items()
                if t not in listened and self._cache.last_access_ms(t) == at
            ]
            if alone:
                self._run(self._session.release(alone), self._link.current)

        stream = RouteChanges(self._loop, close)
        self._streams.add(stream)
        for topic in wanted:
            new = not self._cache.is_held(topic)
            removers.append(self.add_listener(topic, stream.offer))
            if new:
                made_held[topic] = self._cache.last_access_ms(topic)
        return stream

    def add_listener(self, topic: str, callback: RouteListener) -> Callable[[], None]:
        """Call ``callback`` with every route state learned for ``topic``; returns a remover.

        The state already held is replayed at once (cause ``cached``); a topic not held yet is
        fetched. A topic with listeners never expires.
        """
        self._check_started()
        remove, unknown = self._listen(topic, callback)
        if unknown:
            self._fetches.fetch(topic, FIRST)
        return remove

    def add_broker_listener(self, callback: BrokerListener) -> Callable[[], None]:
        """Call ``callback`` with every broker arrival or departure announced; returns a remover."""
        return self._listeners.add_broker(callback)

    def update_namesrv_addrs(self, addrs: Sequence[str]) -> None:
        """Replace the name-server list; a changed list picks a server afresh and moves there."""
        self._check_started()
        self._link.update_addrs(addrs)

    def outstanding(self) -> dict[str, int]:
        """What the client has in flight or armed, table by table (for tests and debugging):
        a cancelled lookup or a closed stream leaves none of it behind."""
        link = self._link
        return {
            "requests": sum(conn.pending for conn in link.connections),
            "waiting_for_connection": link.waiting,
            "fetches": len(self._fetches.inflight),
            "fetch_tasks": len(self._fetches.requests),
            "fetch_waiters": sum(len(f.waiters) for f in self._fetches.inflight.values()),
            "push_requests": len(self._subscriptions.tasks),
            "route_listeners": len(self._listeners.topics()),
            "streams": len(self._streams),
            "held_topics": len(self._cache.held()),
            "subscribed": self._session.subscription_count,
            "timers": sum(timer.active for timer in self._timers) + link.reconnect_pending,
        }

    # -- the push session's actions ------------------------------------------------------------

    def _run(self, actions: list[Action], conn: RemotingConnection | None) -> None:
        """Carry out ``actions`` in order; wire actions go to ``conn`` (dropped when None)."""
        for action in actions:
            carry_out = self._actions.get(type(action))
            if carry_out is None:
                self.counters["internal_errors"] += 1
                raise UnknownActionError(f"no handler for action {type(action).__name__}")
            carry_out(action, conn)

    def _refetch(self, action: Refetch, conn: RemotingConnection | None) -> None:
        self._fetches.fetch(
            action.topic,
            action.cause,
            notified_at_ms=action.notified_at_ms,
            wanted_version=action.wanted_version,
        )

    def _follow_up(self, action: FollowUp, conn: RemotingConnection | None) -> None:
        self._fetches.follow_up(
            action.topic, action.cause, action.notified_at_ms, action.wanted_version
        )

    def _announce(self, action: Announce, conn: RemotingConnection | None) -> None:
        self._listeners.tell(action.event)

    def _wake_at(self, action: WakeAt, conn: RemotingConnection | None) -> None:
        if not self._stopped:
            delay = action.due_ms / 1000.0 - self._clock.time()
            self._spread_timer.arm(delay, earliest=True)

    def _push_health_changed(self, action: SetPushHealthy, conn: RemotingConnection | None) -> None:
        if not self._stopped:
            self._poll_timer.arm(self._session.poll_interval_ms / 1000.0)

    def _send_subscribe(self, action: SendSubscribe, conn: RemotingConnection | None) -> None:
        if conn is not None:
            self._subscriptions.subscribe(conn, action.topics, action.cause)

    def _send_unsubscribe(self, action: SendUnsubscribe, conn: RemotingConnection | None) -> None:
        if conn is not None:
            self._subscriptions.unsubscribe(conn, action.topics)

    def _move_to(self, action: MoveTo, conn: RemotingConnection | None) -> None:
        if conn is not None:
            self._link.go_away(conn, action.alternatives, still_serving=action.still_serving)

    # -- timers --------------------------------------------------------------------------------

    def _run_spread(self) -> None:
        self._guarded(lambda: self._run(self._session.spread_due(), self._link.current))

    def _version_check_tick(self) -> None:
        conn = self._link.current
        if conn is not None:
            self._guarded(lambda: self._run(self._session.version_check(), conn))
        if not self._stopped:
            self._version_check_timer.arm(self.config.version_check_interval_ms / 1000.0)

    def _poll(self) -> None:
        self._guarded(self._poll_once)
        if not self._stopped:
            self._poll_timer.arm(self._session.poll_interval_ms / 1000.0)

    def _poll_once(self) -> None:
        self._expire_idle()
        conn = self._link.current
        if conn is not None:  # otherwise the next connection refetches what changed
            self._run(self._session.poll(), conn)

    def _expiry_tick(self) -> None:
        self._guarded(self._expire_idle)
        if not self._stopped:
            self._expiry_timer.arm(self.config.expiry_check_interval_ms / 1000.0)

    # -- helpers -------------------------------------------------------------------------------

    def _check_started(self) -> None:
        if not self._started:
            raise RouteClientError("route client not started: use `async with RouteClient(...)`")

    def _guarded(self, call: Callable[[], None]) -> None:
        """Run a timer's job; an error is logged and counted, never stops the timer."""
        try:
            call()
        except Exception:
            self.counters["internal_errors"] += 1
            log.exception("error in a timer of the asyncio route client")

    def _now_ms(self) -> int:
        self._check_started()
        return int(self._clock.time() * 1000)
