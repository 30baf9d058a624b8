"""The route client, written once for every event loop: cached routes kept fresh by push,
with polling as the safety net.

Over the runtime (``client_push.runtime.interface``): ``PushSession`` decides everything the
push contract asks (route-push contract v1, docs/protocol-extension.md) and returns actions,
``FetchTable`` and ``push_exchange`` say what a request and an answer are, ``HeldRoutes`` keeps
the caches in step. This class carries the actions out, one handler per action type (an action
without one is an error, not a silent skip), and runs the timers on the runtime's clock.
Twisted's ``client_push.routes.client.RouteClient`` and ``client_push.aio.RouteClient`` are
this class with their loop's adapter and their loop's public face.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from client_push.config import ClientConfig
from client_push.errors import ClientStoppedError, RouteClientError
from client_push.routes.changes import RouteChanges
from client_push.routes.events import (
    CACHED,
    FIRST,
    INLINE,
    BrokerListener,
    Listeners,
    RouteListener,
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
    ServerUp,
    SetPushHealthy,
    WakeAt,
)
from client_push.routes.push_exchange import server_request
from client_push.routes.push_requests import PushRequests
from client_push.routes.push_session import PushSession
from client_push.routes.route_cache import CachedRoute, PublishInfo, RouteCache, RouteTooLargeError
from client_push.routes.telemetry import TelemetrySink, open_telemetry
from client_push.runtime.interface import Runtime
from client_push.wire.link import NameServerLink
from client_push.wire.remoting import Deadline, RemotingConnection
from client_push.wire.timer import Timer
from protocol.frame import RemotingCommand

log = logging.getLogger("client_push.routes.client")

C = RemotingConnection


class UnknownActionError(RouteClientError):
    """The push session asked for an action this client has no handler for (a bug)."""


def client_identity(config: ClientConfig) -> dict[str, str]:
    """What every telemetry line names the client by (docs/telemetry.md)."""
    host = socket.gethostname()
    return {"client_id": config.client_id or f"{host}@{os.getpid()}", "host": host}


class RouteClientCore:
    """Holds topic routes for the producers and consumers of one process."""

    def __init__(
        self,
        config: ClientConfig,
        runtime: Runtime,
        rng: random.Random | None = None,
        telemetry: TelemetrySink | None = None,
        *,
        must_start: bool = False,
    ) -> None:
        """``must_start``: lookups before ``start`` are an error (asyncio) rather than waiting
        for it (Twisted)."""
        self.config = config
        self._runtime = runtime
        self._must_start = must_start
        self._rng = rng or random.Random()
        self.counters: Counter[str] = Counter()
        self._cache = RouteCache(
            config.topic_idle_expiry_ms, config.max_queue_nums, config.max_route_queues
        )
        self._negative = NegativeCache(config.negative_ttl_ms)
        identity = client_identity(config)
        self._telemetry = (
            telemetry
            if telemetry is not None
            else open_telemetry(config.telemetry_path, config.telemetry_memory_bytes, identity)
        )
        self._listeners = Listeners(self.counters)
        self._streams: set[RouteChanges] = set()
        self._link = link = NameServerLink(config, runtime, self._rng, self._handle_request, self)
        self._routes = HeldRoutes(self._cache, self._negative, self._telemetry, lambda: link.addr)
        self._build_push(identity["client_id"])
        self._spread_timer = Timer(runtime, self._run_spread)
        self._poll_timer = Timer(runtime, self._poll)
        self._expiry_timer = Timer(runtime, self._expiry_tick)
        self._version_check_timer = Timer(runtime, self._version_check_tick)
        self._timers = (
            self._spread_timer,
            self._poll_timer,
            self._expiry_timer,
            self._version_check_timer,
        )
        self._actions = self._action_handlers()
        """One handler per action type; each wire action is dropped without a connection."""
        self._started = False
        self._stopped = False

    def _build_push(self, client_id: str) -> None:
        """The push session and the two parts that carry its requests: route fetches and
        SUBSCRIBE/UNSUBSCRIBE."""
        config, runtime, link = self.config, self._runtime, self._link
        marks = itertools.count(1)
        self._session = PushSession(
            config,
            self._routes,
            clock=lambda: runtime.clock.time(),
            rng=self._rng,
            counters=self.counters,
            marks=marks,
        )
        self._fetches = RouteFetches(
            link,
            self._routes,
            self._session,
            self._listeners,
            runtime=runtime,
            counters=self.counters,
            marks=marks,
            run=lambda actions: self._run(actions, None),
        )
        self._subscriptions = PushRequests(
            config,
            link,
            self._session,
            self._run,
            runtime=runtime,
            counters=self.counters,
            client_id=client_id,
        )

    def _action_handlers(self) -> dict[type, Callable[[Any, C | None], None]]:
        return {
            Refetch: self._refetch,
            InstallRoute: lambda action, _conn: self._install(action),
            FollowUp: self._follow_up,
            Announce: lambda action, _conn: self._listeners.tell(action.event),
            WakeAt: self._wake_at,
            SetPushHealthy: self._push_health_changed,
            SendSubscribe: self._send_subscribe,
            SendUnsubscribe: self._send_unsubscribe,
            MoveTo: self._move_to,
            ServerUp: self._server_up,
        }

    @property
    def runtime(self) -> Runtime:
        """The event loop and clock the client runs on (a producer's default)."""
        return self._runtime

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Connect and start the poll, expiry and version-check timers; lookups made earlier
        (where the loop allows them) are fetched now."""
        if self._started:
            return
        self._started = True
        config = self.config
        self._link.start()
        self._poll_timer.arm(self._session.poll_interval_ms / 1000.0)
        self._expiry_timer.arm(config.expiry_check_interval_ms / 1000.0)
        # A random phase: clients started together must not check (and refetch) together.
        interval = config.version_check_interval_ms / 1000.0
        self._version_check_timer.arm(interval * self._rng.random())
        for topic in self._cache.held():
            if topic not in self._cache and topic not in self._routes.absent:
                self._fetches.fetch(topic, FIRST)

    async def _close(self) -> None:
        """Stop timers, fail waiting lookups with ``ClientStoppedError``, end every
        ``changes()`` stream and close connections, within ``close_timeout_ms``."""
        if self._stopped:
            return
        self._stopped = True
        deadline = Deadline(self._runtime, self.config.close_timeout_ms)
        for stream in list(self._streams):
            stream.close()
        self._subscriptions.stop()
        for timer in self._timers:
            timer.cancel()
        self._fetches.stop()
        try:
            await self._link.stop(deadline)
        finally:
            self._telemetry.close()

    # -- lookups -------------------------------------------------------------------------------

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
        except self._runtime.cancelled_error:
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

        stream = RouteChanges(self._runtime, close)
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
        if unknown and self._started:
            self._fetches.fetch(topic, FIRST)
        return remove

    def add_broker_listener(self, callback: BrokerListener) -> Callable[[], None]:
        """Call ``callback`` with every broker arrival or departure announced; returns a remover.

        Departures are reported after every held route has dropped the broker, so a producer
        reacting to one already sees routes without it.
        """
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
            "request_bytes": sum(conn.pending_bytes for conn in link.connections),
            "held_back_writes": sum(conn.held_back for conn in link.connections),
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

    def _run(self, actions: list[Action], conn: C | None) -> None:
        """Carry out ``actions`` in order; wire actions go to ``conn`` (dropped when None)."""
        for action in actions:
            carry_out = self._actions.get(type(action))
            if carry_out is None:
                self.counters["internal_errors"] += 1
                raise UnknownActionError(f"no handler for action {type(action).__name__}")
            carry_out(action, conn)

    def _refetch(self, action: Refetch, conn: C | None) -> None:
        self._fetches.fetch(
            action.topic,
            action.cause,
            notified_at_ms=action.notified_at_ms,
            wanted_version=action.wanted_version,
        )

    def _follow_up(self, action: FollowUp, conn: C | None) -> None:
        self._fetches.follow_up(
            action.topic, action.cause, action.notified_at_ms, action.wanted_version
        )

    def _wake_at(self, action: WakeAt, conn: C | None) -> None:
        if not self._stopped:
            delay = action.due_ms / 1000.0 - self._runtime.clock.time()
            self._spread_timer.arm(delay, earliest=True)

    def _push_health_changed(self, action: SetPushHealthy, conn: C | None) -> None:
        if self._started and not self._stopped:
            self._poll_timer.arm(self._session.poll_interval_ms / 1000.0)

    def _send_subscribe(self, action: SendSubscribe, conn: C | None) -> None:
        if conn is not None:
            self._subscriptions.subscribe(conn, action.topics, action.cause)

    def _send_unsubscribe(self, action: SendUnsubscribe, conn: C | None) -> None:
        if conn is not None:
            self._subscriptions.unsubscribe(conn, action.topics)

    def _move_to(self, action: MoveTo, conn: C | None) -> None:
        if conn is not None:
            self._link.go_away(conn, action.alternatives, still_serving=action.still_serving)

    def _server_up(self, action: ServerUp, conn: C | None) -> None:
        if conn is not None and self._link.server_up(conn, action.uptime_ms, action.warming_up):
            self.counters["moved_from_warming_server"] += 1

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

    def _guarded(self, call: Callable[[], None]) -> None:
        """Run a timer's job; an error is logged and counted, never stops the timer."""
        try:
            call()
        except Exception:
            self.counters["internal_errors"] += 1
            log.exception("error in a timer of the route client")

    def _check_started(self) -> None:
        if self._must_start and not self._started:
            raise RouteClientError("route client not started: use `async with RouteClient(...)`")

    def _now_ms(self) -> int:
        if self._must_start and not self._started:
            self._check_started()
        return int(self._runtime.clock.time() * 1000)

    # -- lookups and listeners -------------------------------------------------------------

    def _cached(self, topic: str) -> CachedRoute | None:
        """The held route of ``topic``, counted as a hit; None when it must be fetched (then
        ``_miss``). The hot path: no more calls than it needs."""
        if self._stopped or not topic:
            self._check_usable(topic)
        entry = self._cache.get(topic, self._now_ms())
        if entry is not None:
            self.counters["lookup_hits"] += 1
        return entry

    def _miss(self, topic: str) -> bool:
        """A lookup found no route: hold the topic; True when this lookup made it held.
        ``TopicNotExistError`` while an absence is believed."""
        now = self._now_ms()
        made_held = self._cache.touch(topic, now)
        if made_held:
            self._subscriptions.want(topic)
        self._negative.check(topic, now)
        self.counters["lookup_misses"] += 1
        return made_held

    def _listen(self, topic: str, callback: RouteListener) -> tuple[Callable[[], None], bool]:
        """Add a listener and replay the state held (cause ``cached``); (the remover, whether
        the topic's state is unknown and must be fetched)."""
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
        else:
            return remove, True
        return remove, False

    def _install(self, action: InstallRoute) -> None:
        """Hold a route sent inside a notification as a fetched one is held, with no request."""
        now = self._now_ms()
        try:
            _entry, changed = self._routes.learn_route(
                action.topic, action.route, action.version, INLINE, action.notified_at_ms, now, now
            )
        except RouteTooLargeError as exc:
            self.counters["routes_refused"] += 1
            log.warning("inline route of %s refused: %s", action.topic, exc)
            return
        self.counters["routes_inline"] += 1
        if changed is not None:
            self._listeners.tell(changed)

    def _check_usable(self, topic: str) -> None:
        if self._stopped:
            raise ClientStoppedError("route client stopped")
        if not topic:
            raise ValueError("topic must not be empty")

    # -- inspection ----------------------------------------------------------------------------

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
            stale_routes=self._routes.stale_count,
            untrusted_retries_pending=self._session.retries_pending,
            namesrv_warming=self._session.server_warming,
            subscribed=self._session.subscription_count,
            push_active=self._session.push_healthy,
            namesrv=self._link.addr,
            connects=self._link.connects,
            connect_failures=self._link.connect_failures,
        )
        out.update({f"wire.{k}": v for k, v in self._link.counters.items()})
        return out

    # -- the name server's requests and the link's events -------------------------------------

    def _handle_request(self, conn: C, cmd: RemotingCommand) -> RemotingCommand | None:
        handled = server_request(
            self._session,
            cmd,
            current=self._link.is_current(conn),
            server=conn.label,
            counters=self.counters,
        )
        if handled is None:
            return None
        actions, response = handled
        self._run(actions, conn)
        return response

    def on_connected(self, conn: C, addr: str) -> None:
        self._run(self._session.connected(), conn)

    def on_disconnected(self, addr: str) -> None:
        self._run(self._session.disconnected(), None)

    def on_switching(self, old: C, old_addr: str, *, going_away: bool) -> None:
        actions = self._session.switching(going_away=going_away, old_connected=bool(old.connected))
        self._run(actions, old)

    def _expire_idle(self) -> None:
        self._run(self._session.expire_idle(self._listeners.topics()), self._link.current)
