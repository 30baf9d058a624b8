"""Route requests in flight: one GET_ROUTEINFO_BY_TOPIC per topic, shared by every caller.

Twisted glue. A fetch asked for while one of the same topic is in flight joins it (upstream
#4561) and remembers why, so a reason that arrives while the answer may already be on its way
fetches once more after it. Answers are taken through ``HeldRoutes`` and checked against the
push session's local changes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from client_push.errors import (
    ClientStoppedError,
    NameServerError,
    RouteClientError,
    TopicNotExistError,
)
from client_push.routes.events import UNCONDITIONAL, Listeners, log
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.push_session import PushSession
from client_push.routes.push_tracker import needs_refetch
from client_push.routes.route_cache import CachedRoute, RouteTooLargeError
from client_push.wire.connection import NameServerLink
from client_push.wire.remoting import describe
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand


class Fetch:
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
        if cause in UNCONDITIONAL:
            self.follow_up = (cause, notified_at_ms, None)
        elif wanted is not None:
            current = self.follow_up
            if current is None or (current[2] is not None and wanted > current[2]):
                self.follow_up = (cause, notified_at_ms, wanted)


def log_unexpected(failure: Failure, counters: Counter[str], what: str) -> None:
    """The errback of last resort: a bug in a callback is counted and logged, never lost."""
    counters["internal_errors"] += 1
    log.error("unexpected error %s: %s", what, failure.getTraceback())


class RouteFetches:
    """The fetches in flight (``inflight``: topic → ``Fetch``) and what their answers do."""

    def __init__(
        self,
        link: NameServerLink,
        routes: HeldRoutes,
        session: PushSession,
        listeners: Listeners,
        *,
        clock: Any,
        counters: Counter[str],
        marks: Iterator[int],
    ) -> None:
        self._link = link
        self._routes = routes
        self._cache = routes.cache
        self._session = session
        self._listeners = listeners
        self._clock = clock
        self._counters = counters
        self._marks = marks
        self.inflight: dict[str, Fetch] = {}
        self._stopped = False

    def fetch(
        self,
        topic: str,
        cause: str,
        *,
        notified_at_ms: int | None = None,
        wanted_version: int | None = None,
    ) -> Fetch:
        """Start a fetch of ``topic``, or join the one in flight (remembering why)."""
        running = self.inflight.get(topic)
        if running is not None:
            self._counters["fetch_joined"] += 1
            running.add_reason(cause, notified_at_ms, wanted_version)
            return running
        fetch = Fetch(topic, cause, notified_at_ms, self._now_ms(), next(self._marks))
        self.inflight[topic] = fetch
        self._counters[f"fetch.{cause}"] += 1
        cmd = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            {"topic": topic, "acceptStandardJsonOnly": "true"},
        )
        d = self._link.request(cmd)
        d.addCallbacks(
            self._fetched, self._fetch_failed, callbackArgs=(fetch,), errbackArgs=(fetch,)
        )
        d.addErrback(log_unexpected, self._counters, f"handling the route of {topic}")
        return fetch

    def follow_up(
        self, topic: str, cause: str, notified_at_ms: int | None, wanted_version: int
    ) -> None:
        """A change the fetch of ``topic`` in flight (if any) may be answered from before."""
        running = self.inflight.get(topic)
        if running is not None:
            running.add_reason(cause, notified_at_ms, wanted_version)

    @staticmethod
    def join(fetch: Fetch) -> defer.Deferred[CachedRoute]:
        """A Deferred of the fetch's route (or its error)."""
        if fetch.done:
            if isinstance(fetch.outcome, CachedRoute):
                return defer.succeed(fetch.outcome)
            return defer.fail(fetch.outcome or RouteClientError(f"fetch of {fetch.topic} failed"))
        waiter: defer.Deferred[CachedRoute] = defer.Deferred()
        fetch.waiters.append(waiter)
        return waiter

    def stop(self) -> None:
        """Fail every fetch in flight with ``ClientStoppedError``; start no follow-ups."""
        self._stopped = True
        for fetch in list(self.inflight.values()):
            self._finish(fetch, ClientStoppedError("route client stopped"))

    # -- answers -------------------------------------------------------------------------------

    def _fetched(self, response: RemotingCommand, fetch: Fetch) -> None:
        """Handle a route answer; whatever goes wrong here fails the fetch, never strands it."""
        try:
            self._handle_route(response, fetch)
        except Exception as exc:
            self._counters["internal_errors"] += 1
            log.error(
                "error handling the route of %s: %s: %s", fetch.topic, type(exc).__name__, exc
            )
            self._finish(
                fetch,
                RouteClientError(
                    f"route of {fetch.topic} could not be handled: {type(exc).__name__}: {exc}"
                ),
            )

    def _handle_route(self, response: RemotingCommand, fetch: Fetch) -> None:
        if fetch.done:
            return
        topic = fetch.topic
        now = self._now_ms()
        version = _route_version(response)
        if not self._session.answer_is_current(topic, fetch.started, version):
            # Sent before a departure was applied locally and answered from before it.
            held = self._cache.peek(topic)
            self._finish(fetch, held or RouteClientError(f"{topic} changed while fetched"))
            return
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            event = self._routes.learn_absent(
                topic, version, fetch.cause, fetch.notified_at_ms, fetch.requested_at_ms, now
            )
            if event is not None:
                self._listeners.tell(event)
            retry_at = self._routes.negative.retry_at(topic)
            self._finish(fetch, TopicNotExistError(topic, retry_at, now_ms=now))
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
            self._counters["fetch_discarded_expired"] += 1
            self._finish(fetch, RouteClientError(f"topic {topic} expired while fetched"))
            return
        try:
            entry, changed = self._routes.learn_route(
                topic, route, version, fetch.cause, fetch.notified_at_ms, fetch.requested_at_ms, now
            )
        except RouteTooLargeError as exc:
            self._counters["routes_refused"] += 1
            self._finish(fetch, RouteClientError(f"route of {topic} refused: {exc}"))
            return
        if changed is not None:
            self._listeners.tell(changed)
        self._finish(fetch, entry)

    def _fetch_failed(self, failure: Failure, fetch: Fetch) -> None:
        self._counters["fetch_failed"] += 1
        error = (
            failure.value
            if isinstance(failure.value, Exception)
            else RouteClientError(describe(failure))
        )
        self._finish(fetch, error)

    def _finish(self, fetch: Fetch, outcome: CachedRoute | Exception) -> None:
        if fetch.done:
            return
        fetch.done = True
        fetch.outcome = outcome
        if self.inflight.get(fetch.topic) is fetch:
            del self.inflight[fetch.topic]
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
            self._counters["fetch_follow_up"] += 1
            self.fetch(fetch.topic, cause, notified_at_ms=notified_at)

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)


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
