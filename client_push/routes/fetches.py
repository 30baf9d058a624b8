"""Route requests in flight: the requests ``FetchTable`` asks for, each a task over the
``NameServerLink``, and the futures of the callers joined to them.

Written once over the runtime. What a fetch is, who joins it and what its answer does is the
pure ``fetch_table``'s. A caller that gives up (its task cancelled) takes its future off the
fetch; a fetch nobody waits for whose topic is no longer held is dropped with its request.
A fetch whose answer could not be trusted hands the session's retry actions to the owner's
``run``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from client_push.errors import ClientStoppedError, RouteClientError
from client_push.routes.events import Listeners
from client_push.routes.fetch_table import Fetch, FetchTable, route_request
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.push_actions import Action
from client_push.routes.push_session import PushSession
from client_push.routes.refetch_schedule import RefetchSchedule
from client_push.routes.route_cache import CachedRoute
from client_push.runtime.interface import Future, Runtime, Task, fail, settle
from client_push.wire.link import NameServerLink

Waiter = Future[CachedRoute]
ActionRunner = Callable[[list[Action]], None]
"""Carries out session actions that need no connection (a retry's timer)."""


class RouteFetches:
    def __init__(
        self,
        link: NameServerLink,
        routes: HeldRoutes,
        session: PushSession,
        schedule: RefetchSchedule,
        listeners: Listeners,
        *,
        runtime: Runtime,
        counters: Counter[str],
        marks: Iterator[int],
        run: ActionRunner,
        warming: Callable[[], bool],
    ) -> None:
        self._link = link
        self._session = session
        self._run = run
        self._runtime = runtime
        self._table: FetchTable[Waiter] = FetchTable(
            routes, session, schedule, listeners, counters=counters, marks=marks, warming=warming
        )
        self.inflight = self._table.inflight
        """topic → fetch in flight (for inspection)."""
        self.requests: dict[Fetch[Waiter], Task] = {}
        """The request task of each fetch in flight."""

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
            task = self._runtime.spawn(self._request(fetch))
            if not fetch.done:  # the request may be answered within ``spawn`` already
                self.requests[fetch] = task
        return fetch

    def follow_up(
        self, topic: str, cause: str, notified_at_ms: int | None, wanted_version: int
    ) -> None:
        self._table.follow_up(topic, cause, notified_at_ms, wanted_version)

    def await_version(self, topic: str, version: int) -> None:
        self._table.await_version(topic, version)

    def forget_awaited(self, topics: Iterable[str] | None = None) -> None:
        self._table.forget_awaited(topics)

    async def wait(self, fetch: Fetch[Waiter]) -> CachedRoute:
        """The fetch's route (or its error); a cancelled caller leaves no future behind."""
        if fetch.done:
            if isinstance(fetch.outcome, CachedRoute):
                return fetch.outcome
            raise fetch.outcome or RouteClientError(f"fetch of {fetch.topic} failed")
        waiter: Waiter = self._runtime.future()
        fetch.waiters.append(waiter)
        try:
            return await waiter
        finally:
            if waiter in fetch.waiters:
                fetch.waiters.remove(waiter)

    def drop_if_unwanted(self, fetch: Fetch[Waiter]) -> None:
        """Cancel the request of a fetch nobody waits for and whose topic is not held."""
        if self._table.abandon(fetch):
            task = self.requests.pop(fetch, None)
            if task is not None:
                task.cancel()

    def stop(self) -> None:
        """Fail every fetch in flight with ``ClientStoppedError``; cancel their requests."""
        for fetch in self._table.stop():
            self._settle(fetch, ClientStoppedError("route client stopped"))
        tasks = list(self.requests.values())
        self.requests.clear()
        for task in tasks:
            task.cancel()

    async def _request(self, fetch: Fetch[Waiter]) -> None:
        try:
            response = await self._link.request(route_request(fetch.topic))
        except self._runtime.cancelled_error:
            self.requests.pop(fetch, None)
            raise
        except Exception as exc:
            outcome: CachedRoute | Exception = self._table.failed(exc, fetch, self._now_ms())
        else:
            outcome = self._table.answered(fetch, response, self._now_ms())
        self.requests.pop(fetch, None)
        self._settle(fetch, outcome)
        if fetch.untrusted and not self._table.stopped:
            self._run(self._session.untrusted(fetch.topic))

    def _settle(self, fetch: Fetch[Waiter], outcome: CachedRoute | Exception) -> None:
        waiters, again = self._table.finish(fetch, outcome)
        for waiter in waiters:
            if isinstance(outcome, Exception):
                fail(waiter, outcome)
            else:
                settle(waiter, outcome)
        if again is not None:
            self.fetch(again.topic, again.cause, notified_at_ms=again.notified_at_ms)

    def _now_ms(self) -> int:
        return int(self._runtime.clock.time() * 1000)
