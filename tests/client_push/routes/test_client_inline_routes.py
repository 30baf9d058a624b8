"""Inline routes end to end: Twisted RouteClients against the real name server, in the
deterministic world (``support.memory_world``: one virtual clock, TCP in memory).

The server counts every GET_ROUTEINFO_BY_TOPIC it answers (cache hits included), so "no
request" is the server's word, not the clients'. A change is learned within one tick: the
clock moves by the tick and no more.
"""

from __future__ import annotations

import pytest
from support.memory_world import MemoryWorld

from client_push.routes.client import RouteClient
from client_push.routes.events import RouteEvent
from namesrv.server import NameServer
from protocol.codes import Perm

CLIENTS = 200
TICK_S = 1.0


def server_gets(server: NameServer) -> int:
    return int(server.stats().get("handled.GET_ROUTEINFO_BY_TOPIC", 0))


def writable(client: RouteClient, topic: str) -> bool:
    entry = client.cached_route(topic)
    assert entry is not None
    return all(q.perm & Perm.WRITE for q in entry.route.queue_datas)


@pytest.mark.parametrize(
    ("inline", "cause", "requests"), [(True, "inline", 0), (False, "notify", CLIENTS)]
)
def test_two_hundred_clients_hold_the_new_route_with_no_request_when_inline(
    memory_world: MemoryWorld, inline, cause, requests
):
    w = memory_world
    server, addr = w.server()
    broker = w.broker_wire(addr, "T")
    clients = [w.client(addr, inline_routes=inline) for _ in range(CLIENTS)]
    learned: list[RouteEvent] = []
    for client in clients:
        client.add_listener("T", learned.append)
    w.settle()
    assert len(learned) == CLIENTS and all(c.push_active for c in clients)
    assert server.subscriptions.total == CLIENTS
    assert server.subscriptions.inline_connections == (CLIENTS if inline else 0)
    before = server_gets(server)

    w.wipe(broker)
    w.advance(TICK_S)
    assert not any(writable(c, "T") for c in clients)

    assert server_gets(server) - before == requests
    changes = learned[CLIENTS:]
    assert len(changes) == CLIENTS and {e.cause for e in changes} == {cause}
    version = changes[0].version
    assert all(c.cached_route("T").version == version for c in clients)  # type: ignore[union-attr]
    stats = server.stats()
    assert stats.get("inline_routes_sent", 0) == (CLIENTS if inline else 0)


def test_an_inline_client_and_a_refetching_client_on_one_server_both_learn_a_change(
    memory_world: MemoryWorld,
):
    w = memory_world
    server, addr = w.server()
    broker = w.broker_wire(addr, "T")
    inline = w.client(addr)  # inline routes are on by default
    plain = w.client(addr, inline_routes=False)
    events: dict[str, list[RouteEvent]] = {"inline": [], "plain": []}
    inline.add_listener("T", events["inline"].append)
    plain.add_listener("T", events["plain"].append)
    w.settle()
    assert inline.push_active and plain.push_active and server.subscriptions.total == 2
    w.wipe(broker)
    w.advance(TICK_S)
    assert len(events["inline"]) == 2 and len(events["plain"]) == 2
    assert events["inline"][1].cause == "inline" and events["plain"][1].cause == "notify"
    assert events["inline"][1].version == events["plain"][1].version
    assert inline.cached_route("T").route == plain.cached_route("T").route  # type: ignore[union-attr]
    assert inline.counters["inline_installed"] == 1 and plain.counters["fetch.notify"] == 1
