"""Route clients on a loop (a ``LoopThread`` of asyncio or uvloop, or the reactor itself:
``ReactorLoop``) against a ``FakeNamesrv`` on the reactor.

``AioWorld.run`` and ``call`` hand work to the loop and are awaited from a Twisted test;
clients made here run on a fake clock each and are closed by ``close``.
"""

from __future__ import annotations

import random
from typing import Any

from twisted.internet import reactor

from client_push import aio
from client_push.config import ClientConfig
from client_push.routes.client import RouteClient
from support.aio_loop import FakeClock, LoopThread, PendingClock, ReactorLoop
from support.fake_namesrv import FakeNamesrv


async def started_client(
    loop: LoopThread | ReactorLoop, config: ClientConfig, rng: random.Random | None = None
) -> Any:
    """A route client of ``loop``'s kind on the real clock, started where it runs: the Twisted
    one on the reactor, the asyncio one entered (``async with``) on its loop."""
    if loop.kind == "twisted":
        client: Any = RouteClient(config, reactor, rng)
        client.start()
        return client
    client = aio.RouteClient(config, rng=rng)
    await loop.run(client.__aenter__())
    return client


async def close_clients(loop: LoopThread | ReactorLoop, clients: list[Any]) -> None:
    """Close ``clients`` (from ``started_client``) one after the other where they run."""

    async def close_all() -> None:
        for client in clients:
            await client._close()

    await loop.run(close_all())


PERIODIC_TIMERS = 3
"""Timers a started asyncio client always has armed: poll, expiry check, version check."""


class AioWorld:
    def __init__(self, loop: LoopThread | ReactorLoop) -> None:
        self.loop = loop
        self.run = loop.run
        self.call = loop.call
        self.ns = FakeNamesrv()
        self.ns.listen()
        self.clients: list[Any] = []
        self.clocks: dict[int, Any] = {}

    async def client(self, **overrides: Any) -> Any:
        config = ClientConfig(namesrv_addrs=(self.ns.addr,), **overrides)
        client: Any
        if self.loop.kind == "twisted":
            clock: Any = PendingClock()
            client = RouteClient(config, reactor, random.Random(3), clock=clock)
            client.start()
        else:
            clock = FakeClock()
            client = aio.RouteClient(config, clock=clock, rng=random.Random(3))
            await self.run(client.__aenter__())
        self.clients.append(client)
        self.clocks[id(client)] = clock
        return client

    def clock(self, client: Any) -> Any:
        return self.clocks[id(client)]

    async def close_client(self, client: Any) -> None:
        await self.run(client._close())

    async def outstanding(self, client: aio.RouteClient) -> dict[str, int]:
        return await self.call(client.outstanding)

    async def close(self) -> None:
        for client in self.clients:
            await self.close_client(client)
        if self.ns._listening.connected:
            await self.ns.close()
