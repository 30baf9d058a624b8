"""The routes a client holds, what producers and consumers derive from them, and topic expiry.

Pure: callers pass the time. A topic is *held* from its first lookup until it has not been
looked up for the idle expiry; a held topic may have a route or be known absent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from protocol.codes import Perm
from protocol.route_model import TopicRouteData

MASTER_ID = 0


class RouteTooLargeError(ValueError):
    """A route names more queues than the client is configured to build objects for."""


def check_queue_counts(route: TopicRouteData, max_queue_nums: int, max_route_queues: int) -> None:
    """Refuse a route whose queue counts would make the client build an absurd structure.

    The counts come from the name server (and before it from any broker that registered), so
    they are untrusted: a route claiming 100,000,000 queues must fail its lookup, not allocate.
    """
    total = 0
    for qd in route.queue_datas:
        for name, value in (
            ("readQueueNums", qd.read_queue_nums),
            ("writeQueueNums", qd.write_queue_nums),
        ):
            if not 0 <= value <= max_queue_nums:
                raise RouteTooLargeError(
                    f"broker {qd.broker_name[:64]!r} has {name}={value}, outside "
                    f"0..{max_queue_nums} (max_queue_nums)"
                )
        total += max(qd.read_queue_nums, qd.write_queue_nums)
    for item in (route.order_topic_conf or "").split(";"):
        _, _, count = item.partition(":")
        count = count.strip()
        if count.isdigit():
            if int(count) > max_queue_nums:
                raise RouteTooLargeError(
                    f"orderTopicConf names {count} queues for one broker, over "
                    f"{max_queue_nums} (max_queue_nums)"
                )
            total += int(count)
    if total > max_route_queues:
        raise RouteTooLargeError(
            f"the route names {total} queues, over {max_route_queues} (max_route_queues)"
        )


@dataclass(frozen=True, slots=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class PublishInfo:
    """The queues a producer may send to, as upstream's ``TopicPublishInfo``."""

    topic: str
    order_topic: bool
    message_queues: tuple[MessageQueue, ...]

    @property
    def ok(self) -> bool:
        return bool(self.message_queues)


def publish_info(topic: str, route: TopicRouteData) -> PublishInfo:
    """Writable queues of the topic, as upstream's ``topicRouteData2TopicPublishInfo``.

    An ``orderTopicConf`` (``brokerA:8;brokerB:8``) fixes the queues outright. Otherwise each
    broker name with WRITE perm and a live master contributes its write queues; a broker
    without a master cannot take sends, so its queues are left out.
    """
    if route.order_topic_conf:
        queues: list[MessageQueue] = []
        for item in route.order_topic_conf.split(";"):
            name, sep, count = item.partition(":")
            if not sep or not count.strip().isdigit():
                continue
            queues.extend(MessageQueue(topic, name, i) for i in range(int(count)))
        return PublishInfo(topic, True, tuple(queues))
    brokers = {b.broker_name: b for b in route.broker_datas}
    queues = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if not qd.perm & Perm.WRITE:
            continue
        broker = brokers.get(qd.broker_name)
        if broker is None or MASTER_ID not in broker.broker_addrs:
            continue
        queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return PublishInfo(topic, False, tuple(queues))


def read_queues(topic: str, route: TopicRouteData) -> tuple[MessageQueue, ...]:
    """Readable queues of the topic, as upstream's ``topicRouteData2TopicSubscribeInfo``."""
    queues: list[MessageQueue] = []
    for qd in route.queue_datas:
        if qd.perm & Perm.READ:
            queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return tuple(queues)


@dataclass(slots=True)
class CachedRoute:
    """A held route. Everything but ``last_access_ms`` is fixed when the route is fetched."""

    topic: str
    route: TopicRouteData
    version: int
    """The name server's ``routeVersion``; 0 when the server sends none (upstream)."""
    fetched_at_ms: int
    last_access_ms: int
    publish_info: PublishInfo
    read_queues: tuple[MessageQueue, ...]
    stale: bool = False
    """Kept though the name server's last word left the topic with no broker (or could not be
    trusted): its brokers may be gone, and the fault strategy finds out which still answer.
    A route answered afresh is not stale."""


def is_empty(route: TopicRouteData) -> bool:
    """A route with no broker to send to or read from: no queue data, or no broker address."""
    return not route.queue_datas or not any(b.broker_addrs for b in route.broker_datas)


@dataclass(frozen=True, slots=True)
class RouteUpdate:
    entry: CachedRoute
    previous: CachedRoute | None

    @property
    def changed(self) -> bool:
        """True when the route, its version or its staleness differs from what was held."""
        prev = self.previous
        entry = self.entry
        return (
            prev is None
            or prev.version != entry.version
            or prev.stale != entry.stale
            or prev.route != entry.route
        )


class RouteCache:
    def __init__(
        self, idle_expiry_ms: int, max_queue_nums: int = 1_024, max_route_queues: int = 65_536
    ) -> None:
        self._idle_expiry = idle_expiry_ms
        self._max_queue_nums = max_queue_nums
        self._max_route_queues = max_route_queues
        self._routes: dict[str, CachedRoute] = {}
        self._last_access: dict[str, int] = {}

    def get(self, topic: str, now_ms: int) -> CachedRoute | None:
        """The held route, counting this as an access; None when none is held."""
        entry = self._routes.get(topic)
        if entry is not None:
            entry.last_access_ms = now_ms
            self._last_access[topic] = now_ms
        return entry

    def peek(self, topic: str) -> CachedRoute | None:
        """The held route without counting an access (refetches and listeners use this)."""
        return self._routes.get(topic)

    def touch(self, topic: str, now_ms: int) -> bool:
        """Count an access; holds the topic from now on. True if it was not held before."""
        new = topic not in self._last_access
        self._last_access[topic] = now_ms
        entry = self._routes.get(topic)
        if entry is not None:
            entry.last_access_ms = now_ms
        return new

    def put(
        self, topic: str, route: TopicRouteData, version: int, now_ms: int, *, stale: bool = False
    ) -> RouteUpdate:
        """Store a fetched route; a refetch does not count as an access.

        :class:`RouteTooLargeError` (nothing stored) when its queue counts are over the bounds.
        """
        check_queue_counts(route, self._max_queue_nums, self._max_route_queues)
        last_access = self._last_access.setdefault(topic, now_ms)
        entry = CachedRoute(
            topic=topic,
            route=route,
            version=version,
            fetched_at_ms=now_ms,
            last_access_ms=last_access,
            publish_info=publish_info(topic, route),
            read_queues=read_queues(topic, route),
            stale=stale,
        )
        previous = self._routes.get(topic)
        self._routes[topic] = entry
        return RouteUpdate(entry, previous)

    def mark_stale(self, topic: str) -> bool:
        """Keep the held route of ``topic``, marked stale; True when it was not stale before."""
        entry = self._routes.get(topic)
        if entry is None or entry.stale:
            return False
        # A new entry: routes handed out earlier (in events) keep what they said.
        self._routes[topic] = replace(entry, stale=True)
        return True

    def forget_versions(self) -> int:
        """Hold every route at version 0: its version came from another name-server process
        (a new epoch) and says nothing about this one's, so any version it notifies is news.
        The routes themselves stay. How many were held."""
        for topic, entry in self._routes.items():
            if entry.version:
                self._routes[topic] = replace(entry, version=0)
        return len(self._routes)

    def stale_count(self) -> int:
        return sum(1 for entry in self._routes.values() if entry.stale)

    def drop(self, topic: str) -> CachedRoute | None:
        """The topic is absent: forget its route but keep holding it (to learn its creation)."""
        return self._routes.pop(topic, None)

    def forget(self, topic: str) -> None:
        self._routes.pop(topic, None)
        self._last_access.pop(topic, None)

    def held(self) -> list[str]:
        return list(self._last_access)

    def is_held(self, topic: str) -> bool:
        return topic in self._last_access

    def last_access_ms(self, topic: str) -> int | None:
        return self._last_access.get(topic)

    def expire(self, now_ms: int, keep: frozenset[str] | set[str] = frozenset()) -> list[str]:
        """Stop holding topics not looked up for the idle expiry; ``keep`` never expires."""
        cutoff = now_ms - self._idle_expiry
        gone = [t for t, at in self._last_access.items() if at <= cutoff and t not in keep]
        for topic in gone:
            self.forget(topic)
        return gone

    def __contains__(self, topic: object) -> bool:
        return topic in self._routes

    def __len__(self) -> int:
        return len(self._routes)
