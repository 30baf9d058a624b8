"""Answers that list the whole registry, encoded once per registry change and shared.

A topic list or the cluster info costs time and memory in proportion to the registry, however
small the request: each is encoded once for the registry's current :attr:`generation
<namesrv.routes.registry.RouteRegistry.generation>` and the same bytes object answers every
request until the registry changes. The bytes are handed out as they are (the connections send
them from the shared object, never copied whole).

A body is at most ``max_bytes`` long. A topic list that would be longer is cut: it lists the
first topics in sorted order that fit, in upstream's form (``{"topicList":[...]}``), and the
answer says so in its remark and in the ``listed`` and ``total`` header fields, which upstream
clients ignore. A cluster info past it lists the first broker names that fit, each with its
cluster, the same way.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

from namesrv.routes.registry import RouteRegistry
from protocol import bodies
from protocol.route_model import ClusterInfo

_PER_NAME = 3
"""JSON bytes around each name of a list: its quotes and the comma after it."""


@dataclass(frozen=True, slots=True)
class Listing:
    """An encoded listing: its body, and how many entries it lists of how many there are."""

    body: bytes
    listed: int
    total: int

    @property
    def cut(self) -> bool:
        return self.listed < self.total


TOPIC_LISTS: dict[str, Callable[[RouteRegistry], list[str]]] = {
    "all": lambda registry: registry.all_topics(),
    "system": lambda registry: registry.system_topics(),
    "unit": lambda registry: registry.unit_topics(),
    "unit_sub": lambda registry: registry.has_unit_sub_topics(),
    "unit_sub_ununit": lambda registry: registry.has_unit_sub_ununit_topics(),
}
"""The topic lists by name, each read from the registry as a sorted list."""


class Listings:
    """The whole-registry answers of the current registry generation, built on first use."""

    def __init__(self, registry: RouteRegistry, max_bytes: int) -> None:
        self._registry = registry
        self.max_bytes = max_bytes
        self._generation = -1
        self._built: dict[tuple[str, str], Listing] = {}
        self.builds = 0
        """Listings encoded: once per kind (and cluster) per registry generation."""

    def _cached(self, key: tuple[str, str]) -> Listing | None:
        generation = self._registry.generation
        if generation != self._generation:
            self._built.clear()
            self._generation = generation
        return self._built.get(key)

    def _keep(self, key: tuple[str, str], listing: Listing) -> Listing:
        self.builds += 1
        self._built[key] = listing
        return listing

    def topics(self, kind: str) -> Listing:
        """One of :data:`TOPIC_LISTS`."""
        key = (kind, "")
        listing = self._cached(key)
        if listing is None:
            listing = self._keep(key, self._topic_list(TOPIC_LISTS[kind](self._registry)))
        return listing

    def topics_by_cluster(self, cluster: str) -> Listing:
        """The topics of ``cluster``'s brokers; kept only for a cluster the registry knows (the
        names a request may ask for are without number)."""
        key = ("cluster", cluster)
        listing = self._cached(key)
        if listing is None:
            listing = self._topic_list(self._registry.topics_by_cluster(cluster))
            if self._registry.has_cluster(cluster):
                self._keep(key, listing)
        return listing

    def cluster_info(self) -> Listing:
        key = ("cluster_info", "")
        listing = self._cached(key)
        if listing is None:
            listing = self._keep(key, self._cluster_info(self._registry.cluster_info()))
        return listing

    def _topic_list(self, topics: list[str]) -> Listing:
        """``topics`` (sorted) encoded, cut to the first that fit in ``max_bytes``."""
        total = len(topics)
        body = bodies.encode_topic_list(topics)
        count = total
        if len(body) > self.max_bytes:
            # Each name takes its length, its quotes and a comma (escapes aside): the sums of
            # the first ones, made in C, say how many fit.
            room = self.max_bytes - len(bodies.encode_topic_list([])) + 1
            sizes = list(accumulate(map(_PER_NAME.__add__, map(len, topics))))
            count = bisect_right(sizes, room)
            body = bodies.encode_topic_list(topics[:count])
        while len(body) > self.max_bytes and count:  # names with escapes take more
            count = _fitting(topics, count, len(body) - self.max_bytes)
            body = bodies.encode_topic_list(topics[:count])
        return Listing(body, count, total)

    def _cluster_info(self, info: ClusterInfo) -> Listing:
        """The cluster info, cut to the first broker names (sorted) that fit."""
        brokers = info.broker_addr_table
        total = len(brokers)
        body = bodies.encode_cluster_info(info)
        names = list(brokers)
        count = total
        while len(body) > self.max_bytes and count:
            # A broker's entry is about its share of the body: drop as many as the excess.
            per_broker = max(1, len(body) // max(1, count))
            count = max(0, count - max(1, -(-(len(body) - self.max_bytes) // per_broker)))
            kept = set(names[:count])
            body = bodies.encode_cluster_info(
                ClusterInfo(
                    broker_addr_table={n: brokers[n] for n in names[:count]},
                    cluster_addr_table={
                        c: members
                        for c, all_members in info.cluster_addr_table.items()
                        if (members := [n for n in all_members if n in kept])
                    },
                )
            )
        return Listing(body, count, total)


def _fitting(topics: list[str], count: int, excess: int) -> int:
    """How many of the first ``count`` topics to keep so that the list sheds at least
    ``excess`` bytes (names escaped in JSON shed more; the caller checks again)."""
    shed = 0
    while count and shed < excess:
        count -= 1
        shed += len(topics[count]) + _PER_NAME
    return count
