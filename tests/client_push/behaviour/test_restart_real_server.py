"""A restarted or cut-off name server, end to end: the real server and the real client.

Server and clients share one ``task.Clock`` (``route_cluster``); sockets are real loopback. The
server is stopped and a new one started on the same port with its start-up window on, as an
operator's restart would leave it; the brokers register again only when the test says so (as
real ones would at their next 30 s register). Whatever the new server does not know yet, the
client keeps the route it held; only a deletion drops it.
"""

from __future__ import annotations

from typing import Any

import pytest_twisted
from support.loopback_wait import until

from client_push.routes.client import RouteClient
from protocol.codes import RequestCode, ResponseCode

TOPIC = "TopicRestart"
A_ADDR = "10.0.0.1:10911"
B_ADDR = "10.0.0.2:10911"
WINDOW = {"wait_for_service_ms": 45_000}


def brokers_of(client: RouteClient, topic: str = TOPIC) -> set[str]:
    entry = client.cached_route(topic)
    if entry is None:
        return set()
    return {b.broker_name for b in entry.route.broker_datas if b.broker_addrs}


def is_stale(client: RouteClient, topic: str = TOPIC) -> bool:
    entry = client.cached_route(topic)
    return entry is not None and entry.stale


async def held_by_both(cluster: Any) -> tuple[Any, int, RouteClient]:
    ns, port = cluster.start_server()
    await cluster.broker(port, TOPIC, broker_name="broker-a", broker_addr=A_ADDR)
    await cluster.broker(port, TOPIC, broker_name="broker-b", broker_addr=B_ADDR)
    cluster.tick()
    client = cluster.client(port)
    client.add_listener(TOPIC, lambda e: None)
    await until(lambda: client.push_active, timeout=20)
    await until(lambda: brokers_of(client) == {"broker-a", "broker-b"}, timeout=20)
    return ns, port, client


async def restart(cluster: Any, ns: Any, port: int) -> Any:
    """Stop ``ns`` at once (no grace) and start a new server, window on, on its port."""
    for broker in list(cluster.brokers):
        if broker.connected:
            broker.transport.loseConnection()
    cluster.brokers.clear()
    await ns.stop(grace_ms=0)
    cluster.servers.remove(ns)
    fresh, bound = cluster.start_server(port, server=WINDOW)
    assert bound == port
    return fresh


async def reconnected(cluster: Any, client: RouteClient, server: Any) -> None:
    """Move the clock until ``client`` is subscribed at ``server`` again."""

    def subscribed() -> bool:
        cluster.tick()
        return client.push_active and server.subscriptions.total > 0

    await until(subscribed, timeout=30)


@pytest_twisted.ensureDeferred
async def test_a_restarted_server_that_knows_no_broker_yet_leaves_the_route_held(cluster):
    ns, port, client = await held_by_both(cluster)
    fresh = await restart(cluster, ns, port)
    await reconnected(cluster, client, fresh)
    # The new epoch's refetch is answered "not ready": the route stays, marked stale.
    await until(lambda: client.counters.get("untrusted_answers", 0) > 0, timeout=20)
    assert brokers_of(client) == {"broker-a", "broker-b"}
    assert is_stale(client)
    assert client.stats()["negative_entries"] == 0
    # Minutes of the window pass with no broker heard: the route never goes.
    for _ in range(30):
        cluster.tick()
    assert brokers_of(client) == {"broker-a", "broker-b"}
    # The brokers register at their next period: the client learns their route, fresh.
    await cluster.broker(port, TOPIC, broker_name="broker-a", broker_addr=A_ADDR)
    await cluster.broker(port, TOPIC, broker_name="broker-b", broker_addr=B_ADDR)

    def both_fresh() -> bool:
        cluster.tick()
        return brokers_of(client) == {"broker-a", "broker-b"} and not is_stale(client)

    await until(both_fresh, timeout=30)


@pytest_twisted.ensureDeferred
async def test_a_topic_deleted_after_the_restart_is_dropped_within_a_tick(cluster):
    ns, port, client = await held_by_both(cluster)
    fresh = await restart(cluster, ns, port)
    await reconnected(cluster, client, fresh)
    admin = await cluster.broker(port, TOPIC, broker_name="broker-a", broker_addr=A_ADDR)
    assert fresh.detector.version(TOPIC)[1]
    cluster.tick()
    await until(lambda: brokers_of(client) == {"broker-a"}, timeout=20)
    resp = await admin.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": TOPIC})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    cluster.tick()
    await until(lambda: client.cached_route(TOPIC) is None, timeout=20)


@pytest_twisted.ensureDeferred
async def test_brokers_cut_off_from_the_server_leave_the_route_held(cluster):
    ns, _port, client = await held_by_both(cluster)
    # A partition between the brokers and the name server: their connections close, the server
    # drops them (channel close), the topic has no broker there. The client keeps its route.
    for broker in list(cluster.brokers):
        broker.transport.loseConnection()
    await until(lambda: ns.registry.broker_count == 0, timeout=20)
    assert not ns.detector.version(TOPIC)[1]

    def kept_stale() -> bool:
        cluster.tick()
        return is_stale(client)

    await until(kept_stale, timeout=20)
    assert brokers_of(client), "the last non-empty route is kept"
    assert client.cached_route(TOPIC) is not None
    assert client.stats()["negative_entries"] == 0
