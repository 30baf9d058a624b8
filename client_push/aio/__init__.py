"""The route client for asyncio programs (FastAPI, aiohttp, anything on uvloop).

No Twisted, directly or not: the push contract, the wire codec and the route logic are the
sans-I/O parts the Twisted client runs too, carried out here with asyncio::

    async with RouteClient(ClientConfig(namesrv_addrs=("127.0.0.1:9876",))) as client:
        route = await client.get_route("TopicTest")
        async for change in client.changes(["TopicTest"]):
            ...
        async with Producer(client, "my-group", ProducerConfig()) as producer:
            result = await producer.send("TopicTest", b"hello")

See docs/asyncio.md.
"""

from __future__ import annotations

from client_push.aio.changes import RouteChange, RouteChanges
from client_push.aio.client import RouteClient, UnknownActionError
from client_push.aio.clock import Clock, LoopClock
from client_push.aio.producer import BrokerRefusedError, Producer, SendError, SendResult
from client_push.aio.producer_routing import ProducerRouting
from client_push.config import ClientConfig
from client_push.producer.config import ProducerConfig

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
