"""Route client for the push-capable RocketMQ name server (upstream issue #3870).

``RouteClient`` holds topic routes, refetches them when the name server notifies a change,
polls as a safety net, expires idle topics and remembers absent ones. The pure modules
(route cache, negative cache, selector, push tracker) import without Twisted; the client
itself is loaded on first use of ``RouteClient`` or ``RouteEvent``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from client_push.config import ClientConfig, parse_namesrv_addrs
from client_push.errors import (
    ClientStoppedError,
    ConnectionLostError,
    NameServerError,
    RequestTimeoutError,
    RouteClientError,
    TopicNotExistError,
)
from client_push.route_cache import CachedRoute, MessageQueue, PublishInfo

if TYPE_CHECKING:
    from client_push.client import RouteClient, RouteEvent

__all__ = [
    "CachedRoute",
    "ClientConfig",
    "ClientStoppedError",
    "ConnectionLostError",
    "MessageQueue",
    "NameServerError",
    "PublishInfo",
    "RequestTimeoutError",
    "RouteClient",
    "RouteClientError",
    "RouteEvent",
    "TopicNotExistError",
    "parse_namesrv_addrs",
]


def __getattr__(name: str) -> Any:
    if name in ("RouteClient", "RouteEvent"):
        from client_push import client

        return getattr(client, name)
    raise AttributeError(f"module 'client_push' has no attribute {name!r}")
