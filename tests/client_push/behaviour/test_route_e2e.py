"""The route client against the real name server, in the deterministic world
(``support.memory_world``): server, client and the test's broker connections on one virtual
clock and one network in memory.

Advancing the clock by the server's tick runs change detection and the client's timers alike;
``settle`` delivers every frame written and runs what that sets off without moving the clock,
so an assertion after it holds whatever the machine's load. A test "broker" registers topics
with REGISTER_BROKER frames; route changes come from WIPE_WRITE_PERM_OF_BROKER, registers and
deletes. The same round trips over real loopback, once per event loop: ``test_loopback_smoke``.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.memory_world import MemoryWorld

from client_push.errors import TopicNotExistError
from client_push.routes.client import RouteClient
from namesrv.server import NameServer
from protocol.codes import Perm, RequestCode, ResponseCode

TICK_S = 1.0


def write_perm(client: RouteClient, topic: str) -> bool:
    entry = client.cached_route(topic)
    assert entry is not None
    return all(q.perm & Perm.WRITE for q in entry.route.queue_datas)


def held_without_write(client: RouteClient, topic: str) -> bool:
    """A route of ``topic`` is held and lost its write permission; False while none is held (a
    client that asked a restarted server before the broker registered holds the topic as absent
    until the next change's refetch)."""
    return client.cached_route(topic) is not None and not write_perm(client, topic)


def gets(server: NameServer) -> int:
    return server.processor.handled["GET_ROUTEINFO_BY_TOPIC"]


def pushed_client(w: MemoryWorld, *addrs: str) -> RouteClient:
    """A client of ``addrs`` that holds "T" with push acknowledged."""
    client = w.client(*addrs)
    w.run(client.get_route("T"))
    w.settle()
    assert client.push_active
    return client


def port_of(addr: str) -> int:
    return int(addr.rpartition(":")[2])


# -- push and poll --------------------------------------------------------------------------------


@pytest.mark.parametrize(("inline", "cause"), [(False, "notify"), (True, "inline")])
def test_watcher_learns_a_wipe_perm_within_one_tick_and_a_round_trip(
    memory_world: MemoryWorld, inline: bool, cause: str
) -> None:
    w = memory_world
    _server, addr = w.server()
    broker = w.broker_wire(addr, "T")
    client = w.client(addr, inline_routes=inline)
    events: list[Any] = []
    client.add_listener("T", events.append)
    w.settle()
    assert len(events) == 1 and client.push_active
    assert events[0].exists and write_perm(client, "T")
    w.wipe(broker)
    w.advance(TICK_S)
    assert len(events) == 2
    assert events[1].cause == cause
    assert not write_perm(client, "T")
    assert not client.cached_route("T").publish_info.ok  # type: ignore[union-attr]


def test_with_push_disabled_on_the_server_the_change_is_seen_at_the_next_poll(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    _server, addr = w.server(push={"enabled": False})
    broker = w.broker_wire(addr, "T")
    client = w.client(addr)
    events: list[Any] = []
    client.add_listener("T", events.append)
    w.settle()
    assert len(events) == 1
    assert client.counters["subscribe_sent"] == 1
    assert not client.push_active
    w.wipe(broker)
    w.advance(29.0)
    assert len(events) == 1
    w.advance(1.0)
    assert len(events) == 2
    assert events[1].cause == "poll" and not write_perm(client, "T")
    assert client.counters["subscribe_sent"] == 1


@pytest.mark.parametrize(("inline", "refetches"), [(False, 3 + 3), (True, 0)])
def test_notifications_of_a_wipe_touching_many_topics_have_no_sequence_gap(
    memory_world: MemoryWorld, inline: bool, refetches: int
) -> None:
    w = memory_world
    server, addr = w.server()
    broker = w.broker_wire(addr, "A", "B", "C")
    client = w.client(addr, inline_routes=inline)
    for topic in "ABC":
        w.run(client.get_route(topic))
    w.settle()
    assert client.push_active and client.stats()["subscribed"] == 3
    w.wipe(broker)
    w.advance(TICK_S)
    assert not any(write_perm(client, t) for t in "ABC")
    resp = w.call(broker, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert resp.code == ResponseCode.SUCCESS
    w.advance(TICK_S)
    assert all(write_perm(client, t) for t in "ABC")
    assert client.counters["refetch_all.gap"] == 0
    assert gets(server) == 3 + refetches


# -- restarts and switching -----------------------------------------------------------------------


def test_restarted_name_server_is_reconnected_and_resubscribed_and_later_changes_seen(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    server, addr = w.server()
    w.broker_wire(addr, "T")
    client = pushed_client(w, addr)
    w.wait(server.stop(grace_ms=0))
    w.settle()
    assert not client.connected

    restarted, _ = w.server(port_of(addr))
    broker = w.broker_wire(addr, "T")
    w.advance(0.2)  # first reconnect delay is at most reconnect_initial_ms
    assert client.connected and client.push_active
    assert restarted.subscriptions.total == 1
    assert gets(restarted) == 1  # new epoch: the held route is refetched
    w.wipe(broker)
    w.advance(TICK_S)
    assert held_without_write(client, "T")


def test_stopping_the_chosen_of_two_name_servers_moves_the_client_with_its_subscriptions(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    first, addr1 = w.server()
    second, addr2 = w.server()
    brokers = {addr1: w.broker_wire(addr1, "T"), addr2: w.broker_wire(addr2, "T")}
    client = pushed_client(w, addr1, addr2)
    chosen, other = (first, second) if client.namesrv == addr1 else (second, first)
    other_addr = addr2 if chosen is first else addr1
    assert chosen.subscriptions.total == 1 and other.subscriptions.total == 0

    w.wait(chosen.stop(grace_ms=0))
    w.run_until(lambda: client.connected and client.namesrv == other_addr, within=1.0)
    w.settle()
    assert other.subscriptions.total == 1
    w.wipe(brokers[other_addr])
    w.advance(TICK_S)
    assert held_without_write(client, "T")


def test_go_away_with_grace_moves_new_requests_while_the_old_server_still_serves(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    second, addr2 = w.server()
    first, addr1 = w.server(server={"shutdown_grace_ms": 5_000, "go_away_alternatives": [addr2]})
    w.broker_wire(addr1, "T")
    w.broker_wire(addr2, "T", "U")
    client = pushed_client(w, addr1)
    stopped = first.stop()
    w.settle()  # the GoAway moves the client at once, within the grace period
    assert client.namesrv == addr2 and client.connected
    entry = w.run(client.get_route("U"), within=0.0)
    assert entry.version >= 1 and gets(second) >= 1
    w.settle()
    assert second.subscriptions.total == 2
    assert not stopped.called
    w.advance(5.0)
    assert stopped.called


# -- expiry ---------------------------------------------------------------------------------------


def test_idle_topic_leaves_the_cache_and_the_servers_subscription_table(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    server, addr = w.server()
    broker = w.broker_wire(addr, "idle", "busy")
    client = w.client(addr)
    w.run(client.get_route("idle"))
    w.run(client.get_route("busy"))
    w.settle()
    assert server.subscriptions.total == 2
    for step in range(30):  # 300 s of the clock, "busy" looked up every 10 s
        if step % 3 == 0:  # the broker's heartbeat, every 30 s
            w.register(broker, "idle", "busy")
        w.advance(10.0)
        w.run(client.get_route("busy"))
    w.settle()
    assert server.subscriptions.total == 1
    assert client.counters["fetch_failed"] == client.counters["subscribe_failed"] == 0
    assert client.held_topics() == ["busy"]
    assert client.cached_route("idle") is None
    assert server.subscriptions.topic_count == 1
    assert not server.subscriptions.subscribers("idle")


# -- negative cache and first lookups -------------------------------------------------------------


@pytest.mark.parametrize(("inline", "refetches"), [(False, 1), (True, 0)])
def test_thousand_lookups_of_an_absent_topic_send_one_request_and_creation_clears_it(
    memory_world: MemoryWorld, inline: bool, refetches: int
) -> None:
    w = memory_world
    server, addr = w.server()
    broker = w.broker_wire(addr, "T")
    client = w.client(addr, inline_routes=inline)
    w.settle()
    assert client.connected
    for _ in range(1000):
        with pytest.raises(TopicNotExistError):
            w.run(client.get_route("NEW"))
    assert gets(server) == 1
    w.settle()
    assert server.subscriptions.total == 1

    w.register(broker, "T", "NEW")
    w.advance(TICK_S)  # within the 30 s TTL: only the CREATED notification can clear it
    assert client.cached_route("NEW") is not None
    entry = w.run(client.get_route("NEW"), within=0.0)
    assert entry.publish_info.ok
    assert gets(server) == 1 + refetches


def test_hundred_concurrent_first_lookups_send_one_route_request(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    server, addr = w.server()
    w.broker_wire(addr, "T")
    client = w.client(addr)
    w.settle()
    assert client.connected
    outcomes: list[str] = []
    for _ in range(100):
        w.start(client.get_route("T")).addCallbacks(
            lambda _: outcomes.append("ok"), lambda f: outcomes.append(f.type.__name__)
        )
    w.settle()
    assert outcomes == ["ok"] * 100
    assert client.push_active
    assert gets(server) == 1


def test_deleted_topic_is_dropped_and_then_fails_fast(memory_world: MemoryWorld) -> None:
    w = memory_world
    server, addr = w.server()
    broker = w.broker_wire(addr, "T")
    client = w.client(addr)
    events: list[Any] = []
    client.add_listener("T", events.append)
    w.settle()
    assert len(events) == 1 and client.push_active
    resp = w.call(broker, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"})
    assert resp.code == ResponseCode.SUCCESS
    w.advance(TICK_S)
    assert len(events) == 2
    assert not events[1].exists and events[1].cause == "notify"
    with pytest.raises(TopicNotExistError):
        w.run(client.get_route("T"), within=0.0)
    assert gets(server) == 1
