"""What both route clients (Twisted's and asyncio's) do the same way over the pure parts.

Pure: no Twisted, no asyncio. A glue subclass builds the parts (``_cache``, ``_negative``,
``_routes``, ``_listeners``, ``_session``, its ``_link`` and ``_subscriptions``) and supplies
``_run`` (carrying out the session's actions on its event loop) and ``_now_ms``; lookups,
listeners, inspection, the server's requests and the link's events are handled here once.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from client_push.config import ClientConfig
from client_push.errors import ClientStoppedError
from client_push.routes.events import CACHED, INLINE, Listeners, RouteListener
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.negative_cache import NegativeCache
from client_push.routes.push_actions import Action, InstallRoute
from client_push.routes.push_exchange import server_request
from client_push.routes.push_session import PushSession
from client_push.routes.route_cache import CachedRoute, RouteCache, RouteTooLargeError
from protocol.frame import RemotingCommand

log = logging.getLogger(__name__)


class Connection(Protocol):
    @property
    def label(self) -> str: ...

    @property
    def connected(self) -> int:
        """True (or 1) while the connection is up."""
        ...


C = TypeVar("C", bound=Connection)


class Link(Protocol[C]):
    @property
    def connects(self) -> int: ...

    @property
    def connect_failures(self) -> int: ...

    @property
    def addr(self) -> str: ...

    @property
    def current(self) -> C | None: ...

    def is_current(self, conn: C) -> bool: ...


class Subscriber(Protocol):
    def want(self, topic: str) -> None: ...


class RouteClientCore(Generic[C]):
    config: ClientConfig
    counters: Counter[str]
    _cache: RouteCache
    _negative: NegativeCache
    _routes: HeldRoutes
    _listeners: Listeners
    _session: PushSession
    _link: Link[C]
    _subscriptions: Subscriber
    _stopped: bool

    def _run(self, actions: list[Action], conn: C | None) -> None:
        raise NotImplementedError

    def _now_ms(self) -> int:
        raise NotImplementedError

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
            subscribed=self._session.subscription_count,
            push_active=self._session.push_healthy,
            namesrv=self._link.addr,
            connects=self._link.connects,
            connect_failures=self._link.connect_failures,
        )
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
