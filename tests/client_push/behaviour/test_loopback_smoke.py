"""Smoke over real loopback, once per event loop (Twisted, asyncio, uvloop): a route client
connects to the real name server, subscribes, hears a change notified and refetches the route.

What the behaviour is lives in the deterministic world (``test_route_e2e``); these check only
that each loop's adapter carries it over real sockets. Timers run on a fake clock the test
moves; the waits are for sockets alone.
"""

from __future__ import annotations

import pytest_twisted
from support.loopback_wait import until
from support.route_drivers import RouteDriver

from protocol.codes import Perm

SOCKET_WAIT_S = 30.0
"""How long the sockets of a busy machine may take; the clock does not move meanwhile."""


def write_perm(d: RouteDriver, topic: str) -> bool:
    entry = d.client.cached_route(topic)
    assert entry is not None
    return all(q.perm & Perm.WRITE for q in entry.route.queue_datas)


@pytest_twisted.ensureDeferred
async def test_connect_subscribe_notify_and_refetch_over_loopback(cluster, clients):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "T")
    d = await clients.client(port, inline_routes=False)
    await d.listen("T")
    events = d.events
    await until(lambda: len(events) == 1 and d.client.push_active, SOCKET_WAIT_S)
    assert events[0].exists and write_perm(d, "T")
    await until(lambda: server.subscriptions.total == 1, SOCKET_WAIT_S)
    await cluster.wipe(broker)
    await clients.tick()
    await until(lambda: len(events) == 2, SOCKET_WAIT_S)
    assert events[1].cause == "notify"
    assert not write_perm(d, "T")
    assert server.processor.handled["GET_ROUTEINFO_BY_TOPIC"] == 2
