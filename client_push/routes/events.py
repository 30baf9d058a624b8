"""What the route client tells its users: route states and broker changes, and why it fetched.

Pure: no Twisted. ``RouteEvent`` and ``BrokerEvent`` are the values listeners receive;
``Listeners`` holds the callbacks and shields the client from a failing one.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from client_push.routes.route_cache import CachedRoute

log = logging.getLogger("client_push.routes.client")
"""The route client's one logger: its lines carry this name whichever of its modules writes
them, so operators filter the whole route client by one name."""

# Why a route was fetched; telemetry and listeners see these.
FIRST = "first"
NOTIFY = "notify"
POLL = "poll"
GAP = "gap"
EPOCH = "epoch"
RECONNECT = "reconnect"
SUBSCRIBE = "subscribe"
CACHED = "cached"
"""Listener-only: the state already held when the listener was added."""
BROKER_GONE = "broker_gone"
"""A departed broker was dropped from the held route locally, without a request."""
BROKER_ARRIVED = "broker_arrived"
"""A refetch of a topic a broker's arrival changed (spread over the arrival window)."""
CONFIRM = "confirm"
"""A refetch confirming a route changed locally by a departure (spread over a window)."""
VERSION_CHECK = "version_check"
"""A refetch the periodic version check (re-SUBSCRIBE) found needed."""
INLINE = "inline"
"""A route that came inside its notification and was installed without a request."""
RETRY = "retry"
"""A refetch of a held topic whose last answer could not be trusted (backed off)."""
UNROUTED = "unrouted"
"""A notification that the topic's brokers all left: the held route is kept, stale."""

UNCONDITIONAL = frozenset({GAP, EPOCH, RECONNECT})
"""Causes that refetch whatever version is held: the held versions cannot be trusted."""


@dataclass(frozen=True, slots=True)
class RouteEvent:
    """A route state the client learned: a route (``exists``) or the topic's absence."""

    topic: str
    exists: bool
    version: int
    route: CachedRoute | None
    cause: str
    learned_at_ms: int
    namesrv: str
    stale: bool = False
    """The route is the last one held, kept though the name server's last word left the topic
    with no broker or could not be trusted (``CachedRoute.stale``)."""


RouteListener = Callable[[RouteEvent], None]


@dataclass(frozen=True, slots=True)
class BrokerEvent:
    """A broker arrival or departure the name server announced (one per broker per frame)."""

    kind: str
    """``departed`` or ``arrived``."""
    broker_name: str
    cluster: str
    addrs: tuple[tuple[int, str], ...]
    """(broker id, address) of the addresses that left or arrived."""
    cause: str
    """unregister, channel_close, expiry (departures); broker_startup, register (arrivals)."""
    broker_name_gone: bool
    topics: tuple[str, ...]
    """Held topics whose route it changed: dropped locally (departed) or queued for a refetch
    (arrived)."""
    learned_at_ms: int
    namesrv: str


BrokerListener = Callable[[BrokerEvent], None]


class Listeners:
    """Route listeners per topic and broker listeners; a callback that raises is logged and
    counted (``listener_errors``) and never stops the others or the client."""

    def __init__(self, counters: Counter[str]) -> None:
        self._counters = counters
        self._routes: dict[str, list[RouteListener]] = {}
        self._brokers: list[BrokerListener] = []

    def add_route(self, topic: str, callback: RouteListener) -> Callable[[], None]:
        """Listen to ``topic``; returns the remover."""
        self._routes.setdefault(topic, []).append(callback)

        def remove() -> None:
            callbacks = self._routes.get(topic, [])
            if callback in callbacks:
                callbacks.remove(callback)
            if not callbacks:
                self._routes.pop(topic, None)

        return remove

    def add_broker(self, callback: BrokerListener) -> Callable[[], None]:
        """Listen to broker changes; returns the remover."""
        self._brokers.append(callback)

        def remove() -> None:
            if callback in self._brokers:
                self._brokers.remove(callback)

        return remove

    def topics(self) -> set[str]:
        """Topics with a route listener (they never expire)."""
        return set(self._routes)

    def tell(self, event: RouteEvent | BrokerEvent) -> None:
        """Call every listener of ``event`` (its topic's, or the broker listeners)."""
        if isinstance(event, RouteEvent):
            for callback in list(self._routes.get(event.topic, ())):
                try:
                    callback(event)
                except Exception:
                    self._counters["listener_errors"] += 1
                    log.exception("route listener for %s failed", event.topic)
            return
        for broker_callback in list(self._brokers):
            try:
                broker_callback(event)
            except Exception:
                self._counters["listener_errors"] += 1
                log.exception("broker listener failed on %s %s", event.kind, event.broker_name)
