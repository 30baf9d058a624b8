"""Broker departures and arrivals reach RouteClients.

Server, clients and the test's broker connections live in the deterministic world
(``support.memory_world``): one virtual clock, TCP in memory. "Within a tick + 100 ms" means
the clock moved by at most that while the clients learned it; after each move the world has
settled, so every request a client sent has been handled and every notification read, and
request counts are read from the server's counters and the clients'.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.fake_broker import unregister_request
from support.memory_world import MemoryWorld
from support.server_fixtures import FakeSampler

from client_push.routes.client import BrokerEvent, RouteClient, RouteEvent
from namesrv.server import NameServer

TOPICS = [f"T{i}" for i in range(10)]
A_ADDR = "10.0.0.1:10911"
B_ADDR = "10.0.0.2:10911"
TICK_S = 1.0


def gets(server: NameServer) -> int:
    return server.stats().get("handled.GET_ROUTEINFO_BY_TOPIC", 0)


def client_fetches(clients: list[RouteClient]) -> int:
    return sum(v for c in clients for k, v in c.counters.items() if k.startswith("fetch."))


def holds(client: RouteClient, broker: str, topics: list[str] = TOPICS) -> bool:
    """Whether every topic's held route lists ``broker`` (with queues and an address)."""
    for topic in topics:
        entry = client.cached_route(topic)
        if entry is None:
            return False
        names = {q.broker_name for q in entry.route.queue_datas}
        addrs = {b.broker_name for b in entry.route.broker_datas if b.broker_addrs}
        if broker not in names or broker not in addrs:
            return False
    return True


def holds_without(client: RouteClient, broker: str, topics: list[str] = TOPICS) -> bool:
    for topic in topics:
        entry = client.cached_route(topic)
        if entry is None:
            return False
        if any(q.broker_name == broker for q in entry.route.queue_datas):
            return False
        if any(b.broker_name == broker for b in entry.route.broker_datas):
            return False
    return True


def quiet(server: NameServer, clients: list[RouteClient]) -> bool:
    """Nothing is in flight between the server and ``clients``: every notification the server
    sent has been read and every request a client sent has been answered."""
    read = sum(c.counters["notify_received"] for c in clients)
    answered = all(c.outstanding()["requests"] == 0 for c in clients)
    return answered and read == server.stats().get("notifications_sent", 0)


def two_brokers_and_clients(w: MemoryWorld, clients: int, **server: Any) -> Any:
    ns, addr = w.server(**server)
    a = w.broker_wire(addr, *TOPICS, broker_name="broker-a", broker_addr=A_ADDR)
    b = w.broker_wire(addr, *TOPICS, broker_name="broker-b", broker_addr=B_ADDR)
    w.advance(TICK_S)
    pool = []
    for _ in range(clients):
        client = w.client(addr)
        for topic in TOPICS:
            client.add_listener(topic, lambda e: None)
        pool.append(client)
    w.settle()
    assert all(c.push_active for c in pool)
    assert ns.subscriptions.total == clients * len(TOPICS)
    assert all(holds(c, "broker-a") and holds(c, "broker-b") for c in pool)
    return ns, a, b, pool


def step_and_count(w: MemoryWorld, ns: NameServer, clients: list[RouteClient], seconds: float):
    """Advance the clock by 0.1 s steps; the GETs the server handled after each step.

    Clients count a fetch when they send it, the server when it handles it: after each step
    the world has settled, so both moved by the same amount."""
    sent_base, handled_base = client_fetches(clients), gets(ns)
    per_step = []
    for _ in range(round(seconds * 10)):
        before = gets(ns)
        w.advance(0.1)
        assert client_fetches(clients) - sent_base == gets(ns) - handled_base
        per_step.append(gets(ns) - before)
    return per_step


def max_per_second(per_step: list[int]) -> int:
    """The most requests in any 10 consecutive 0.1 s steps (a sliding second)."""
    return max(sum(per_step[i : i + 10]) for i in range(max(1, len(per_step) - 9)))


def test_hundred_clients_drop_an_unregistered_broker_within_a_tick_and_refetch_it_spread(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    clients = 100
    ns, a, _b, pool = two_brokers_and_clients(w, clients)
    gone: list[BrokerEvent] = []
    pool[0].add_broker_listener(gone.append)
    events: list[RouteEvent] = []
    pool[0].add_listener("T0", events.append)
    requests_before, fetches_before = gets(ns), client_fetches(pool)

    w.wait(a.request(unregister_request(broker_addr=A_ADDR)))
    w.run_until(lambda: all(holds_without(c, "broker-a") for c in pool), within=TICK_S)
    assert quiet(ns, pool)
    w.advance(0.1)  # tick + 100 ms: still no request
    assert quiet(ns, pool)
    assert all(holds_without(c, "broker-a") and holds(c, "broker-b") for c in pool)
    assert gets(ns) == requests_before and client_fetches(pool) == fetches_before
    assert events[-1].cause == "broker_gone" and events[-1].exists
    [event] = gone
    assert (event.kind, event.broker_name, event.cause) == ("departed", "broker-a", "unregister")
    assert event.addrs == ((0, A_ADDR),) and sorted(event.topics) == TOPICS
    # The adopted versions are the server's: the confirming refetches change nothing.
    adopted = {t: pool[0].cached_route(t).version for t in TOPICS}  # type: ignore[union-attr]
    window = pool[0].config.departure_confirm_window_ms / 1000
    delay = pool[0].config.departure_confirm_delay_ms / 1000
    confirms = step_and_count(w, ns, pool, delay + window)
    assert sum(confirms) == clients * len(TOPICS)
    print("confirm refetches per sliding second, max:", max_per_second(confirms))
    assert max_per_second(confirms) <= clients * len(TOPICS) / window
    assert {t: pool[0].cached_route(t).version for t in TOPICS} == adopted  # type: ignore[union-attr]
    assert all(c.counters["departure_exact"] == len(TOPICS) for c in pool)

    # The broker comes back: every client holds it again within the window, spread.
    before_arrival = gets(ns)
    w.register(a, *TOPICS, broker_name="broker-a", broker_addr=A_ADDR)
    w.run_until(lambda: all(c.counters["broker_arrivals"] == 1 for c in pool), within=TICK_S)
    assert gets(ns) == before_arrival  # the refetches start spread from here
    arrival_window = pool[0].config.arrival_refetch_window_ms / 1000
    refetches = step_and_count(w, ns, pool, arrival_window)
    assert all(holds(c, "broker-a") and holds(c, "broker-b") for c in pool)
    assert sum(refetches) == clients * len(TOPICS)
    print("arrival refetches per sliding second, max:", max_per_second(refetches))
    assert max_per_second(refetches) <= clients * len(TOPICS) / arrival_window
    assert [e.kind for e in gone] == ["departed", "arrived"]


@pytest.mark.parametrize("how", ["channel_close", "expiry"])
def test_channel_close_and_expiry_are_dropped_like_an_unregister(
    memory_world: MemoryWorld, how: str
) -> None:
    w = memory_world
    ns, a, b, pool = two_brokers_and_clients(
        w, 5, registry={"broker_expiry_ms": 20_000, "scan_interval_ms": 1_000}
    )
    requests_before = gets(ns)
    causes: list[str] = []
    pool[0].add_broker_listener(lambda e: causes.append(e.cause))
    if how == "channel_close":
        a.transport.loseConnection()  # type: ignore[union-attr]
        w.settle()
        assert ns.registry.broker_count == 1
        w.advance(TICK_S)
    else:
        for _ in range(25):  # broker-b heartbeats, broker-a stays silent
            w.advance(1.0)
            w.register(b, *TOPICS, broker_name="broker-b", broker_addr=B_ADDR)
            if ns.registry.broker_count == 1:
                break
        assert ns.registry.broker_count == 1
        w.advance(TICK_S)
    assert all(holds_without(c, "broker-a") for c in pool)
    assert causes == [how]
    if how == "channel_close":
        assert gets(ns) == requests_before


def test_with_the_rule_off_the_departure_is_silent_and_learned_by_the_version_check(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    ns, a, _b, pool = two_brokers_and_clients(w, 3, push={"broker_events": {"unregister": False}})
    w.wait(a.request(unregister_request(broker_addr=A_ADDR)))
    w.advance(TICK_S)
    assert quiet(ns, pool)
    assert all(holds(c, "broker-a") for c in pool)  # the seed's silent behaviour
    for _ in range(29):
        w.advance(1.0)
        assert quiet(ns, pool)
    assert all(holds_without(c, "broker-a") for c in pool)
    assert all(c.counters["fetch.version_check"] == len(TOPICS) for c in pool)


def test_with_push_degraded_during_a_departure_clients_learn_it_within_30_s(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    sampler = FakeSampler()
    ns, a, _b, pool = two_brokers_and_clients(
        w, 5, sampler=sampler, pressure={"enabled": True, "sample_interval_ms": 1_000}
    )
    sampler.cpu = 99.0
    w.advance(1.0)
    assert ns.pressure.degraded
    w.wait(a.request(unregister_request(broker_addr=A_ADDR)))
    for _ in range(30):
        w.advance(1.0)
        assert quiet(ns, pool)
        if all(holds_without(c, "broker-a") for c in pool):
            break
    assert all(holds_without(c, "broker-a") for c in pool)
    assert ns.pressure.degraded and ns.stats().get("notifications_sent", 0) == 0
    assert all(c.counters["fetch.version_check"] >= 1 for c in pool)


def test_a_departure_emptying_a_topic_keeps_its_route_stale_without_a_request(
    memory_world: MemoryWorld,
) -> None:
    w = memory_world
    ns, addr = w.server()
    a = w.broker_wire(addr, "ONLY_A", "T0", broker_name="broker-a", broker_addr=A_ADDR)
    w.advance(TICK_S)
    client = w.client(addr)
    events: list[RouteEvent] = []
    client.add_listener("ONLY_A", events.append)
    w.settle()
    assert len(events) == 1 and client.push_active
    assert ns.subscriptions.total == 1
    before = gets(ns)
    w.wait(a.request(unregister_request(broker_addr=A_ADDR)))
    w.advance(TICK_S)
    assert len(events) == 2
    # The broker may be alive and only cut off from this server: the last route stays, stale.
    assert events[1].exists and events[1].stale and events[1].cause == "broker_gone"
    assert client.cached_route("ONLY_A") is not None
    assert gets(ns) == before
