"""200 route clients subscribed to one topic, against the real name server, in the
deterministic world (``support.memory_world``): after one change, within one tick, every client
holds the new route.

With inline routes the notification carries the route itself and the server counts zero
GET_ROUTEINFO_BY_TOPIC requests; with them off each client refetches once (one request per
client, counted by the server).
"""

from __future__ import annotations

from collections import Counter

import pytest
from support.memory_world import MemoryWorld

from protocol.codes import Perm

CLIENTS = 200
TOPIC = "FleetTopic"
TICK_S = 1.0


@pytest.fixture(
    params=[
        pytest.param(False, id="refetch"),
        pytest.param(True, id="inline"),
    ]
)
def inline_routes(request: pytest.FixtureRequest) -> bool:
    return request.param


SAFETY_NETS_OFF_MS = 3_600_000
"""Version checks and polls an hour away: a jittered one falling within the tick would learn the
change before its notification does, and the causes counted below would not be the push's."""
SAFETY_NETS_OFF = {
    "poll_interval_ms": SAFETY_NETS_OFF_MS,
    "poll_interval_with_push_ms": SAFETY_NETS_OFF_MS,
    "version_check_interval_ms": SAFETY_NETS_OFF_MS,
}


def test_after_one_change_every_one_of_200_clients_holds_the_new_route(
    memory_world: MemoryWorld, inline_routes: bool
) -> None:
    w = memory_world
    server, addr = w.server()
    broker = w.broker_wire(addr, TOPIC)
    w.advance(TICK_S)
    clients = [
        w.client(addr, seed=i, inline_routes=inline_routes, **SAFETY_NETS_OFF)
        for i in range(CLIENTS)
    ]

    def gets() -> int:
        return server.stats().get("handled.GET_ROUTEINFO_BY_TOPIC", 0)

    versions = [w.run(c.get_route(TOPIC), within=0.0).version for c in clients]
    assert len(set(versions)) == 1
    before = versions[0]
    w.settle()
    assert all(c.push_active for c in clients)
    assert gets() == CLIENTS

    w.wipe(broker)
    w.advance(TICK_S)
    assert all(c.cached_route(TOPIC).version > before for c in clients)  # type: ignore[union-attr]
    for client in clients:
        entry = client.cached_route(TOPIC)
        assert entry is not None
        assert not any(q.perm & Perm.WRITE for q in entry.route.queue_datas)
    refetches = gets() - CLIENTS
    assert refetches == (0 if inline_routes else CLIENTS)
    causes: Counter[str] = Counter()
    for c in clients:
        causes.update({k: v for k, v in c.counters.items() if k.startswith("fetch.")})
    assert causes["fetch.notify"] == refetches, f"fetches by cause: {dict(causes)}"
    assert sum(c.counters["routes_inline"] for c in clients) == CLIENTS - refetches
