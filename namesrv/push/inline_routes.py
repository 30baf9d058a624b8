"""Which changed topics a connection that asked for inline routes gets with their route.

A connection asks with ``SubscribeTopicRoute.inline_routes`` (docs/protocol-extension.md,
"Inline routes"). For each change it is owed, the route goes inside the notification when
all of these hold, and the change goes as a plain entry (the client fetches it) otherwise:

- the topic exists and its settled version is exactly the notified one, with no mark since:
  the registry's route, and so the cached body, is then the route of that version and no other;
- its GET_ROUTEINFO body (``RouteBodies``, the very bytes a lookup is answered with, encoded
  once per change whoever asks) is at most ``push.inline_route_max_bytes``;
- the connection's inline bytes in this tick stay within ``push.inline_budget_bytes_per_tick``
  (a tick sliced over several reactor turns may send a connection a frame in each: the budget
  is the tick's, over all of them).

The choice depends only on the change set, the body form the connection asked for and what is
left of its budget, so it is made once per distinct (change set, form, budget left) per slice
and shared like the frames themselves. Looking at bodies stops once the budget's worth of
route bytes has been looked at, so a huge change set costs a bounded amount of encoding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple

from namesrv.config import PushConfig
from namesrv.push.subscriber import Subscriber
from namesrv.push.subscriptions import SubscriptionRegistry
from protocol.push_events import ChangeKind

BodyOf = Callable[[str, bool, bool], bytes | None]
"""(topic, standard JSON, 4.9.x shape) → the GET_ROUTEINFO body now, None without a route."""
SettledVersion = Callable[[str], int | None]
"""topic → its version when it exists and no change is marked since; None otherwise."""

_ABSENT = frozenset({int(ChangeKind.DELETED), int(ChangeKind.UNROUTED)})
"""Kinds that leave a topic without a route: nothing to inline."""


class InlineChoice(NamedTuple):
    """The inline routes of one change set in one body form."""

    routes: tuple[bytes, ...]
    """One body per change, empty bytes for a plain entry; ``()`` when nothing went inline."""
    inlined: int
    inlined_bytes: int
    skipped: int
    """Changes (not deletions) left as plain entries."""


_NONE = InlineChoice((), 0, 0, 0)


class InlineRoutes:
    """Chooses the inline routes of each notification frame (see the module docstring)."""

    def __init__(
        self,
        config: PushConfig,
        subscriptions: SubscriptionRegistry,
        body_of: BodyOf,
        settled_version: SettledVersion,
        counters: Counter[str],
    ) -> None:
        self._max_bytes = config.inline_route_max_bytes
        self._budget = config.inline_budget_bytes_per_tick
        self._subs = subscriptions
        self._body_of = body_of
        self._settled_version = settled_version
        self._counters = counters
        self._chosen: dict[Hashable, InlineChoice] = {}
        self._spent: dict[Subscriber, int] = {}
        """Inline bytes sent to each connection in this tick (connections notified only)."""

    @property
    def active(self) -> bool:
        """Whether any connection asked for inline routes (and the bounds allow any)."""
        return self._max_bytes > 0 and self._budget > 0 and self._subs.inline_connections > 0

    def new_tick(self) -> None:
        """A scheduled tick starts: every connection's budget is whole again."""
        self._spent.clear()

    def start_slice(self) -> None:
        """Forget the choices of the last slice: a route may have moved since."""
        self._chosen.clear()

    def choose(self, conn: Subscriber, changes: Sequence[tuple[str, int, int]]) -> InlineChoice:
        """The inline routes for ``conn``'s frame of ``changes`` (a tuple, as a cache key)."""
        form = self._subs.inline_form(conn)
        if form is None or not changes:
            return _NONE
        spent = self._spent.get(conn, 0)
        left = self._budget - spent
        key = (changes, form, left)
        choice = self._chosen.get(key)
        if choice is None:
            choice = self._chosen[key] = self._choose(changes, form, left)
        if choice.inlined_bytes:
            self._spent[conn] = spent + choice.inlined_bytes
        counters = self._counters
        counters["inline_routes_sent"] += choice.inlined
        counters["inline_route_bytes"] += choice.inlined_bytes
        counters["inline_routes_skipped"] += choice.skipped
        return choice

    def _choose(
        self, changes: Sequence[tuple[str, int, int]], form: tuple[bool, bool], left: int
    ) -> InlineChoice:
        standard, legacy = form
        max_bytes = self._max_bytes
        budget = left
        looked = inlined = inlined_bytes = skipped = 0
        routes: list[bytes] = []
        append = routes.append
        for change in changes:
            topic, version, kind = change[0], change[1], change[2]
            if kind in _ABSENT:
                append(b"")  # no route to carry: the entry itself is the news
                continue
            body = None
            if looked < budget and self._settled_version(topic) == version:
                body = self._body_of(topic, standard, legacy)
            if body is not None:
                size = len(body)
                looked += size
                if size <= max_bytes and size <= left:
                    left -= size
                    inlined += 1
                    inlined_bytes += size
                    append(body)
                    continue
            skipped += 1
            append(b"")
        if not inlined:
            return InlineChoice((), 0, 0, skipped)
        return InlineChoice(tuple(routes), inlined, inlined_bytes, skipped)
