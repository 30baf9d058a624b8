"""``RouteChanges``: an async iterator of the route states learned for some topics.

Bounded by topics, not by changes: what waits to be read is at most one state per topic, the
newest; a state learned for a topic whose previous one has not been read yet replaces it in
its place in line (counted as ``coalesced``), so a slow reader skips intermediate versions and
never grows memory. The first states are the ones already held (cause ``cached``).

Ending the iteration (``break``, an error, the reading task cancelled), ``aclose()`` or leaving
``async with`` closes the stream: its listeners are removed, and a topic only it made held and
nobody looked up since is no longer held (it is unsubscribed at once).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from client_push.routes.closing import ClosedOnExit
from client_push.routes.events import RouteEvent
from client_push.runtime.interface import Future, Runtime, settle

RouteChange = RouteEvent
"""A route state learned: a route (``exists``) with its version, or the topic's absence."""


class RouteChanges(ClosedOnExit):
    def __init__(self, runtime: Runtime, on_close: Callable[[], None]) -> None:
        self._runtime = runtime
        self._on_close = on_close
        self._pending: dict[str, RouteChange] = {}
        self._wakeup: Future[None] | None = None
        self.closed = False
        self.coalesced = 0
        """States replaced unread by a newer one of their topic."""

    @property
    def waiting(self) -> int:
        """States learned and not read yet (at most one per topic)."""
        return len(self._pending)

    def offer(self, change: RouteChange) -> None:
        """A state learned for one of the topics (the client's listener)."""
        if self.closed:
            return
        if change.topic in self._pending:
            self.coalesced += 1
        self._pending[change.topic] = change
        if self._wakeup is not None:
            settle(self._wakeup, None)

    async def next(self) -> RouteChange:
        """The next state; ``StopAsyncIteration`` once closed."""
        while not self._pending:
            if self.closed:
                raise StopAsyncIteration
            self._wakeup = self._runtime.future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None
        topic = next(iter(self._pending))
        return self._pending.pop(topic)

    def __aiter__(self) -> AsyncIterator[RouteChange]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[RouteChange]:
        try:
            while True:
                try:
                    change = await self.next()
                except StopAsyncIteration:
                    return
                yield change
        finally:
            self.close()

    def close(self) -> None:
        """Stop listening; a reader waiting in ``next`` ends (what was waiting is dropped)."""
        if self.closed:
            return
        self.closed = True
        self._pending.clear()
        self._on_close()
        if self._wakeup is not None:
            settle(self._wakeup, None)

    async def aclose(self) -> None:
        self.close()
