"""The route client for asyncio programs (FastAPI, aiohttp, anything on uvloop).

No Twisted, directly or not: the route client and the producer are the ones the Twisted
client runs too, written once over ``client_push.runtime``, here on its asyncio adapter::

    async with RouteClient(ClientConfig(namesrv_addrs=("127.0.0.1:9876",))) as client:
        route = await client.get_route("TopicTest")
        async for change in client.changes(["TopicTest"]):
            ...
        async with Producer(client, "my-group", ProducerConfig()) as producer:
            result = await producer.send("TopicTest", b"hello")

See docs/asyncio.md.
"""

from __future__ import annotations

from client_push.aio.client import RouteClient, UnknownActionError
from client_push.aio.producer import BrokerRefusedError, Producer, SendError, SendResult
from client_push.aio.producer_routing import ProducerRouting
from client_push.config import ClientConfig
from client_push.producer.config import ProducerConfig
from client_push.routes.changes import RouteChange, RouteChanges
from client_push.runtime.asyncio_loop import LoopClock
from client_push.runtime.interface import Clock

__all__ = [
    "BrokerRefusedError",
    "ClientConfig",
    "Clock",
    "LoopClock",
    "Producer",
    "ProducerConfig",
    "ProducerRouting",
    "RouteChange",
    "RouteChanges",
    "RouteClient",
    "SendError",
    "SendResult",
    "UnknownActionError",
]
