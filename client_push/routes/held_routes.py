"""The routes a client holds and the absences it knows, with the rules for learning either.

Pure: callers pass the time. A route answer, a DELETED notification and a departure that
empties a route all end here, so a topic's state, its telemetry record and the event its
listeners get are decided in one place, whichever way the news came.

The rule of absence: a held route is never replaced by an empty one. News that would leave a
held topic with no broker (an absence not known to be a deletion, an error, a departure of its
last broker) keeps the last route, marked stale (``keep_stale``): a name server that just
started or lost its brokers cannot know the topic is gone, and the brokers may well still
serve it. Only a deletion drops it (``learn_absent`` with ``deleted``). Absences are remembered
(the negative cache) only for topics the client holds no route for.
"""

from __future__ import annotations

from collections.abc import Callable

from client_push.routes.events import BROKER_GONE, RouteEvent
from client_push.routes.negative_cache import NegativeCache
from client_push.routes.push_actions import (
    AdoptRoute,
    ClearAbsence,
    DropRoute,
    HeldRouteAction,
    KeepStale,
)
from client_push.routes.route_cache import CachedRoute, RouteCache, is_empty
from client_push.routes.telemetry import RefetchRecord, TelemetrySink
from protocol.route_model import TopicRouteData


class HeldRoutes:
    """The route cache, the negative cache and the held topics known absent, kept in step."""

    def __init__(
        self,
        cache: RouteCache,
        negative: NegativeCache,
        telemetry: TelemetrySink,
        namesrv: Callable[[], str],
    ) -> None:
        self.cache = cache
        self.negative = negative
        self.absent: set[str] = set()
        """Held topics whose last known state is "does not exist"."""
        self._telemetry = telemetry
        self._namesrv = namesrv

    @property
    def namesrv(self) -> str:
        """The name server the held state comes from (events and records name it)."""
        return self._namesrv()

    def event(
        self,
        topic: str,
        exists: bool,
        version: int,
        route: CachedRoute | None,
        cause: str,
        now: int,
    ) -> RouteEvent:
        stale = route is not None and route.stale
        return RouteEvent(topic, exists, version, route, cause, now, self._namesrv(), stale)

    @property
    def stale_count(self) -> int:
        return self.cache.stale_count()

    def learn_route(
        self,
        topic: str,
        route: TopicRouteData,
        version: int,
        cause: str,
        notified_at_ms: int | None,
        requested_at_ms: int,
        now: int,
    ) -> tuple[CachedRoute, RouteEvent | None]:
        """A route the name server answered: hold it, record it; the event when it changed.

        An empty route (no queue data, no broker address) never replaces a held one: that one
        is kept, stale. ``RouteTooLargeError`` (nothing changed) when its queue counts are over
        the bounds.
        """
        held = self.cache.peek(topic)
        if held is not None and is_empty(route):
            return held, self.keep_stale(topic, cause, now)
        update = self.cache.put(topic, route, version, now)
        self.negative.clear(topic)
        self.absent.discard(topic)
        self._telemetry.record(
            RefetchRecord(
                topic, version, True, cause, notified_at_ms, requested_at_ms, now, self._namesrv()
            )
        )
        if not update.changed:
            return update.entry, None
        return update.entry, self.event(topic, True, version, update.entry, cause, now)

    def keep_stale(self, topic: str, cause: str, now: int) -> RouteEvent | None:
        """News that would leave held ``topic`` with no broker: keep its route, marked stale.

        The event when the route was not stale already (nothing is recorded: no route was
        learned). Nothing happens to a topic held without a route.
        """
        if not self.cache.mark_stale(topic):
            return None
        entry = self.cache.peek(topic)
        assert entry is not None
        return self.event(topic, True, entry.version, entry, cause, now)

    def learn_absent(
        self,
        topic: str,
        version: int,
        cause: str,
        notified_at_ms: int | None,
        requested_at_ms: int,
        now: int,
        *,
        deleted: bool = False,
        remember: bool = True,
    ) -> RouteEvent | None:
        """The topic has no route: drop it when ``deleted`` (DELETED, an ack's ``deleted``,
        ``topicDeleted=true``); otherwise a held route is kept, stale (``keep_stale``). A
        topic left without a route is remembered absent for the negative TTL unless
        ``remember`` is False (the answer came from a name server warming up).

        The event when the topic is held and its state changed.
        """
        if not self.cache.is_held(topic):
            return None
        if not deleted and self.cache.peek(topic) is not None:
            return self.keep_stale(topic, cause, now)
        if remember:
            self.negative.put(topic, now)
        self.cache.drop(topic)
        newly_absent = topic not in self.absent
        self.absent.add(topic)
        self._telemetry.record(
            RefetchRecord(
                topic, version, False, cause, notified_at_ms, requested_at_ms, now, self._namesrv()
            )
        )
        if not newly_absent:
            return None
        return self.event(topic, False, version, None, cause, now)

    def adopt(self, topic: str, route: TopicRouteData, version: int, now: int) -> RouteEvent | None:
        """A route changed here by a departure, without a request; the event when it changed.

        Nothing is recorded (no answer arrived) and the fetch time stays that of the last
        answer, so the confirming refetch is what telemetry sees.
        """
        previous = self.cache.peek(topic)
        stale = previous is not None and previous.stale
        update = self.cache.put(topic, route, version, now, stale=stale)
        if previous is not None:
            update.entry.fetched_at_ms = previous.fetched_at_ms
        if not update.changed:
            return None
        return self.event(topic, True, version, update.entry, BROKER_GONE, now)

    def apply(self, action: HeldRouteAction, now: int) -> RouteEvent | None:
        """Carry out what the push session decided about the held routes; the event for the
        listeners when a topic's state changed."""
        if isinstance(action, AdoptRoute):
            return self.adopt(action.topic, action.route, action.version, now)
        if isinstance(action, KeepStale):
            return self.keep_stale(action.topic, action.cause, now)
        if isinstance(action, DropRoute):
            a = action
            return self.learn_absent(
                a.topic, a.version, a.cause, a.notified_at_ms, now, now, deleted=True
            )
        if isinstance(action, ClearAbsence):
            self.negative.clear(action.topic)
        else:
            self.cache.forget_versions()
        return None

    def expire(self, now: int, keep: set[str]) -> list[str]:
        """Stop holding topics idle past the expiry (``keep`` never expires); the gone ones."""
        gone = self.cache.expire(now, keep=keep)
        for topic in gone:
            self.negative.clear(topic)
            self.absent.discard(topic)
        return gone

    def release(self, topic: str) -> None:
        """Stop holding ``topic`` at once, whatever its last access."""
        self.cache.forget(topic)
        self.negative.clear(topic)
        self.absent.discard(topic)
