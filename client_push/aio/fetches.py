"""Route requests in flight, on asyncio: the requests ``FetchTable`` asks for, each a task
over the ``NameServerLink``, and the Futures of the callers joined to them.

What a fetch is, who joins it and what its answer does is the pure ``fetch_table``'s. A caller
that gives up (its task cancelled) takes its Future off the fetch; a fetch nobody waits for
whose topic is no longer held is dropped with its request.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from client_push.aio.clock import Clock
from client_push.aio.link import NameServerLink
from client_push.errors import ClientStoppedError, RouteClientError
from client_push.routes.events import Listeners
from client_push.routes.fetch_table import Fetch, FetchTable, route_request
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.push_session import PushSession
from client_push.routes.route_cache import CachedRoute

Waiter = asyncio.Future[CachedRoute]
Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


class RouteFetches:
    def __init__(
        self,
        link: NameServerLink,
        routes: HeldRoutes,
        session: PushSession,
        listeners: Listeners,
        *,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        counters: Counter[str],
        marks: Iterator[int],
    ) -> None:
        self._link = link
        self._loop = loop
        self._clock = clock
        self._table: FetchTable[Waiter] = FetchTable(
            routes, session, listeners, counters=counters, marks=marks
        )
        self.inflight = self._table.inflight
        """topic → fetch in flight (for inspection)."""
        self.requests: dict[Fetch[Waiter], asyncio.Task[None]] = {}
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
            task = self._loop.create_task(self._request(fetch))
            self.requests[fetch] = task
            task.add_done_callback(lambda _: self.requests.pop(fetch, None))
        return fetch

    def follow_up(
        self, topic: str, cause: str, notified_at_ms: int | None, wanted_version: int
    ) -> None:
        self._table.follow_up(topic, cause, notified_at_ms, wanted_version)

    async def wait(self, fetch: Fetch[Waiter]) -> CachedRoute:
        """The fetch's route (or its error); a cancelled caller leaves no Future behind."""
        if fetch.done:
            if isinstance(fetch.outcome, CachedRoute):
                return fetch.outcome
            raise fetch.outcome or RouteClientError(f"fetch of {fetch.topic} failed")
        waiter: Waiter = self._loop.create_future()
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
        for task in list(self.requests.values()):
            task.cancel()

    async def _request(self, fetch: Fetch[Waiter]) -> None:
        try:
            response = await self._link.request(route_request(fetch.topic))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            outcome: CachedRoute | Exception = self._table.failed(exc)
        else:
            outcome = self._table.answered(fetch, response, self._now_ms())
        self._settle(fetch, outcome)

    def _settle(self, fetch: Fetch[Waiter], outcome: CachedRoute | Exception) -> None:
        waiters, again = self._table.finish(fetch, outcome)
        for waiter in waiters:
            if waiter.done():
                continue
            if isinstance(outcome, Exception):
                waiter.set_exception(outcome)
            else:
                waiter.set_result(outcome)
        if again is not None:
            self.fetch(again.topic, again.cause, notified_at_ms=again.notified_at_ms)

    def _now_ms(self) -> int:
        return int(self._clock.time() * 1000)
