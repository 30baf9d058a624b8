"""200 asyncio route clients subscribed to one topic over loopback, against the real name
server in this process: after one change, every client holds the new route.

With inline routes the notification carries the route itself and the server counts zero
GET_ROUTEINFO_BY_TOPIC requests; with them off each client refetches once (one request per
client, counted by the server).
"""

from __future__ import annotations

import asyncio
import random

import pytest
import pytest_twisted
from support.loopback_wait import until

from client_push import aio
from client_push.config import ClientConfig
from protocol.codes import Perm

CLIENTS = 200
TOPIC = "FleetTopic"


@pytest.fixture(
    params=[
        pytest.param(False, id="refetch"),
        pytest.param(True, id="inline"),
    ]
)
def inline_routes(request: pytest.FixtureRequest) -> bool:
    return request.param


def client_config(port: int, inline: bool) -> ClientConfig:
    return ClientConfig(namesrv_addrs=(f"127.0.0.1:{port}",), inline_routes=inline)


@pytest_twisted.ensureDeferred
async def test_after_one_change_every_one_of_200_clients_holds_the_new_route(
    cluster, loop_thread, inline_routes
):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, TOPIC)
    cluster.tick()
    clients = [
        aio.RouteClient(client_config(port, inline_routes), rng=random.Random(i))
        for i in range(CLIENTS)
    ]

    async def start_all() -> list[int]:
        for client in clients:
            await client.__aenter__()
        routes = await asyncio.gather(*(c.get_route(TOPIC) for c in clients))
        return [r.version for r in routes]

    def gets() -> int:
        return server.stats().get("handled.GET_ROUTEINFO_BY_TOPIC", 0)

    try:
        versions = await loop_thread.run(start_all())
        assert len(set(versions)) == 1
        before = versions[0]
        await until(lambda: all(c.push_active for c in clients), timeout=20.0)
        assert gets() == CLIENTS

        await cluster.wipe(broker)
        cluster.tick()
        await until(
            lambda: all(c.cached_route(TOPIC).version > before for c in clients), timeout=20.0
        )
        for client in clients:
            entry = client.cached_route(TOPIC)
            assert not any(q.perm & Perm.WRITE for q in entry.route.queue_datas)
        refetches = gets() - CLIENTS
        assert refetches == (0 if inline_routes else CLIENTS)
        assert sum(c.counters["fetch.notify"] for c in clients) == refetches
        assert sum(c.counters["routes_inline"] for c in clients) == CLIENTS - refetches
    finally:

        async def close_all() -> None:
            await asyncio.gather(*(c.close() for c in clients))

        await loop_thread.run(close_all())
