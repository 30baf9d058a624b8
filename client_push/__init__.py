"""Route client for the push-capable RocketMQ name server.

``RouteClient`` holds topic routes, refetches them when the name server notifies a change,
polls as a safety net, expires idle topics and remembers absent ones. The pure modules
(route cache, negative cache, events, push session, selector, fault table, queue selection)
import without Twisted; the Twisted parts are loaded on first use of ``RouteClient``,
``ProducerRouting``, ``Producer`` or the producer's errors and results. Programs on asyncio
use ``client_push.aio.RouteClient`` instead (docs/asyncio.md): the same parts, no Twisted.
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
from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig, SendOutcome
from client_push.producer.queue_select import NoWritableQueueError
from client_push.producer.send_answer import SendStatus
from client_push.routes.events import BrokerEvent, RouteEvent
from client_push.routes.route_cache import CachedRoute, MessageQueue, PublishInfo
from protocol.message import MessageError

if TYPE_CHECKING:
    from client_push.producer.producer import BrokerRefusedError, Producer, SendError, SendResult
    from client_push.producer.routing import ProducerRouting
    from client_push.routes.client import RouteClient

__all__ = [
    "BrokerEvent",
    "BrokerRefusedError",
    "CachedRoute",
    "ClientConfig",
    "ClientStoppedError",
    "ConnectionLostError",
    "FaultStrategyConfig",
    "MessageError",
    "MessageQueue",
    "NameServerError",
    "NoWritableQueueError",
    "Producer",
    "ProducerConfig",
    "ProducerRouting",
    "PublishInfo",
    "RequestTimeoutError",
    "RouteClient",
    "RouteClientError",
    "RouteEvent",
    "SendError",
    "SendOutcome",
    "SendResult",
    "SendStatus",
    "TopicNotExistError",
    "parse_namesrv_addrs",
]


def __getattr__(name: str) -> Any:
    if name == "RouteClient":
        from client_push.routes.client import RouteClient

        return RouteClient
    if name == "ProducerRouting":
        from client_push.producer import routing as producer

        return producer.ProducerRouting
    if name in ("Producer", "SendError", "SendResult", "BrokerRefusedError"):
        from client_push.producer import producer as sender

        return getattr(sender, name)
    raise AttributeError(f"module 'client_push' has no attribute {name!r}")
