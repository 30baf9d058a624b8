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
from namesrv.routes.zones import filter_by_zone
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
        self._zone_caches: dict[tuple[bool, bool, str], dict[str, bytes]] = {}
        """(standard JSON, 4.9.x shape, zone) -> topic -> encoded zone-filtered body; only for
        zones some broker group declares, so requests cannot grow it with made-up names."""
        self.hits = 0
        self.misses = 0

    def set_order_message_enable(self, enabled: bool) -> list[str]:
        """Order confs become part of routes (or stop being part): the topics that have one,
        whose routes move. The caller invalidates them here and wherever answers are kept."""
        self._order_message_enable = enabled
        return self._kv.keys_of(ORDER_TOPIC_CONFIG_NAMESPACE)

    def invalidate(self, topics: Iterable[str]) -> None:
        """Drop the cached bodies of ``topics`` (found by C-level set intersection, so a large
        register costs no Python loop over topics that were never looked up)."""
        if self._zone_caches and not isinstance(topics, set | frozenset | dict):
            topics = set(topics)
        for cache in (*self._caches.values(), *self._zone_caches.values()):
            if cache:
                for topic in cache.keys() & topics:
                    del cache[topic]

    def body(
        self, topic: str, *, standard_json: bool, legacy: bool = False, zone: str | None = None
    ) -> bytes | None:
        """The route body for ``topic`` in the requested JSON flavour and shape (``legacy``:
        4.9.x's, for clients older than 5.0), filtered to ``zone`` when one is given (see
        :mod:`namesrv.routes.zones`); None when it has no route."""
        if zone is None:
            cache: dict[str, bytes] | None = self._caches[standard_json, legacy]
        else:
            cache = self._zone_cache(standard_json, legacy, zone)
        cached = cache.get(topic) if cache is not None else None
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
        if zone is not None:
            route = filter_by_zone(route, zone)
        encoded = encode_route(route, standard_json=standard_json, legacy=legacy)
        if cache is not None:
            cache[topic] = encoded
        return encoded

    def _zone_cache(self, standard_json: bool, legacy: bool, zone: str) -> dict[str, bytes] | None:
        key = (standard_json, legacy, zone)
        cache = self._zone_caches.get(key)
        if cache is None:
            declared = self._registry.zone_names()
            if zone in declared:
                for gone in [k for k in self._zone_caches if k[2] not in declared]:
                    del self._zone_caches[gone]
                cache = self._zone_caches[key] = {}
        return cache

    @property
    def zones_cached(self) -> int:
        """How many (flavour, zone) caches are held: only for zones a broker group declares."""
        return len(self._zone_caches)

    def __len__(self) -> int:
        caches = (*self._caches.values(), *self._zone_caches.values())
        return sum(len(cache) for cache in caches)
