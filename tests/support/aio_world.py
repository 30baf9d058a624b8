"""Asyncio route clients on a ``LoopThread`` against a ``FakeNamesrv`` on the reactor.

``AioWorld.run`` and ``call`` hand work to the loop and are awaited from a Twisted test;
clients made here run on a ``FakeClock`` each and are closed by ``close``.
"""

from __future__ import annotations

import random
from typing import Any

from client_push import aio
from client_push.config import ClientConfig
from support.aio_loop import FakeClock, LoopThread
from support.fake_namesrv import FakeNamesrv

PERIODIC_TIMERS = 3
"""Timers a started asyncio client always has armed: poll, expiry check, version check."""


class AioWorld:
    def __init__(self, loop: LoopThread) -> None:
        self.loop = loop
        self.run = loop.run
        self.call = loop.call
        self.ns = FakeNamesrv()
        self.ns.listen()
        self.clients: list[aio.RouteClient] = []
        self.clocks: dict[int, FakeClock] = {}

    async def client(self, **overrides: Any) -> aio.RouteClient:
        clock = FakeClock()
        config = ClientConfig(namesrv_addrs=(self.ns.addr,), **overrides)
        client = aio.RouteClient(config, clock=clock, rng=random.Random(3))
        self.clients.append(client)
        self.clocks[id(client)] = clock
        await self.run(client.__aenter__())
        return client

    def clock(self, client: aio.RouteClient) -> FakeClock:
        return self.clocks[id(client)]

    async def outstanding(self, client: aio.RouteClient) -> dict[str, int]:
        return await self.call(client.outstanding)

    async def close(self) -> None:
        for client in self.clients:
            await self.run(client.close())
        if self.ns._listening.connected:
            await self.ns.close()
