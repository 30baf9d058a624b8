"""The push session's glue, written once over the runtime: what the name server sends goes in,
the actions that come out are carried out.

A request of the name server is read at the edge (``server_request``: one protocol call, inline
routes decoded there) and handed to ``PushSession`` as a typed value; link events and subscribe
answers go to ``Subscriptions``. Both return actions, and this class carries them out in
order, one handler per action type (an action without one is an error, not a silent skip):
held routes changed through ``HeldRoutes`` with their listeners told, fetches started, SUBSCRIBE
sent, the link moved, and the spread, poll, version-check and expiry timers run on the
runtime's clock.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from client_push.config import ClientConfig
from client_push.errors import RouteClientError
from client_push.routes.events import INLINE, Listeners, RouteEvent, log
from client_push.routes.fetches import RouteFetches
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.negative_cache import NegativeCache
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
    HeldRouteAction,
    InstallRoute,
    KeepStale,
    MoveTo,
    Refetch,
    ScheduleAction,
    SendSubscribe,
    SendUnsubscribe,
    ServerUp,
    SetPushHealthy,
    SpreadRefetch,
)
from client_push.routes.push_requests import PushRequests
from client_push.routes.push_session import PushSession
from client_push.routes.refetch_schedule import RefetchSchedule
from client_push.routes.route_cache import RouteCache, RouteTooLargeError
from client_push.routes.subscriptions import Subscriptions
from client_push.routes.telemetry import TelemetrySink
from client_push.runtime.interface import Runtime
from client_push.wire.link import NameServerLink
from client_push.wire.remoting import Deadline, RemotingConnection
from client_push.wire.timer import Timer
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand
from protocol.push_codec import read_server_request

C = RemotingConnection


class UnknownActionError(RouteClientError):
    """The push session asked for an action this client has no handler for (a bug)."""


class PushRunner:
    """The link to the name server, the push session and what carries its actions out."""

    def __init__(
        self,
        config: ClientConfig,
        runtime: Runtime,
        rng: random.Random,
        telemetry: TelemetrySink,
        listeners: Listeners,
        *,
        counters: Counter[str],
        client_id: str,
    ) -> None:
        self._config = config
        self._runtime = runtime
        self._rng = rng
        self._listeners = listeners
        self.counters = counters
        self.link = link = NameServerLink(config, runtime, rng, self)
        cache = RouteCache(
            config.topic_idle_expiry_ms, config.max_queue_nums, config.max_route_queues
        )
        negative = NegativeCache(config.negative_ttl_ms)
        self.routes = HeldRoutes(cache, negative, telemetry, lambda: link.addr)
        self.schedule = RefetchSchedule(
            config.untrusted_retry_initial_ms, config.untrusted_retry_max_ms, rng
        )
        marks = itertools.count(1)

        def clock() -> float:  # read when called: an asyncio loop runs only once started
            return runtime.clock.time()

        self.session = PushSession(
            config,
            cache,
            clock=clock,
            counters=counters,
            namesrv=lambda: link.addr,
        )
        self.subscriptions = Subscriptions(
            config, self.session, cache, negative, self.schedule, clock=clock, counters=counters
        )
        self.fetches, self.requests = self._wire_requests(marks, client_id)
        self._spread_timer = Timer(runtime, self._run_spread)
        self._poll_timer = Timer(runtime, self._poll)
        self._expiry_timer = Timer(runtime, self._expiry_tick)
        self._version_check_timer = Timer(runtime, self._version_check_tick)
        self.timers = (
            self._spread_timer,
            self._poll_timer,
            self._expiry_timer,
            self._version_check_timer,
        )
        """The spread, poll, expiry and version-check timers."""
        self._handlers = self._action_handlers()
        """One handler per action type; each wire action is dropped without a connection."""
        self.started = False
        self.stopped = False

    def _wire_requests(
        self, marks: Iterator[int], client_id: str
    ) -> tuple[RouteFetches, PushRequests]:
        """What sends the session's requests: route fetches and SUBSCRIBE/UNSUBSCRIBE."""
        link, runtime, counters = self.link, self._runtime, self.counters
        fetches = RouteFetches(
            link,
            self.routes,
            self.session,
            self.schedule,
            self._listeners,
            runtime=runtime,
            counters=counters,
            marks=marks,
            run=lambda actions: self.run(actions, None),
            warming=lambda: self.subscriptions.server_warming,
        )
        requests = PushRequests(
            self._config,
            link,
            self.subscriptions,
            self.run,
            runtime=runtime,
            counters=counters,
            client_id=client_id,
            paced=self.session.paced,
        )
        return fetches, requests

    def _action_handlers(self) -> dict[type, Callable[[Any, C | None], None]]:
        return {
            Refetch: self._refetch,
            InstallRoute: lambda action, _conn: self._install(action),
            AdoptRoute: self._held_changed,
            KeepStale: self._held_changed,
            DropRoute: self._held_changed,
            ClearAbsence: self._held_changed,
            ForgetVersions: self._held_changed,
            AwaitVersion: lambda a, _conn: self.fetches.await_version(a.topic, a.version),
            FollowUp: self._follow_up,
            Announce: lambda action, _conn: self._listeners.tell(action.event),
            SpreadRefetch: self._scheduled,
            BackOff: self._scheduled,
            SetPushHealthy: self._push_health_changed,
            SendSubscribe: self._send_subscribe,
            SendUnsubscribe: self._send_unsubscribe,
            MoveTo: self._move_to,
            ServerUp: self._server_up,
        }

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Connect and start the poll, expiry and version-check timers."""
        self.started = True
        config = self._config
        self.link.start()
        self._poll_timer.arm(self.subscriptions.poll_interval_ms / 1000.0)
        self._expiry_timer.arm(config.expiry_check_interval_ms / 1000.0)
        # A random phase: clients started together must not check (and refetch) together.
        interval = config.version_check_interval_ms / 1000.0
        self._version_check_timer.arm(interval * self._rng.random())

    async def stop(self, deadline: Deadline) -> None:
        """Stop timers and requests, fail the fetches in flight, close the connections."""
        self.stopped = True
        self.requests.stop()
        for timer in self.timers:
            timer.cancel()
        self.fetches.stop()
        await self.link.stop(deadline)

    # -- what comes in -------------------------------------------------------------------------

    def server_request(self, conn: C, cmd: RemotingCommand) -> bool:
        """A request the name server sent: read once, here, into typed values and handed to
        the session; False for a code the client does not serve. A notification from a
        connection being left changes nothing (and is not read)."""
        if cmd.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED and not self.link.is_current(
            conn
        ):
            self.counters["notify_from_old_connection"] += 1
            return True
        request = read_server_request(
            cmd.code, cmd.body, max_route_bytes=self._config.max_route_body_bytes
        )
        if request is None:
            return False
        actions = self.session.on_server_request(request, conn.label)
        self.run(actions, conn)
        return True

    def on_connected(self, conn: C, addr: str) -> None:
        self.fetches.forget_awaited()  # changes made here belong to the connection left
        self.run(self.subscriptions.connected(), conn)

    def on_disconnected(self, addr: str) -> None:
        self.run(self.subscriptions.disconnected(), None)

    def on_switching(self, old: C, old_addr: str, *, going_away: bool) -> None:
        actions = self.subscriptions.switching(
            going_away=going_away, old_connected=bool(old.connected)
        )
        self.run(actions, old)

    def release(self, topics: Sequence[str]) -> None:
        """Stop holding ``topics`` now (the lookup that made them held was given up) and
        unsubscribe the subscribed ones."""
        gone = [t for t in topics if self.routes.cache.is_held(t)]
        for topic in gone:
            self.routes.release(topic)
        self.counters["topics_released"] += len(gone)
        self._dropped(gone)

    def expire_idle(self) -> None:
        """Stop holding topics idle past the expiry and unsubscribe them; a topic
        with listeners never expires."""
        gone = self.routes.expire(self._now_ms(), self._listeners.topics())
        if not gone:
            return
        self.counters["topics_expired"] += len(gone)
        log.info("%d idle topics expired: %s", len(gone), ", ".join(sorted(gone)[:20]))
        self._dropped(gone)

    def _dropped(self, gone: list[str]) -> None:
        for topic in gone:
            self.schedule.discard(topic)
        self.fetches.forget_awaited(gone)
        self.run(self.subscriptions.dropped(gone), self.link.current)

    # -- the actions ---------------------------------------------------------------------------

    def run(self, actions: list[Action], conn: C | None) -> None:
        """Carry out ``actions`` in order; wire actions go to ``conn`` (dropped when None)."""
        for action in actions:
            carry_out = self._handlers.get(type(action))
            if carry_out is None:
                self.counters["internal_errors"] += 1
                raise UnknownActionError(f"no handler for action {type(action).__name__}")
            carry_out(action, conn)

    def _held_changed(self, action: HeldRouteAction, conn: C | None) -> None:
        event = self.routes.apply(action, self._now_ms())
        if isinstance(action, KeepStale) and event is not None:
            self.counters["routes_kept_stale"] += 1
        elif isinstance(action, DropRoute):
            self.schedule.discard(action.topic)
        elif isinstance(action, ForgetVersions):
            self.fetches.forget_awaited()
        self._tell(event)

    def _tell(self, event: RouteEvent | None) -> None:
        if event is not None:
            self._listeners.tell(event)

    def _install(self, action: InstallRoute) -> None:
        """Hold a route sent inside a notification as a fetched one is held, with no request."""
        now = self._now_ms()
        try:
            _entry, changed = self.routes.learn_route(
                action.topic, action.route, action.version, INLINE, action.notified_at_ms, now, now
            )
        except RouteTooLargeError as exc:
            self.counters["routes_refused"] += 1
            log.warning("inline route of %s refused: %s", action.topic, exc)
            return
        self.counters["routes_inline"] += 1
        self._tell(changed)

    def _refetch(self, action: Refetch, conn: C | None) -> None:
        self.fetches.fetch(
            action.topic,
            action.cause,
            notified_at_ms=action.notified_at_ms,
            wanted_version=action.wanted_version,
        )

    def _follow_up(self, action: FollowUp, conn: C | None) -> None:
        self.fetches.follow_up(
            action.topic, action.cause, action.notified_at_ms, action.wanted_version
        )

    def _scheduled(self, action: ScheduleAction, conn: C | None) -> None:
        now_ms = self._runtime.clock.time() * 1000.0
        cause, queued = self.schedule.apply(action, now_ms)
        self.counters[f"spread_queued.{cause}"] += queued
        if isinstance(action, BackOff):
            self.counters["untrusted_answers"] += 1
        self._wake_for_schedule()

    def _wake_for_schedule(self) -> None:
        """Arm the spread timer for the schedule's next refetch (or earlier)."""
        due = self.schedule.next_due_ms()
        if due is not None and not self.stopped:
            delay = due / 1000.0 - self._runtime.clock.time()
            self._spread_timer.arm(delay, earliest=True)

    def _push_health_changed(self, action: SetPushHealthy, conn: C | None) -> None:
        if self.started and not self.stopped:
            self._poll_timer.arm(self.subscriptions.poll_interval_ms / 1000.0)

    def _send_subscribe(self, action: SendSubscribe, conn: C | None) -> None:
        if conn is not None:
            self.requests.subscribe(conn, action.topics, action.cause)

    def _send_unsubscribe(self, action: SendUnsubscribe, conn: C | None) -> None:
        if conn is not None:
            self.requests.unsubscribe(conn, action.topics)

    def _move_to(self, action: MoveTo, conn: C | None) -> None:
        if conn is not None:
            self.link.go_away(conn, action.alternatives, still_serving=action.still_serving)

    def _server_up(self, action: ServerUp, conn: C | None) -> None:
        if conn is not None and self.link.server_up(conn, action.uptime_ms, action.warming_up):
            self.counters["moved_from_warming_server"] += 1

    # -- timers --------------------------------------------------------------------------------

    def _run_spread(self) -> None:
        def run_due() -> None:
            now_ms = self._runtime.clock.time() * 1000.0
            due, skipped = self.schedule.due(now_ms, self.routes.cache)
            self.counters["spread_already_held"] += skipped
            self.run(list(due), self.link.current)
            self._wake_for_schedule()

        self._guarded(run_due)

    def _version_check_tick(self) -> None:
        conn = self.link.current
        if conn is not None:
            self._guarded(lambda: self.run(self.subscriptions.version_check(), conn))
        if not self.stopped:
            self._version_check_timer.arm(self._config.version_check_interval_ms / 1000.0)

    def _poll(self) -> None:
        self._guarded(self._poll_once)
        if not self.stopped:
            self._poll_timer.arm(self.subscriptions.poll_interval_ms / 1000.0)

    def _poll_once(self) -> None:
        self.expire_idle()
        conn = self.link.current
        if conn is not None:  # otherwise the next connection refetches what changed
            self.run(self.subscriptions.poll(), conn)

    def _expiry_tick(self) -> None:
        self._guarded(self.expire_idle)
        if not self.stopped:
            self._expiry_timer.arm(self._config.expiry_check_interval_ms / 1000.0)

    def _guarded(self, call: Callable[[], None]) -> None:
        """Run a timer's job; an error is logged and counted, never stops the timer."""
        try:
            call()
        except Exception:
            self.counters["internal_errors"] += 1
            log.exception("error in a timer of the route client")

    def _now_ms(self) -> int:
        return int(self._runtime.clock.time() * 1000)
