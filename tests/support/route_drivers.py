"""One face for both route clients, so the behaviour cases are written once.

``TwistedDriver`` runs ``client_push.routes.client.RouteClient`` on the reactor with a
``task.Clock``; ``AsyncioDriver`` runs ``client_push.aio.RouteClient`` on a ``LoopThread``
(plain asyncio or uvloop) with a ``FakeClock``. Both are awaited from a pytest-twisted test;
``client`` is the client itself, read (never changed) by the test's polling conditions.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any, Protocol

from twisted.internet import defer, reactor, task

from client_push import aio
from client_push.config import ClientConfig
from client_push.routes.client import RouteClient
from client_push.routes.events import BrokerEvent, RouteEvent
from client_push.routes.route_cache import CachedRoute
from support.aio_loop import FakeClock, LoopThread

DRIVER_KINDS = ("twisted", "asyncio", "uvloop")


class RouteDriver(Protocol):
    kind: str
    client: Any
    events: list[RouteEvent]
    brokers: list[BrokerEvent]

    async def start(self) -> None: ...

    async def get(self, topic: str) -> CachedRoute: ...

    async def listen(self, topic: str) -> None: ...

    async def listen_brokers(self) -> None: ...

    async def advance(self, seconds: float) -> None: ...

    async def update_addrs(self, addrs: list[str]) -> None: ...

    async def ask(self, topics: list[str], outcomes: list[str]) -> None:
        """Start a lookup of each topic without waiting for it; as each ends, the name of
        its outcome (``ok`` or the error's type) is appended to ``outcomes``."""
        ...

    async def stop(self) -> None: ...


class TwistedDriver:
    kind = "twisted"

    def __init__(self, config: ClientConfig) -> None:
        self.clock = task.Clock()
        self.client = RouteClient(config, reactor, random.Random(7), clock=self.clock)
        self.events: list[RouteEvent] = []
        self.brokers: list[BrokerEvent] = []

    async def start(self) -> None:
        self.client.start()

    async def get(self, topic: str) -> CachedRoute:
        return await defer.ensureDeferred(self.client.get_route(topic))

    async def listen(self, topic: str) -> None:
        self.client.add_listener(topic, self.events.append)

    async def listen_brokers(self) -> None:
        self.client.add_broker_listener(self.brokers.append)

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    async def update_addrs(self, addrs: list[str]) -> None:
        self.client.update_namesrv_addrs(addrs)

    async def ask(self, topics: list[str], outcomes: list[str]) -> None:
        for topic in topics:
            d = defer.ensureDeferred(self.client.get_route(topic))
            d.addCallbacks(
                lambda _: outcomes.append("ok"), lambda f: outcomes.append(f.type.__name__)
            )

    async def stop(self) -> None:
        await self.client.stop()


class AsyncioDriver:
    def __init__(self, config: ClientConfig, loop: LoopThread) -> None:
        self.kind = loop.kind
        self.loop = loop
        self.clock = FakeClock()
        self.client = aio.RouteClient(config, clock=self.clock, rng=random.Random(7))
        self.tasks: set[asyncio.Task[None]] = set()
        self.events: list[RouteEvent] = []
        self.brokers: list[BrokerEvent] = []

    async def start(self) -> None:
        await self.loop.run(self.client.__aenter__())

    async def get(self, topic: str) -> CachedRoute:
        return await self.loop.run(self.client.get_route(topic))

    async def listen(self, topic: str) -> None:
        await self.loop.call(self.client.add_listener, topic, self.events.append)

    async def listen_brokers(self) -> None:
        await self.loop.call(self.client.add_broker_listener, self.brokers.append)

    async def advance(self, seconds: float) -> None:
        await self.loop.call(self.clock.advance, seconds)

    async def update_addrs(self, addrs: list[str]) -> None:
        await self.loop.call(self.client.update_namesrv_addrs, addrs)

    async def ask(self, topics: list[str], outcomes: list[str]) -> None:
        async def one(topic: str) -> None:
            try:
                await self.client.get_route(topic)
            except Exception as exc:
                outcomes.append(type(exc).__name__)
            else:
                outcomes.append("ok")

        async def start_all() -> None:
            for topic in topics:
                self.tasks.add(asyncio.get_running_loop().create_task(one(topic)))

        await self.loop.run(start_all())

    async def stop(self) -> None:
        await self.loop.run(self.client.close())


def driver_factory(kind: str) -> tuple[Callable[..., RouteDriver], Callable[[], None]]:
    """``make(addrs, **config overrides)`` for clients of ``kind``, and the cleanup of the
    loop they share (the drivers themselves are stopped by the caller)."""
    loop = LoopThread(kind) if kind != "twisted" else None

    def make(addrs: list[str], **overrides: Any) -> RouteDriver:
        config = ClientConfig(namesrv_addrs=tuple(addrs), **overrides)
        if loop is None:
            return TwistedDriver(config)
        return AsyncioDriver(config, loop)

    def cleanup() -> None:
        if loop is not None:
            loop.stop()

    return make, cleanup
