"""Inline routes end to end: Twisted RouteClients against the real name server over loopback.

The server counts every GET_ROUTEINFO_BY_TOPIC it answers (cache hits included), so "no
request" is the server's word, not the clients'.
"""

from __future__ import annotations

import pytest
import pytest_twisted
from support.loopback_wait import until

from client_push.routes.client import RouteClient
from client_push.routes.events import RouteEvent
from namesrv.server import NameServer
from protocol.codes import Perm

CLIENTS = 200


def server_gets(server: NameServer) -> int:
    return int(server.stats().get("handled.GET_ROUTEINFO_BY_TOPIC", 0))


def writable(client: RouteClient, topic: str) -> bool:
    entry = client.cached_route(topic)
    assert entry is not None
    return all(q.perm & Perm.WRITE for q in entry.route.queue_datas)


@pytest.mark.parametrize(
    ("inline", "cause", "requests"), [(True, "inline", 0), (False, "notify", CLIENTS)]
)
@pytest_twisted.ensureDeferred
async def test_two_hundred_clients_hold_the_new_route_with_no_request_when_inline(
    cluster, inline, cause, requests
):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "T")
    clients = [cluster.client(port, inline_routes=inline) for _ in range(CLIENTS)]
    learned: list[RouteEvent] = []
    for client in clients:
        client.add_listener("T", learned.append)
    await until(lambda: len(learned) == CLIENTS and all(c.push_active for c in clients), timeout=30)
    assert server.subscriptions.total == CLIENTS
    assert server.subscriptions.inline_connections == (CLIENTS if inline else 0)
    before = server_gets(server)

    await cluster.wipe(broker)
    cluster.tick()
    await until(lambda: not any(writable(c, "T") for c in clients), timeout=30)

    assert server_gets(server) - before == requests
    changes = learned[CLIENTS:]
    assert len(changes) == CLIENTS and {e.cause for e in changes} == {cause}
    version = changes[0].version
    assert all(c.cached_route("T").version == version for c in clients)  # type: ignore[union-attr]
    stats = server.stats()
    assert stats.get("inline_routes_sent", 0) == (CLIENTS if inline else 0)


@pytest_twisted.ensureDeferred
async def test_an_inline_client_and_a_refetching_client_on_one_server_both_learn_a_change(
    cluster,
):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "T")
    inline = cluster.client(port)  # inline routes are on by default
    plain = cluster.client(port, inline_routes=False)
    events: dict[str, list[RouteEvent]] = {"inline": [], "plain": []}
    inline.add_listener("T", events["inline"].append)
    plain.add_listener("T", events["plain"].append)
    await until(
        lambda: inline.push_active and plain.push_active and server.subscriptions.total == 2
    )
    await cluster.wipe(broker)
    cluster.tick()
    await until(lambda: len(events["inline"]) == 2 and len(events["plain"]) == 2)
    assert events["inline"][1].cause == "inline" and events["plain"][1].cause == "notify"
    assert events["inline"][1].version == events["plain"][1].version
    assert inline.cached_route("T").route == plain.cached_route("T").route  # type: ignore[union-attr]
    assert inline.counters["inline_installed"] == 1 and plain.counters["fetch.notify"] == 1
