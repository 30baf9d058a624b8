"""200 route clients of one kind (Twisted, asyncio, uvloop) subscribed to one topic over
loopback, against the real name server in this process: after one change, every client holds
the new route.

With inline routes the notification carries the route itself and the server counts zero
GET_ROUTEINFO_BY_TOPIC requests; with them off each client refetches once (one request per
client, counted by the server).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
import pytest_twisted
from support.aio_world import close_clients, started_client
from support.loopback_wait import until

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


SAFETY_NETS_OFF_MS = 3_600_000
"""The clients run on the real clock: their version checks and polls are put an hour away, so
on a slow machine none of them learns the change before its notification does."""


def client_config(port: int, inline: bool) -> ClientConfig:
    return ClientConfig(
        namesrv_addrs=(f"127.0.0.1:{port}",),
        inline_routes=inline,
        poll_interval_ms=SAFETY_NETS_OFF_MS,
        poll_interval_with_push_ms=SAFETY_NETS_OFF_MS,
        version_check_interval_ms=SAFETY_NETS_OFF_MS,
    )


@pytest_twisted.ensureDeferred
async def test_after_one_change_every_one_of_200_clients_holds_the_new_route(
    cluster, any_loop, inline_routes
):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, TOPIC)
    cluster.tick()
    config = client_config(port, inline_routes)
    clients = [await started_client(any_loop, config, random.Random(i)) for i in range(CLIENTS)]

    async def lookups() -> list[int]:
        return [(await c.get_route(TOPIC)).version for c in clients]

    def gets() -> int:
        return server.stats().get("handled.GET_ROUTEINFO_BY_TOPIC", 0)

    try:
        versions = await any_loop.run(lookups())
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
        causes: Counter[str] = Counter()
        for c in clients:
            causes.update({k: v for k, v in c.counters.items() if k.startswith("fetch.")})
        assert causes["fetch.notify"] == refetches, f"fetches by cause: {dict(causes)}"
        assert sum(c.counters["routes_inline"] for c in clients) == CLIENTS - refetches
    finally:
        await close_clients(any_loop, clients)
