"""The route-driver face (``support.route_drivers.RouteDriver``) on the deterministic world:
the behaviour cases written against fake name servers run with the Twisted route client, the
``FakeNamesrv`` peers and the test on one ``MemoryWorld`` (one virtual clock, TCP in memory).

A driver's awaitables end before they return: ``get`` settles the world and fails when the
lookup has not ended without the clock moving (as a lookup on a frozen clock would have hung),
``advance`` moves the world's clock, ``barrier`` settles it; ``until`` (``support.memory_world``)
settles the worlds of the running test and asserts its condition, so nothing here waits.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from client_push.config import ClientConfig
from client_push.routes.client import RouteClient
from client_push.routes.events import BrokerEvent, RouteEvent
from client_push.routes.route_cache import CachedRoute
from support.fake_namesrv import FakeNamesrv, make_route
from support.memory_world import LIVE, MemoryWorld, WorldDeferred, until


class MemoryDriver:
    kind = "memory"

    def __init__(self, world: MemoryWorld, config: ClientConfig) -> None:
        self.world = world
        self.client = RouteClient(config, world.reactor, random.Random(7), clock=world.reactor)
        self.events: list[RouteEvent] = []
        self.brokers: list[BrokerEvent] = []

    async def start(self) -> None:
        self.client.start()

    async def get(self, topic: str) -> CachedRoute:
        return await self.run(self.client.get_route(topic))

    async def listen(self, topic: str) -> None:
        self.client.add_listener(topic, self.events.append)

    async def listen_brokers(self) -> None:
        self.client.add_broker_listener(self.brokers.append)

    async def advance(self, seconds: float) -> None:
        self.world.advance(seconds)

    async def update_addrs(self, addrs: list[str]) -> None:
        self.client.update_namesrv_addrs(addrs)

    async def ask(self, topics: list[str], outcomes: list[str]) -> None:
        for topic in topics:
            self.world.start(self.client.get_route(topic)).addCallbacks(
                lambda _: outcomes.append("ok"), lambda f: outcomes.append(f.type.__name__)
            )

    def run(self, coro: Coroutine[Any, Any, Any]) -> WorldDeferred[Any]:
        return self.world.start(coro)

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    async def barrier(self) -> None:
        self.world.settle()

    async def stop(self) -> None:
        self.world.wait(self.client.stop())


class MemoryRouteWorld:
    """Fake name servers and route clients in one ``MemoryWorld``; all stopped after the
    test."""

    kind = "memory"

    def __init__(self) -> None:
        self.world = MemoryWorld()
        self.servers: list[FakeNamesrv] = []
        self.drivers: list[MemoryDriver] = []

    def server(
        self, *, push: bool = True, epoch: str = "e1", port: int = 0, **kw: Any
    ) -> FakeNamesrv:
        """A fake name server listening (``kw``: ``warming``, ``uptime_ms``)."""
        ns = FakeNamesrv(epoch=epoch, push=push, network=self.world.reactor, **kw)
        ns.listen(port)
        self.servers.append(ns)
        return ns

    async def restart(self, ns: FakeNamesrv, epoch: str, **kw: Any) -> FakeNamesrv:
        """``ns`` killed and started again on its port: a new epoch that knows no route
        (``kw``: ``warming``, ``uptime_ms``), its connections cut."""
        self.world.wait(ns.close())
        return self.server(epoch=epoch, port=ns.port, **kw)

    async def client(self, *servers: FakeNamesrv, **overrides: Any) -> MemoryDriver:
        return await self.client_at(*(ns.addr for ns in servers), **overrides)

    async def client_at(self, *addrs: str, **overrides: Any) -> MemoryDriver:
        """A started client of the name servers at ``addrs`` (``overrides``: its config)."""
        driver = MemoryDriver(self.world, ClientConfig(namesrv_addrs=addrs, **overrides))
        self.drivers.append(driver)
        await driver.start()
        return driver

    def close(self) -> None:
        try:
            for driver in self.drivers:
                assert driver.client.counters["internal_errors"] == 0
        finally:
            for driver in self.drivers:
                self.world.wait(driver.client.stop())
            for ns in self.servers:
                if ns._listening is not None and ns._listening.connected:
                    self.world.wait(ns.close())
            self.world.close()


async def held(d: MemoryDriver, ns: FakeNamesrv, topic: str) -> None:
    """``topic`` has a route at ``ns``, the client holds it and push for it is acknowledged."""
    if topic not in ns.routes:
        ns.set_route(topic, make_route())
    await d.get(topic)
    await until(lambda: topic in ns.subscribed() and d.client.push_active)


@pytest.fixture
def memory_routes() -> Iterator[MemoryRouteWorld]:
    """A ``MemoryRouteWorld`` for the test; ``until`` settles it."""
    routes = MemoryRouteWorld()
    LIVE.append(routes.world)
    try:
        yield routes
    finally:
        LIVE.remove(routes.world)
        routes.close()
