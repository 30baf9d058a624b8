"""Encoded GET_ROUTEINFO bodies, cached per topic and dropped exactly when the route moves.

The registry reports every topic whose assembled route may have changed (see
``RouteRegistry``'s listener contract); the KV store reports order-topic conf changes. Both
call :meth:`RouteBodies.invalidate`, so a cached body is never stale and a route is encoded
once per change per JSON flavour, however many clients ask.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from namesrv.kv_config import KVConfig
from namesrv.route_registry import RouteRegistry
from protocol.bodies import encode_route

ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"


class RouteBodies:
    def __init__(
        self, registry: RouteRegistry, kv: KVConfig, *, order_message_enable: bool
    ) -> None:
        self._registry = registry
        self._kv = kv
        self._order_message_enable = order_message_enable
        self._standard: dict[str, bytes] = {}
        self._fastjson: dict[str, bytes] = {}
        self.hits = 0
        self.misses = 0

    def invalidate(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self._standard.pop(topic, None)
            self._fastjson.pop(topic, None)

    def body(self, topic: str, *, standard_json: bool) -> bytes | None:
        """The route body for ``topic`` in the requested JSON flavour; None when it has no route."""
        cache = self._standard if standard_json else self._fastjson
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
        encoded = encode_route(route, standard_json=standard_json)
        cache[topic] = encoded
        return encoded

    def __len__(self) -> int:
        return len(self._standard) + len(self._fastjson)
