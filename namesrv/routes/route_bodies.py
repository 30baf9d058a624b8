"""Encoded GET_ROUTEINFO bodies, cached per topic and dropped exactly when the route moves.

The registry reports every topic whose assembled route may have changed (see
``RouteRegistry``'s listener contract); the KV store reports order-topic conf changes. Both
call :meth:`RouteBodies.invalidate`, so a cached body is never stale and a route is encoded
once per change per JSON flavour, however many clients ask.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from namesrv.routes.kv_config import KVConfig
from namesrv.routes.registry import RouteRegistry
from protocol.bodies import encode_route

ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"


class RouteBodies:
    def __init__(
        self, registry: RouteRegistry, kv: KVConfig, *, order_message_enable: bool
    ) -> None:
        self._registry = registry
        self._kv = kv
        self._order_message_enable = order_message_enable
        self._caches: dict[tuple[bool, bool], dict[str, bytes]] = {
            (standard, legacy): {} for standard in (True, False) for legacy in (True, False)
        }
        """(standard JSON, 4.9.x shape) -> topic -> encoded body."""
        self.hits = 0
        self.misses = 0

    def set_order_message_enable(self, enabled: bool) -> list[str]:
        """Order confs become part of routes (or stop being part): the topics that have one,
        whose routes move. The caller invalidates them here and wherever answers are kept."""
        self._order_message_enable = enabled
        return list(self._kv.list_namespace(ORDER_TOPIC_CONFIG_NAMESPACE) or ())

    def invalidate(self, topics: Iterable[str]) -> None:
        """Drop the cached bodies of ``topics`` (found by C-level set intersection, so a large
        register costs no Python loop over topics that were never looked up)."""
        for cache in self._caches.values():
            if cache:
                for topic in cache.keys() & topics:
                    del cache[topic]

    def body(self, topic: str, *, standard_json: bool, legacy: bool = False) -> bytes | None:
        """The route body for ``topic`` in the requested JSON flavour and shape (``legacy``:
        4.9.x's, for clients older than 5.0); None when it has no route."""
        cache = self._caches[standard_json, legacy]
        cached = cache.get(topic)
        if cached is not None:
            self.hits += 1
            return cached
        route = self._registry.get_route(topic)
        if route is None:
            return None
        self.misses += 1
        if self._order_message_enable:
            conf = self._kv.get(ORDER_TOPIC_CONFIG_NAMESPACE, topic)
            if conf is not None:
                route = dataclasses.replace(route, order_topic_conf=conf)
        encoded = encode_route(route, standard_json=standard_json, legacy=legacy)
        cache[topic] = encoded
        return encoded

    def __len__(self) -> int:
        return sum(len(cache) for cache in self._caches.values())
