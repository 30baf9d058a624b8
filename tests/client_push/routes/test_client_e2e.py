"""RouteClient against the real name server over loopback.

Server and client share one ``task.Clock``: advancing it by the server's tick runs change
detection and the client's timers alike. A test "broker" registers topics with REGISTER_BROKER
frames; route changes come from WIPE_WRITE_PERM_OF_BROKER, registers and deletes.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from support.loopback_wait import until
from support.route_drivers import barrier
from twisted.internet import defer

from client_push.errors import TopicNotExistError
from client_push.routes.client import RouteClient
from client_push.routes.events import RouteEvent
from namesrv.server import NameServer
from protocol.codes import Perm, RequestCode, ResponseCode


def get(client: RouteClient, topic: str) -> defer.Deferred[Any]:
    return defer.ensureDeferred(client.get_route(topic))


def write_perm(client: RouteClient, topic: str) -> bool:
    entry = client.cached_route(topic)
    assert entry is not None
    return all(q.perm & Perm.WRITE for q in entry.route.queue_datas)


def gets(server: NameServer) -> int:
    return server.processor.handled["GET_ROUTEINFO_BY_TOPIC"]


# -- push and poll --------------------------------------------------------------------------------


@pytest.mark.parametrize(("inline", "cause"), [(False, "notify"), (True, "inline")])
@pytest_twisted.ensureDeferred
async def test_watcher_learns_a_wipe_perm_within_one_tick_and_a_round_trip(cluster, inline, cause):
    _server, port = cluster.start_server()
    broker = await cluster.broker(port, "T")
    client = cluster.client(port, inline_routes=inline)
    events: list[RouteEvent] = []
    client.add_listener("T", events.append)
    await until(lambda: len(events) == 1 and client.push_active)
    assert events[0].exists and write_perm(client, "T")
    await cluster.wipe(broker)
    cluster.tick()
    await until(lambda: len(events) == 2)
    assert events[1].cause == cause
    assert not write_perm(client, "T")
    assert not client.cached_route("T").publish_info.ok  # type: ignore[union-attr]


@pytest_twisted.ensureDeferred
async def test_with_push_disabled_on_the_server_the_change_is_seen_at_the_next_poll(cluster):
    _server, port = cluster.start_server(push={"enabled": False})
    broker = await cluster.broker(port, "T")
    client = cluster.client(port)
    events: list[RouteEvent] = []
    client.add_listener("T", events.append)
    await until(lambda: len(events) == 1)
    await until(lambda: client.counters["subscribe_sent"] == 1)
    await barrier(client)
    assert not client.push_active
    await cluster.wipe(broker)
    cluster.clock.advance(29.0)
    await barrier(client)
    assert len(events) == 1
    cluster.clock.advance(1.0)
    await until(lambda: len(events) == 2)
    assert events[1].cause == "poll" and not write_perm(client, "T")
    assert client.counters["subscribe_sent"] == 1


@pytest.mark.parametrize(("inline", "refetches"), [(False, 3 + 3), (True, 0)])
@pytest_twisted.ensureDeferred
async def test_notifications_of_a_wipe_touching_many_topics_have_no_sequence_gap(
    cluster, inline, refetches
):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "A", "B", "C")
    client = cluster.client(port, inline_routes=inline)
    for topic in "ABC":
        await get(client, topic)
    await until(lambda: client.push_active and client.stats()["subscribed"] == 3)
    await cluster.wipe(broker)
    cluster.tick()
    await until(lambda: not any(write_perm(client, t) for t in "ABC"))
    resp = await broker.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert resp.code == ResponseCode.SUCCESS
    cluster.tick()
    await until(lambda: all(write_perm(client, t) for t in "ABC"))
    assert client.counters["refetch_all.gap"] == 0
    assert gets(server) == 3 + refetches


# -- restarts and switching -----------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_restarted_name_server_is_reconnected_and_resubscribed_and_later_changes_seen(
    cluster,
):
    server, port = cluster.start_server()
    await cluster.broker(port, "T")
    client = cluster.client(port)
    await get(client, "T")
    await until(lambda: client.push_active)
    await server.stop(grace_ms=0)
    await until(lambda: not client.connected)

    restarted, _ = cluster.start_server(port)
    broker = await cluster.broker(port, "T")
    cluster.clock.advance(0.2)  # first reconnect delay is at most reconnect_initial_ms
    await until(lambda: client.connected and client.push_active)
    assert restarted.subscriptions.total == 1
    await until(lambda: gets(restarted) == 1)  # new epoch: the held route is refetched
    await cluster.wipe(broker)
    cluster.tick()
    await until(lambda: not write_perm(client, "T"))


@pytest_twisted.ensureDeferred
async def test_stopping_the_chosen_of_two_name_servers_moves_the_client_with_its_subscriptions(
    cluster,
):
    first, port1 = cluster.start_server()
    second, port2 = cluster.start_server()
    brokers = {
        port1: await cluster.broker(port1, "T"),
        port2: await cluster.broker(port2, "T"),
    }
    client = cluster.client(port1, port2)
    await get(client, "T")
    await until(lambda: client.push_active)
    chosen, other = (first, second) if client.namesrv.endswith(f":{port1}") else (second, first)
    other_port = port2 if chosen is first else port1
    assert chosen.subscriptions.total == 1 and other.subscriptions.total == 0

    await chosen.stop(grace_ms=0)
    await until(lambda: client.connected and client.namesrv.endswith(f":{other_port}"))
    await until(lambda: other.subscriptions.total == 1)
    await cluster.wipe(brokers[other_port])
    cluster.tick()
    await until(lambda: not write_perm(client, "T"))


@pytest_twisted.ensureDeferred
async def test_go_away_with_grace_moves_new_requests_while_the_old_server_still_serves(cluster):
    second, port2 = cluster.start_server()
    first, port1 = cluster.start_server(
        server={"shutdown_grace_ms": 5_000, "go_away_alternatives": [f"127.0.0.1:{port2}"]}
    )
    await cluster.broker(port1, "T")
    await cluster.broker(port2, "T", "U")
    client = cluster.client(port1)
    await get(client, "T")
    await until(lambda: client.push_active)
    stopped = first.stop()
    await until(lambda: client.namesrv == f"127.0.0.1:{port2}" and client.connected)
    entry = await get(client, "U")
    assert entry.version >= 1 and gets(second) >= 1
    await until(lambda: second.subscriptions.total == 2)
    cluster.clock.advance(5.0)
    await stopped


# -- expiry ---------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_idle_topic_leaves_the_cache_and_the_servers_subscription_table(cluster):
    server, port = cluster.start_server()
    await cluster.broker(port, "idle", "busy")
    client = cluster.client(port)
    await get(client, "idle")
    await get(client, "busy")
    await until(lambda: server.subscriptions.total == 2)
    for _ in range(30):  # 300 s of fake time, "busy" looked up every 10 s
        cluster.clock.advance(10.0)
        await get(client, "busy")
    await until(lambda: server.subscriptions.total == 1)
    assert client.held_topics() == ["busy"]
    assert client.cached_route("idle") is None
    assert server.subscriptions.topic_count == 1
    assert not server.subscriptions.subscribers("idle")


# -- negative cache and first lookups -------------------------------------------------------------


@pytest.mark.parametrize(("inline", "refetches"), [(False, 1), (True, 0)])
@pytest_twisted.ensureDeferred
async def test_thousand_lookups_of_an_absent_topic_send_one_request_and_creation_clears_it(
    cluster, inline, refetches
):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "T")
    client = cluster.client(port, inline_routes=inline)
    await until(lambda: client.connected)
    for _ in range(1000):
        with pytest.raises(TopicNotExistError):
            await get(client, "NEW")
    assert gets(server) == 1
    await until(lambda: server.subscriptions.total == 1)

    await cluster.register(broker, "T", "NEW")
    cluster.tick()  # within the 30 s TTL: only the CREATED notification can clear it
    await until(lambda: client.cached_route("NEW") is not None)
    entry = await get(client, "NEW")
    assert entry.publish_info.ok
    assert gets(server) == 1 + refetches


@pytest_twisted.ensureDeferred
async def test_hundred_concurrent_first_lookups_send_one_route_request(cluster):
    server, port = cluster.start_server()
    await cluster.broker(port, "T")
    client = cluster.client(port)
    await until(lambda: client.connected)
    results = await defer.gatherResults([get(client, "T") for _ in range(100)])
    assert len({id(r) for r in results}) == 1
    await until(lambda: client.push_active)
    await barrier(client)
    assert gets(server) == 1


@pytest_twisted.ensureDeferred
async def test_deleted_topic_is_dropped_and_then_fails_fast(cluster):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "T")
    client = cluster.client(port)
    events: list[RouteEvent] = []
    client.add_listener("T", events.append)
    await until(lambda: len(events) == 1 and client.push_active)
    resp = await broker.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"})
    assert resp.code == ResponseCode.SUCCESS
    cluster.tick()
    await until(lambda: len(events) == 2)
    assert not events[1].exists and events[1].cause == "notify"
    with pytest.raises(TopicNotExistError):
        await get(client, "T")
    assert gets(server) == 1
