"""Route clients of each kind (Twisted, asyncio, uvloop) against the real name server over
loopback (``ClusterClients``).

Server and clients keep one fake time line: advancing it by the server's tick runs change
detection and the clients' timers alike. A test "broker" registers topics with REGISTER_BROKER
frames; route changes come from WIPE_WRITE_PERM_OF_BROKER, registers and deletes.
"""

from __future__ import annotations

import pytest
import pytest_twisted
from support.loopback_wait import until
from support.route_drivers import RouteDriver, all_answered

from client_push.errors import TopicNotExistError
from namesrv.server import NameServer
from protocol.codes import Perm, RequestCode, ResponseCode


def write_perm(d: RouteDriver, topic: str) -> bool:
    entry = d.client.cached_route(topic)
    assert entry is not None
    return all(q.perm & Perm.WRITE for q in entry.route.queue_datas)


def held_without_write(d: RouteDriver, topic: str) -> bool:
    """A route of ``topic`` is held and lost its write permission; False while none is held (a
    client that asked a restarted server before the broker registered holds the topic as absent
    until the next change's refetch)."""
    return d.client.cached_route(topic) is not None and not write_perm(d, topic)


def gets(server: NameServer) -> int:
    return server.processor.handled["GET_ROUTEINFO_BY_TOPIC"]


# -- push and poll --------------------------------------------------------------------------------


@pytest.mark.parametrize(("inline", "cause"), [(False, "notify"), (True, "inline")])
@pytest_twisted.ensureDeferred
async def test_watcher_learns_a_wipe_perm_within_one_tick_and_a_round_trip(
    cluster, clients, inline, cause
):
    _server, port = cluster.start_server()
    broker = await cluster.broker(port, "T")
    d = await clients.client(port, inline_routes=inline)
    await d.listen("T")
    events = d.events
    await until(lambda: len(events) == 1 and d.client.push_active)
    assert events[0].exists and write_perm(d, "T")
    await cluster.wipe(broker)
    await clients.tick()
    await until(lambda: len(events) == 2)
    assert events[1].cause == cause
    assert not write_perm(d, "T")
    assert not d.client.cached_route("T").publish_info.ok  # type: ignore[union-attr]


@pytest_twisted.ensureDeferred
async def test_with_push_disabled_on_the_server_the_change_is_seen_at_the_next_poll(
    cluster, clients
):
    _server, port = cluster.start_server(push={"enabled": False})
    broker = await cluster.broker(port, "T")
    d = await clients.client(port)
    await d.listen("T")
    events = d.events
    await until(lambda: len(events) == 1)
    await until(lambda: d.client.counters["subscribe_sent"] == 1)
    await d.barrier()
    assert not d.client.push_active
    await cluster.wipe(broker)
    await clients.advance(29.0)
    await d.barrier()
    assert len(events) == 1
    await clients.advance(1.0)
    await until(lambda: len(events) == 2)
    assert events[1].cause == "poll" and not write_perm(d, "T")
    assert d.client.counters["subscribe_sent"] == 1


@pytest.mark.parametrize(("inline", "refetches"), [(False, 3 + 3), (True, 0)])
@pytest_twisted.ensureDeferred
async def test_notifications_of_a_wipe_touching_many_topics_have_no_sequence_gap(
    cluster, clients, inline, refetches
):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "A", "B", "C")
    d = await clients.client(port, inline_routes=inline)
    for topic in "ABC":
        await d.get(topic)
    await until(lambda: d.client.push_active and d.client.stats()["subscribed"] == 3)
    await cluster.wipe(broker)
    await clients.tick()
    await until(lambda: not any(write_perm(d, t) for t in "ABC"))
    resp = await broker.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert resp.code == ResponseCode.SUCCESS
    await clients.tick()
    await until(lambda: all(write_perm(d, t) for t in "ABC"))
    assert d.client.counters["refetch_all.gap"] == 0
    assert gets(server) == 3 + refetches


# -- restarts and switching -----------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_restarted_name_server_is_reconnected_and_resubscribed_and_later_changes_seen(
    cluster, clients
):
    server, port = cluster.start_server()
    await cluster.broker(port, "T")
    d = await clients.client(port)
    await d.get("T")
    await until(lambda: d.client.push_active)
    await server.stop(grace_ms=0)
    await until(lambda: not d.client.connected)

    restarted, _ = cluster.start_server(port)
    broker = await cluster.broker(port, "T")
    await clients.advance(0.2)  # first reconnect delay is at most reconnect_initial_ms
    await until(lambda: d.client.connected and d.client.push_active)
    assert restarted.subscriptions.total == 1
    await until(lambda: gets(restarted) == 1)  # new epoch: the held route is refetched
    await cluster.wipe(broker)
    await clients.tick()
    await until(lambda: held_without_write(d, "T"))


@pytest_twisted.ensureDeferred
async def test_stopping_the_chosen_of_two_name_servers_moves_the_client_with_its_subscriptions(
    cluster, clients
):
    first, port1 = cluster.start_server()
    second, port2 = cluster.start_server()
    brokers = {
        port1: await cluster.broker(port1, "T"),
        port2: await cluster.broker(port2, "T"),
    }
    d = await clients.client(port1, port2)
    await d.get("T")
    await until(lambda: d.client.push_active)
    chosen, other = (first, second) if d.client.namesrv.endswith(f":{port1}") else (second, first)
    other_port = port2 if chosen is first else port1
    assert chosen.subscriptions.total == 1 and other.subscriptions.total == 0

    await chosen.stop(grace_ms=0)
    await until(lambda: d.client.connected and d.client.namesrv.endswith(f":{other_port}"))
    await until(lambda: other.subscriptions.total == 1)
    await cluster.wipe(brokers[other_port])
    await clients.tick()
    await until(lambda: held_without_write(d, "T"))


@pytest_twisted.ensureDeferred
async def test_go_away_with_grace_moves_new_requests_while_the_old_server_still_serves(
    cluster, clients
):
    second, port2 = cluster.start_server()
    first, port1 = cluster.start_server(
        server={"shutdown_grace_ms": 5_000, "go_away_alternatives": [f"127.0.0.1:{port2}"]}
    )
    await cluster.broker(port1, "T")
    await cluster.broker(port2, "T", "U")
    d = await clients.client(port1)
    await d.get("T")
    await until(lambda: d.client.push_active)
    stopped = first.stop()
    await until(lambda: d.client.namesrv == f"127.0.0.1:{port2}" and d.client.connected)
    entry = await d.get("U")
    assert entry.version >= 1 and gets(second) >= 1
    await until(lambda: second.subscriptions.total == 2)
    await clients.advance(5.0)
    await stopped


# -- expiry ---------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_idle_topic_leaves_the_cache_and_the_servers_subscription_table(cluster, clients):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "idle", "busy")
    # The clock jumps 10 s at a time: a request in flight at a jump must not time out there.
    d = await clients.client(port, request_timeout_ms=60_000)
    await d.get("idle")
    await d.get("busy")
    await until(lambda: server.subscriptions.total == 2)
    for step in range(30):  # 300 s of fake time, "busy" looked up every 10 s
        if step % 3 == 0:  # the broker's heartbeat, every 30 s
            await cluster.register(broker, "idle", "busy")
        await clients.advance(10.0)
        await d.get("busy")
        await all_answered(d)  # polls and version checks answered before the clock jumps again
    await until(lambda: server.subscriptions.total == 1)
    assert d.client.counters["fetch_failed"] == d.client.counters["subscribe_failed"] == 0
    assert d.client.held_topics() == ["busy"]
    assert d.client.cached_route("idle") is None
    assert server.subscriptions.topic_count == 1
    assert not server.subscriptions.subscribers("idle")


# -- negative cache and first lookups -------------------------------------------------------------


@pytest.mark.parametrize(("inline", "refetches"), [(False, 1), (True, 0)])
@pytest_twisted.ensureDeferred
async def test_thousand_lookups_of_an_absent_topic_send_one_request_and_creation_clears_it(
    cluster, clients, inline, refetches
):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "T")
    d = await clients.client(port, inline_routes=inline)
    await until(lambda: d.client.connected)
    for _ in range(1000):
        with pytest.raises(TopicNotExistError):
            await d.get("NEW")
    assert gets(server) == 1
    await until(lambda: server.subscriptions.total == 1)

    await cluster.register(broker, "T", "NEW")
    await clients.tick()  # within the 30 s TTL: only the CREATED notification can clear it
    await until(lambda: d.client.cached_route("NEW") is not None)
    entry = await d.get("NEW")
    assert entry.publish_info.ok
    assert gets(server) == 1 + refetches


@pytest_twisted.ensureDeferred
async def test_hundred_concurrent_first_lookups_send_one_route_request(cluster, clients):
    server, port = cluster.start_server()
    await cluster.broker(port, "T")
    d = await clients.client(port)
    await until(lambda: d.client.connected)
    outcomes: list[str] = []
    await d.ask(["T"] * 100, outcomes)
    await until(lambda: len(outcomes) == 100)
    assert outcomes == ["ok"] * 100
    await until(lambda: d.client.push_active)
    await d.barrier()
    assert gets(server) == 1


@pytest_twisted.ensureDeferred
async def test_deleted_topic_is_dropped_and_then_fails_fast(cluster, clients):
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "T")
    d = await clients.client(port)
    await d.listen("T")
    events = d.events
    await until(lambda: len(events) == 1 and d.client.push_active)
    resp = await broker.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"})
    assert resp.code == ResponseCode.SUCCESS
    await clients.tick()
    await until(lambda: len(events) == 2)
    assert not events[1].exists and events[1].cause == "notify"
    with pytest.raises(TopicNotExistError):
        await d.get("T")
    assert gets(server) == 1
