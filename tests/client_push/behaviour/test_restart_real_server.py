"""A restarted or cut-off name server, end to end: the real server and the real client.

Server, client and the test's brokers live in the deterministic world
(``support.memory_world``: one virtual clock, TCP in memory). The server is stopped and a new
one started on the same port with its start-up window on, as an operator's restart would leave
it; the brokers register again only when the test says so (as real ones would at their next
30 s register). Whatever the new server does not know yet, the client keeps the route it held;
only a deletion drops it.
"""

from __future__ import annotations

from support.memory_world import MemoryWorld

from client_push.routes.client import RouteClient
from namesrv.server import NameServer
from protocol.codes import RequestCode, ResponseCode

TOPIC = "TopicRestart"
A_ADDR = "10.0.0.1:10911"
B_ADDR = "10.0.0.2:10911"
WINDOW = {"wait_for_service_ms": 45_000}
TICK_S = 1.0


def brokers_of(client: RouteClient, topic: str = TOPIC) -> set[str]:
    entry = client.cached_route(topic)
    if entry is None:
        return set()
    return {b.broker_name for b in entry.route.broker_datas if b.broker_addrs}


def is_stale(client: RouteClient, topic: str = TOPIC) -> bool:
    entry = client.cached_route(topic)
    return entry is not None and entry.stale


def held_by_both(w: MemoryWorld) -> tuple[NameServer, str, RouteClient]:
    ns, addr = w.server()
    w.broker_wire(addr, TOPIC, broker_name="broker-a", broker_addr=A_ADDR)
    w.broker_wire(addr, TOPIC, broker_name="broker-b", broker_addr=B_ADDR)
    w.advance(TICK_S)
    client = w.client(addr)
    client.add_listener(TOPIC, lambda e: None)
    w.settle()
    assert client.push_active
    assert brokers_of(client) == {"broker-a", "broker-b"}
    return ns, addr, client


def cut_brokers(w: MemoryWorld) -> None:
    """Close every test broker's connection."""
    for wire in w.wires:
        if wire.connected:
            wire.transport.loseConnection()  # type: ignore[union-attr]
    w.wires.clear()


def restart(w: MemoryWorld, ns: NameServer, addr: str) -> NameServer:
    """Stop ``ns`` at once (no grace) and start a new server, window on, on its port."""
    cut_brokers(w)
    w.wait(ns.stop(grace_ms=0))
    w.servers.remove(ns)
    fresh, bound = w.server(int(addr.rpartition(":")[2]), server=WINDOW)
    assert bound == addr
    return fresh


def reconnected(w: MemoryWorld, client: RouteClient, server: NameServer) -> None:
    """Move the clock until ``client`` is subscribed at ``server`` again."""
    w.run_until(lambda: client.push_active and server.subscriptions.total > 0, within=30.0)


def restarted_under_a_client(w: MemoryWorld) -> tuple[NameServer, str, RouteClient]:
    """A client holding the route of both brokers, its server restarted (window on) and the
    client subscribed at the new one."""
    ns, addr, client = held_by_both(w)
    fresh = restart(w, ns, addr)
    reconnected(w, client, fresh)
    return fresh, addr, client


def test_a_restarted_server_that_knows_no_broker_yet_leaves_the_route_held(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    _fresh, addr, client = restarted_under_a_client(w)
    # The new epoch's refetch is answered "not ready": the route stays, marked stale.
    w.settle()
    assert client.counters.get("untrusted_answers", 0) > 0
    assert brokers_of(client) == {"broker-a", "broker-b"}
    assert is_stale(client)
    assert client.stats()["negative_entries"] == 0
    # Minutes of the window pass with no broker heard: the route never goes.
    for _ in range(30):
        w.advance(TICK_S)
    assert brokers_of(client) == {"broker-a", "broker-b"}
    # The brokers register at their next period: the client learns their route, fresh.
    w.broker_wire(addr, TOPIC, broker_name="broker-a", broker_addr=A_ADDR)
    w.broker_wire(addr, TOPIC, broker_name="broker-b", broker_addr=B_ADDR)
    w.run_until(
        lambda: brokers_of(client) == {"broker-a", "broker-b"} and not is_stale(client),
        within=30.0,
    )


def test_a_topic_deleted_after_the_restart_is_dropped_within_a_tick(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    fresh, addr, client = restarted_under_a_client(w)
    admin = w.broker_wire(addr, TOPIC, broker_name="broker-a", broker_addr=A_ADDR)
    assert fresh.detector.version(TOPIC)[1]
    w.advance(TICK_S)
    assert brokers_of(client) == {"broker-a"}
    resp = w.call(admin, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": TOPIC})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    w.advance(TICK_S)
    assert client.cached_route(TOPIC) is None


def test_brokers_cut_off_from_the_server_leave_the_route_held(memory_world: MemoryWorld) -> None:
    w = memory_world
    ns, _addr, client = held_by_both(w)
    # A partition between the brokers and the name server: their connections close, the server
    # drops them (channel close), the topic has no broker there. The client keeps its route.
    cut_brokers(w)
    w.settle()
    assert ns.registry.broker_count == 0
    assert not ns.detector.version(TOPIC)[1]
    w.run_until(lambda: is_stale(client), within=20.0)
    assert brokers_of(client), "the last non-empty route is kept"
    assert client.cached_route(TOPIC) is not None
    assert client.stats()["negative_entries"] == 0
