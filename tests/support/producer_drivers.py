"""One face for both producers, so the producer behaviour cases are written once.

Each kind runs against the real name server of a ``Cluster`` (route push on, its timers on the
cluster's ``task.Clock``) and broker stand-ins on loopback. ``twisted``: the Twisted route client
and ``Producer`` on the reactor and the cluster's clock. ``asyncio`` / ``uvloop``: the asyncio
route client and ``client_push.aio.Producer`` on a ``LoopThread`` sharing one ``FakeClock``;
``advance`` moves that clock and the cluster's together, so the name server's ticks and the
producer's timers keep one time line. A send is a Deferred either way; ``finish`` lets loopback
traffic run, advancing the clocks while the send waits on a timer.

A driver may also run a ``ProducerRouting`` alone (``start_routing``, ``select``) for the
selection cases. Producer state that the cases change is changed where the producer lives
(``call``); conditions on it are read there too (``until``), and ``settle`` lets the loop run
what an advance made ready, so that a Deferred not called after it proves a wait still waits.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from typing import Any

from twisted.internet import defer, reactor, task

from client_push import aio
from client_push.config import ClientConfig
from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.producer import Producer
from client_push.producer.routing import ProducerRouting
from client_push.routes.route_cache import CachedRoute
from namesrv_sandbox.standin import BrokerStandIn
from support.aio_loop import FakeClock, LoopThread, ReactorLoop
from support.loopback_wait import until_read

PRODUCER_KINDS = ("twisted", "asyncio", "uvloop")
STEP_S = 0.02

SETTLE_TURNS = 5
"""Loop turns ``settle`` lets run: a task woken by a timer resumes, ends, and its result is
handed to the reactor within them."""


async def loop_turns(n: int = SETTLE_TURNS) -> None:
    """Run on an asyncio loop: let it run ``n`` turns of what is ready."""
    for _ in range(n):
        await asyncio.sleep(0)


class ProducerDriver:
    """The common part: brokers, the stepping of sends, the clocks."""

    kind: str
    producer: Any
    client: Any
    routing: Any

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.brokers: list[BrokerStandIn] = []
        self.port = 0
        self.routing = None

    # -- the kind's part -----------------------------------------------------------------------

    async def start(self, config: ProducerConfig, seed: int = 3) -> None:
        """A route client and a producer on it (its random choices seeded with ``seed``),
        started; a producer already started by this driver is closed first (its client stays
        up until ``close``)."""
        raise NotImplementedError

    async def start_routing(self, config: FaultStrategyConfig | None = None) -> None:
        """A route client and a ``ProducerRouting`` alone on it, started (``self.routing``)."""
        raise NotImplementedError

    def select(self, topic: str, last: str | None = None) -> defer.Deferred[Any]:
        """``routing.select_queue(topic, last)`` run where the routing lives."""
        return self.run(self.routing.select_queue(topic, last))

    def run(self, coro: Coroutine[Any, Any, Any]) -> defer.Deferred[Any]:
        """Run a coroutine where the producer lives; a Deferred of its result."""
        raise NotImplementedError

    async def settle(self) -> None:
        """Let the producer's loop run what is ready (nothing to do on the reactor, where a
        timer's callbacks run inside ``advance``)."""

    def start_send(self, topic: str, body: bytes, **kw: Any) -> defer.Deferred[Any]:
        raise NotImplementedError

    def start_oneway(self, topic: str, body: bytes, **kw: Any) -> defer.Deferred[Any]:
        raise NotImplementedError

    async def advance(self, seconds: float) -> None:
        raise NotImplementedError

    def now(self) -> float:
        """The producer's clock, in seconds."""
        raise NotImplementedError

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Call a producer method where the producer lives."""
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    # -- common --------------------------------------------------------------------------------

    def server(self, **push: Any) -> None:
        _server, self.port = self.cluster.start_server(push={"tick_interval_ms": 100, **push})

    async def broker(self, name: str, topics: dict[str, int], **kw: Any) -> BrokerStandIn:
        broker = BrokerStandIn(
            name,
            topics,
            [f"127.0.0.1:{self.port}"],
            reactor=reactor,
            clock=self.cluster.clock,
            **kw,
        )
        await broker.start()
        assert broker.counters["registered"] == 1
        self.brokers.append(broker)
        return broker

    def client_config(self) -> ClientConfig:
        return ClientConfig(namesrv_addrs=(f"127.0.0.1:{self.port}",))

    async def finish(self, d: defer.Deferred[Any], max_steps: int = 5_000) -> Any:
        """The send's result (or its error raised), stepping the clocks while it waits."""
        for _ in range(max_steps):
            for _ in range(3):
                if d.called:
                    return await d
                await task.deferLater(reactor, 0.001, lambda: None)
            await self.advance(STEP_S)
        raise AssertionError("send did not finish")

    async def send(self, topic: str, body: bytes, **kw: Any) -> Any:
        return await self.finish(self.start_send(topic, body, **kw))

    async def send_many(self, n: int, topic: str = "T") -> list[Any]:
        return [await self.send(topic, b"m%d" % i) for i in range(n)]

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition`` (about the producer's state) holds, read where it lives."""

        async def holds() -> bool:
            return bool(await self.call(condition))

        await until_read(holds)

    async def refetch(self, topic: str = "T") -> CachedRoute:
        """A poll of ``topic``'s route forced on the producer's route client, waited for."""
        fetches = self.client._fetches

        async def poll() -> CachedRoute:
            return await fetches.wait(fetches.fetch(topic, "poll"))

        return await self.finish(self.run(poll()))

    async def run_for(self, seconds: float) -> None:
        """Advance the clocks by ``seconds`` in steps, letting loopback traffic run."""
        for _ in range(round(seconds / STEP_S)):
            for _ in range(3):
                await task.deferLater(reactor, 0.001, lambda: None)
            await self.advance(STEP_S)

    async def kill_master(self, master: BrokerStandIn, topic: str = "T") -> None:
        """Kill ``master`` and step the clocks until the producer's route client holds the
        route without it (the name server announces the departure at its next tick)."""
        await master.kill()
        for _ in range(500):
            if self.producer.routing.broker_addr(topic, master.broker_name) is None:
                return
            await self.run_for(STEP_S)
        raise AssertionError("the departure of the master was not learned")

    async def until_routed(self, broker_name: str, topic: str = "T") -> None:
        """Step the clocks until the producer's route client holds ``topic``'s route with
        ``broker_name`` in it (the name server announces an arrival at its next tick)."""
        routing = self.producer.routing
        await self.advancing_until(lambda: routing.broker_addr(topic, broker_name) is not None)

    async def advancing_until(self, condition: Callable[[], bool], seconds: float = 10.0) -> None:
        """Step the clocks, at most ``seconds``, until ``condition`` (about the producer's
        state, read where it lives) holds."""
        for _ in range(round(seconds / STEP_S)):
            if await self.call(condition):
                return
            await self.run_for(STEP_S)
        raise AssertionError(f"condition not reached in {seconds} s of the clocks")

    async def close(self) -> None:
        try:
            await self.stop()
        finally:
            for broker in self.brokers:
                await broker.kill()


class TwistedProducerDriver(ProducerDriver):
    kind = "twisted"
    loop = ReactorLoop()
    producer: Producer | None = None

    async def armed(self) -> int:
        """Timers armed on the clock (the cluster's: the name server's count too)."""
        return sum(1 for call in self.cluster.clock.getDelayedCalls() if call.active())

    async def start(self, config: ProducerConfig, seed: int = 3) -> None:
        if self.producer is not None:
            await self.producer.stop()
        self.client = self.cluster.client(self.port)
        self.producer = Producer(
            self.client,
            "pg",
            config,
            reactor=reactor,
            clock=self.cluster.clock,
            rng=random.Random(seed),
        )
        self.producer.start()

    async def start_routing(self, config: FaultStrategyConfig | None = None) -> None:
        self.client = self.cluster.client(self.port)
        self.routing = ProducerRouting(
            self.client, config, reactor=reactor, clock=self.cluster.clock
        )
        self.routing.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> defer.Deferred[Any]:
        return defer.ensureDeferred(coro)

    def start_send(self, topic: str, body: bytes, **kw: Any) -> defer.Deferred[Any]:
        assert self.producer is not None
        return self.producer.send(topic, body, **kw)

    def start_oneway(self, topic: str, body: bytes, **kw: Any) -> defer.Deferred[Any]:
        assert self.producer is not None
        return self.producer.send_oneway(topic, body, **kw)

    async def advance(self, seconds: float) -> None:
        self.cluster.clock.advance(seconds)

    def now(self) -> float:
        return float(self.cluster.clock.seconds())

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    async def stop(self) -> None:
        if self.routing is not None:
            self.routing.stop()
        if self.producer is not None:
            await self.producer.stop()


class AsyncioProducerDriver(ProducerDriver):
    def __init__(self, cluster: Any, loop: LoopThread) -> None:
        super().__init__(cluster)
        self.kind = loop.kind
        self.loop = loop
        self.clock = FakeClock(float(cluster.clock.seconds()))
        self.producer: aio.Producer | None = None
        self.clients: list[aio.RouteClient] = []

    async def _new_client(self) -> aio.RouteClient:
        self.client = aio.RouteClient(self.client_config(), clock=self.clock, rng=random.Random(3))
        self.clients.append(self.client)
        await self.loop.run(self.client.__aenter__())
        return self.client

    async def start(self, config: ProducerConfig, seed: int = 3) -> None:
        if self.producer is not None:
            await self.loop.run(self.producer.close())
        client = await self._new_client()
        rng = random.Random(seed)
        self.producer = aio.Producer(client, "pg", config, clock=self.clock, rng=rng)
        await self.loop.run(self.producer.__aenter__())

    async def start_routing(self, config: FaultStrategyConfig | None = None) -> None:
        client = await self._new_client()
        self.routing = aio.ProducerRouting(client, config, clock=self.clock)
        await self.loop.call(self.routing.start)

    def run(self, coro: Coroutine[Any, Any, Any]) -> defer.Deferred[Any]:
        return self.loop.run(coro)

    async def settle(self) -> None:
        await self.loop.run(loop_turns())

    def start_send(self, topic: str, body: bytes, **kw: Any) -> defer.Deferred[Any]:
        assert self.producer is not None
        return self.loop.run(self.producer.send(topic, body, **kw))

    def start_oneway(self, topic: str, body: bytes, **kw: Any) -> defer.Deferred[Any]:
        assert self.producer is not None
        return self.loop.run(self.producer.send_oneway(topic, body, **kw))

    async def advance(self, seconds: float) -> None:
        self.cluster.clock.advance(seconds)
        await self.loop.call(self.clock.advance, seconds)

    def now(self) -> float:
        return self.clock.now

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return await self.loop.call(function, *args)

    async def armed(self) -> int:
        """Timers armed on the producer's and the client's fake clock."""
        return await self.loop.call(self.clock.pending)

    async def stop(self) -> None:
        if self.routing is not None:
            await self.loop.call(self.routing.stop)
        if self.producer is not None:
            await self.loop.run(self.producer.close())
        for client in self.clients:
            await self.loop.run(client.close())


def producer_driver(kind: str, cluster: Any) -> tuple[ProducerDriver, Callable[[], None]]:
    """A driver of ``kind`` and the cleanup of its loop (the driver is closed by the caller)."""
    if kind == "twisted":
        return TwistedProducerDriver(cluster), lambda: None
    loop = LoopThread(kind)
    return AsyncioProducerDriver(cluster, loop), loop.stop
