"""The producer-driver face (``support.producer_drivers.ProducerDriver``) on the deterministic
world: the real name server, the Twisted route client and producer, and broker stand-ins on one
``MemoryWorld`` (one virtual clock, TCP in memory).

Where the loopback driver lets sockets run while it steps the clocks, this one asks the world:
``finish`` moves the clock from timer to timer until the send has ended, ``run_for`` advances,
``until`` settles and asserts, ``advancing_until`` runs the world until the condition holds.
A Deferred it hands out, awaited, settles the world first and fails if it has not fired.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.producer import Producer
from client_push.producer.routing import ProducerRouting
from client_push.routes.client import RouteClient
from namesrv_sandbox.standin import BrokerStandIn
from support.loopback_broker import FakeBroker
from support.memory_world import LIVE, MemoryWorld, WorldDeferred
from support.producer_drivers import STEP_S, ProducerDriver
from support.wire_client import WireClient


class WorldCluster:
    """What the producer cases ask of a cluster, on the world: a test broker's registration
    and the clock."""

    def __init__(self, world: MemoryWorld) -> None:
        self.world = world
        self.clock = world.reactor

    async def broker(self, port: int, *topics: str, **kw: Any) -> WireClient:
        return self.world.broker_wire(f"127.0.0.1:{port}", *topics, **kw)


class MemoryProducerDriver(ProducerDriver):
    kind = "memory"

    def __init__(self, world: MemoryWorld) -> None:
        super().__init__(WorldCluster(world))
        self.world = world
        self.producer: Producer | None = None
        self.clients: list[RouteClient] = []

    def _new_client(self) -> RouteClient:
        self.client = self.world.client(f"127.0.0.1:{self.port}", seed=11)
        self.clients.append(self.client)
        return self.client

    # -- the kind's part -----------------------------------------------------------------------

    async def start(self, config: ProducerConfig, seed: int = 3) -> None:
        if self.producer is not None:
            self.world.wait(self.producer.stop())
        self.producer = Producer(self._new_client(), "pg", config, rng=random.Random(seed))
        self.producer.start()

    async def start_routing(self, config: FaultStrategyConfig | None = None) -> None:
        self.routing = ProducerRouting(self._new_client(), config)
        self.routing.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> WorldDeferred[Any]:
        return self.world.start(coro)

    async def settle(self) -> None:
        self.world.settle()

    def start_send(self, topic: str, body: bytes, **kw: Any) -> WorldDeferred[Any]:
        assert self.producer is not None
        return WorldDeferred(self.world, self.producer.send(topic, body, **kw))

    def start_oneway(self, topic: str, body: bytes, **kw: Any) -> WorldDeferred[Any]:
        assert self.producer is not None
        return WorldDeferred(self.world, self.producer.send_oneway(topic, body, **kw))

    async def advance(self, seconds: float) -> None:
        self.world.advance(seconds)

    def now(self) -> float:
        return self.world.now()

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    async def armed(self) -> int:
        """Timers armed on the world's clock (the name server's too)."""
        return sum(1 for call in self.world.reactor.getDelayedCalls() if call.active())

    async def stop(self) -> None:
        self.close_now()

    # -- the common part, on the world ---------------------------------------------------------

    def server(self, **push: Any) -> None:
        _server, addr = self.world.server(push={"tick_interval_ms": 100, **push})
        self.port = int(addr.rpartition(":")[2])

    async def broker(self, name: str, topics: dict[str, int], **kw: Any) -> BrokerStandIn:
        broker = self.world.broker(name, topics, f"127.0.0.1:{self.port}", **kw)
        assert broker.counters["registered"] == 1
        self.brokers.append(broker)
        return broker

    async def finish(self, d: Any, max_steps: int = 5_000) -> Any:
        """The send's result (or its error raised), the clock moved as its timers need."""
        return self.world.wait(d, within=max_steps * STEP_S)

    def fake_broker(self, answer: int | None) -> FakeBroker:
        """A broker that answers every request with ``answer`` (silent when None), listening
        in the world."""
        return FakeBroker(answer, network=self.world.reactor)

    def settled(self, d: Any) -> WorldDeferred[Any]:
        """``d`` (a broker stand-in's, say) as the world's: awaited, it has fired once the world
        is quiet, the clock where it was, or fails."""
        return WorldDeferred(self.world, d)

    async def kill_master(self, master: BrokerStandIn, topic: str = "T") -> None:
        """Kill ``master`` and run the world until the producer's route client holds the route
        without it (the name server announces the departure at its next tick)."""
        await self.settled(master.kill())
        assert self.producer is not None
        routing = self.producer.routing
        self.world.run_until(lambda: routing.broker_addr(topic, master.broker_name) is None, 10.0)

    async def until(self, condition: Callable[[], bool]) -> None:
        self.world.settle()
        assert condition(), "condition does not hold once the world is quiet"

    async def run_for(self, seconds: float) -> None:
        self.world.advance(seconds)

    async def advancing_until(self, condition: Callable[[], bool], seconds: float = 10.0) -> None:
        self.world.run_until(condition, within=seconds)

    def close_now(self) -> None:
        """Stop the routing and the producer; the world stops the rest."""
        if self.routing is not None:
            self.routing.stop()
        if self.producer is not None:
            self.world.wait(self.producer.stop())


@pytest.fixture
def memory_rig(request: pytest.FixtureRequest) -> Iterator[MemoryProducerDriver]:
    """A producer driver in a world of its own, the name server started (its push settings:
    the test module's ``NAMESRV_PUSH``, if any)."""
    world = MemoryWorld()
    LIVE.append(world)
    driver = MemoryProducerDriver(world)
    driver.server(**getattr(request.module, "NAMESRV_PUSH", {}))
    try:
        yield driver
    finally:
        LIVE.remove(world)
        try:
            driver.close_now()
        finally:
            world.close()
