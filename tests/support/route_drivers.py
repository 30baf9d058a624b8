"""One face for both route clients over real loopback, so a case runs once per event loop (the
loopback smoke and TLS tests; the behaviour cases run in the deterministic world,
``support.memory_route_world``, on the same face).

``TwistedDriver`` runs ``client_push.routes.client.RouteClient`` on the reactor with a
``task.Clock``; ``AsyncioDriver`` runs ``client_push.aio.RouteClient`` on a ``LoopThread``
(plain asyncio or uvloop) with a ``FakeClock``. Both are awaited from a pytest-twisted test;
``client`` is the client itself, read (never changed) by the test's polling conditions.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from twisted.internet import defer, reactor, task

from client_push import aio
from client_push.config import ClientConfig
from client_push.routes.client import RouteClient
from client_push.routes.events import BrokerEvent, RouteEvent
from client_push.routes.route_cache import CachedRoute
from protocol.frame import RemotingCommand
from support.aio_loop import FakeClock, LoopThread
from support.route_cluster import TICK_S

DRIVER_KINDS = ("twisted", "asyncio", "uvloop")

BARRIER_CODE = 99_901
"""A request code no name server knows: it is answered REQUEST_CODE_NOT_SUPPORTED at once."""

TURNS_BEFORE_BARRIER = 3
"""Loop turns the barrier yields first, so tasks the client spawned before it (a fetch, a
SUBSCRIBE) have written their requests ahead of it."""


async def round_trip(client: Any) -> None:
    """Run in the client's loop: one request on its current name-server connection, answered.

    The connection is ordered both ways, so once it is answered the name server has received
    every request the client wrote before it, and the client has processed every frame the
    server sent before the answer: what did not happen by then will not come from those.
    """
    for _ in range(TURNS_BEFORE_BARRIER):
        await _one_turn(client)
    response = await client._link.request(RemotingCommand.request(BARRIER_CODE), 10_000)
    assert response.code != 0, "the barrier request was not refused"


async def _one_turn(client: Any) -> None:
    done = client._runtime.future()
    client._runtime.call_soon(lambda: done.set_result(None))
    await done


IN_FLIGHT = ("requests", "fetches", "fetch_tasks", "push_requests", "waiting_for_connection")
"""The ``outstanding`` tables that hold work started but not yet ended: a SUBSCRIBE spawned
but not yet written counts as much as one written and unanswered."""


def nothing_in_flight(outstanding: dict[str, int]) -> bool:
    return all(outstanding[table] == 0 for table in IN_FLIGHT)


def barrier(client: Any) -> defer.Deferred[None]:
    """``round_trip`` for a Twisted client, as a Deferred."""
    return defer.ensureDeferred(round_trip(client))


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

    def run(self, coro: Coroutine[Any, Any, Any]) -> defer.Deferred[Any]:
        """Run a coroutine of the client's (``client.get_publish_info(t)``) on its loop."""
        ...

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Call ``function`` on the client's loop."""
        ...

    async def barrier(self) -> None:
        """``round_trip`` on the client's loop: requests it wrote so far have been received
        by the name server, and frames the server sent so far have been processed."""
        ...

    async def stop(self) -> None: ...


class TwistedDriver:
    kind = "twisted"

    def __init__(self, config: ClientConfig, clock: task.Clock | None = None) -> None:
        self.clock = clock if clock is not None else task.Clock()
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

    def run(self, coro: Coroutine[Any, Any, Any]) -> defer.Deferred[Any]:
        return defer.ensureDeferred(coro)

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    async def barrier(self) -> None:
        await barrier(self.client)

    async def stop(self) -> None:
        await self.client.stop()


class AsyncioDriver:
    def __init__(self, config: ClientConfig, loop: LoopThread, start: float = 0.0) -> None:
        self.kind = loop.kind
        self.loop = loop
        self.clock = FakeClock(start)
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

    def run(self, coro: Coroutine[Any, Any, Any]) -> defer.Deferred[Any]:
        return self.loop.run(coro)

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return await self.loop.call(function, *args)

    async def barrier(self) -> None:
        await self.loop.run(round_trip(self.client))

    async def stop(self) -> None:
        await self.loop.run(self.client.close())


def driver_factory(
    kind: str, clock: task.Clock | None = None
) -> tuple[Callable[..., RouteDriver], Callable[[], None]]:
    """``make(addrs, **config overrides)`` for clients of ``kind``, and the cleanup of the
    loop they share (the drivers themselves are stopped by the caller). ``clock``: the one a
    Twisted client runs on (an asyncio client's fake clock starts at its time)."""
    loop = LoopThread(kind) if kind != "twisted" else None

    def make(addrs: list[str], **overrides: Any) -> RouteDriver:
        config = ClientConfig(namesrv_addrs=tuple(addrs), **overrides)
        if loop is None:
            return TwistedDriver(config, clock)
        return AsyncioDriver(config, loop, 0.0 if clock is None else float(clock.seconds()))

    def cleanup() -> None:
        if loop is not None:
            loop.stop()

    return make, cleanup


class ClusterClients:
    """Route clients of one kind against the real name servers of a ``Cluster``, on the
    cluster's time line: a Twisted client runs on the cluster's clock, an asyncio one on a fake
    clock that ``advance`` moves together with it."""

    def __init__(self, kind: str, cluster: Any) -> None:
        self.kind = kind
        self.cluster = cluster
        self._make, self._cleanup = driver_factory(kind, cluster.clock)
        self.drivers: list[RouteDriver] = []

    async def client(self, *ports: int, **overrides: Any) -> RouteDriver:
        driver = self._make([f"127.0.0.1:{port}" for port in ports], **overrides)
        self.drivers.append(driver)
        await driver.start()
        return driver

    async def advance(self, seconds: float) -> None:
        """The cluster's clock (its name servers, Twisted clients), then every asyncio
        client's."""
        self.cluster.clock.advance(seconds)
        for driver in self.drivers:
            if driver.kind != "twisted":
                await driver.advance(seconds)

    async def tick(self) -> None:
        await self.advance(TICK_S)

    async def close(self) -> None:
        try:
            for driver in self.drivers:
                await driver.stop()
        finally:
            self._cleanup()
