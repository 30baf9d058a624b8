"""Route requests in flight, on Twisted: the requests ``FetchTable`` asks for, sent over the
``NameServerLink``, and the Deferreds of the callers joined to them.

What a fetch is, who joins it and what its answer does is the pure ``fetch_table``'s; this
module only sends and settles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from client_push.errors import ClientStoppedError, RouteClientError
from client_push.routes.events import Listeners, log
from client_push.routes.fetch_table import Fetch, FetchTable, route_request
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.push_session import PushSession
from client_push.routes.route_cache import CachedRoute
from client_push.wire.connection import NameServerLink
from client_push.wire.remoting import describe
from protocol.frame import RemotingCommand

Waiter = defer.Deferred[CachedRoute]


def log_unexpected(failure: Failure, counters: Counter[str], what: str) -> None:
    """The errback of last resort: a bug in a callback is counted and logged, never lost."""
    counters["internal_errors"] += 1
    log.error("unexpected error %s: %s", what, failure.getTraceback())


class RouteFetches:
    """The fetches in flight (``inflight``: topic → ``Fetch``) carried over the link."""

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
        self._clock = clock
        self._counters = counters
        self._table: FetchTable[Waiter] = FetchTable(
            routes, session, listeners, counters=counters, marks=marks
        )
        self.inflight = self._table.inflight

    def fetch(
        self,
        topic: str,
        cause: str,
        *,
        notified_at_ms: int | None = None,
        wanted_version: int | None = None,
    ) -> Fetch[Waiter]:
        """Start a fetch of ``topic``, or join the one in flight (remembering why)."""
        fetch, new = self._table.begin(
            topic,
            cause,
            self._now_ms(),
            notified_at_ms=notified_at_ms,
            wanted_version=wanted_version,
        )
        if new:
            d = self._link.request(route_request(topic))
            d.addCallbacks(
                self._fetched, self._fetch_failed, callbackArgs=(fetch,), errbackArgs=(fetch,)
            )
            d.addErrback(log_unexpected, self._counters, f"handling the route of {topic}")
        return fetch

    def follow_up(
        self, topic: str, cause: str, notified_at_ms: int | None, wanted_version: int
    ) -> None:
        """A change the fetch of ``topic`` in flight (if any) may be answered from before."""
        self._table.follow_up(topic, cause, notified_at_ms, wanted_version)

    @staticmethod
    def join(fetch: Fetch[Waiter]) -> Waiter:
        """A Deferred of the fetch's route (or its error)."""
        if fetch.done:
            if isinstance(fetch.outcome, CachedRoute):
                return defer.succeed(fetch.outcome)
            return defer.fail(fetch.outcome or RouteClientError(f"fetch of {fetch.topic} failed"))
        waiter: Waiter = defer.Deferred()
        fetch.waiters.append(waiter)
        return waiter

    def stop(self) -> None:
        """Fail every fetch in flight with ``ClientStoppedError``; start no follow-ups."""
        for fetch in self._table.stop():
            self._settle(fetch, ClientStoppedError("route client stopped"))

    # -- answers -------------------------------------------------------------------------------

    def _fetched(self, response: RemotingCommand, fetch: Fetch[Waiter]) -> None:
        self._settle(fetch, self._table.answered(fetch, response, self._now_ms()))

    def _fetch_failed(self, failure: Failure, fetch: Fetch[Waiter]) -> None:
        error = (
            failure.value
            if isinstance(failure.value, Exception)
            else RouteClientError(describe(failure))
        )
        self._settle(fetch, self._table.failed(error))

    def _settle(self, fetch: Fetch[Waiter], outcome: CachedRoute | Exception) -> None:
        waiters, again = self._table.finish(fetch, outcome)
        for waiter in waiters:
            if isinstance(outcome, Exception):
                waiter.errback(outcome)
            else:
                waiter.callback(outcome)
        if again is not None:
            self.fetch(again.topic, again.cause, notified_at_ms=again.notified_at_ms)

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)
