"""Inline routes: which changes go with their route, within which bounds, and of which version.

The unit tests drive ``InlineRoutes`` with a real ``SubscriptionRegistry`` and stand-in body
and version sources; the wire tests run the real server in the deterministic world
(``support.memory_world``: one virtual clock, ``TICK``, TCP in memory) and compare what a
connection was sent with what GET_ROUTEINFO_BY_TOPIC answers.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import pytest_twisted
from support.memory_world import connect, until
from support.push_wire import TICK, broker_with, notifications, round_trip, subscribe

from namesrv.config import PushConfig
from namesrv.push.inline_routes import InlineRoutes
from namesrv.push.subscriptions import SubscriptionRegistry
from protocol.bodies import decode_route
from protocol.codes import Perm, RequestCode, ResponseCode, Version
from protocol.push_events import ChangeKind

FORM = (True, False)


class Routes:
    """Stands in for the registry's bodies and the detector's versions."""

    def __init__(self, size: int = 300) -> None:
        self.size = size
        self.versions: dict[str, int] = {}
        self.looked: list[str] = []

    def body(self, topic: str, standard: bool, legacy: bool) -> bytes | None:
        self.looked.append(topic)
        if topic not in self.versions:
            return None
        head = f"{topic}@{self.versions[topic]}:".encode()
        return head + b"x" * (self.size - len(head))

    def settled(self, topic: str) -> int | None:
        return self.versions.get(topic)


def make_inline(
    routes: Routes, asking: tuple[str, ...] = (), topics: list[str] | None = None, **push: int
) -> tuple[InlineRoutes, SubscriptionRegistry, Counter]:
    """Inline routes over ``routes``; the connections ``asking`` subscribe to ``topics``
    (default: every topic ``routes`` has) and ask for inline routes."""
    subs = SubscriptionRegistry(100_000, 1_000_000)
    counters: Counter[str] = Counter()
    inline = InlineRoutes(PushConfig(**push), subs, routes.body, routes.settled, counters)
    for conn in asking:
        subs.subscribe(conn, topics or list(routes.versions))
        subs.set_inline(conn, FORM)
    return inline, subs, counters


def test_ten_thousand_changes_never_pass_the_budget_and_the_rest_go_plain():
    routes = Routes(size=300)
    topics = [f"T{i:05d}" for i in range(10_000)]
    routes.versions = dict.fromkeys(topics, 2)
    inline, _, counters = make_inline(routes, ("conn",), inline_budget_bytes_per_tick=64 * 1024)
    changes = tuple((t, 2, int(ChangeKind.UPDATED)) for t in topics)
    inline.start_slice()
    choice = inline.choose("conn", changes)
    assert len(choice.routes) == 10_000
    sent = [r for r in choice.routes if r]
    assert sum(map(len, sent)) <= 64 * 1024
    assert len(sent) == 64 * 1024 // 300 == choice.inlined
    assert choice.skipped == 10_000 - len(sent)
    # Bodies are looked at up to the budget's worth, not for every change.
    assert len(routes.looked) <= 64 * 1024 // 300 + 1
    assert counters["inline_routes_sent"] == len(sent)
    assert counters["inline_route_bytes"] == sum(map(len, sent))
    assert counters["inline_routes_skipped"] == 10_000 - len(sent)


def test_a_route_over_the_size_bound_a_deletion_and_a_topic_marked_since_go_plain():
    routes = Routes(size=500)
    routes.versions = {"Big": 3, "Ok": 4, "Moved": 5}
    subs = SubscriptionRegistry(100_000, 1_000_000)
    routes_small = Routes(size=100)
    routes_small.versions = {"Ok": 4}
    inline = InlineRoutes(
        PushConfig(inline_route_max_bytes=400),
        subs,
        lambda t, s, legacy: (routes if t == "Big" else routes_small).body(t, s, legacy),
        {"Big": 3, "Ok": 4, "Moved": 6, "Gone": None}.get,
        Counter(),
    )
    subs.subscribe("c", ["Big", "Ok", "Moved", "Gone"])
    subs.set_inline("c", FORM)
    changes = (
        ("Big", 3, int(ChangeKind.UPDATED)),
        ("Ok", 4, int(ChangeKind.CREATED)),
        ("Moved", 5, int(ChangeKind.UPDATED)),  # marked again since 5 was settled: now 6
        ("Gone", 7, int(ChangeKind.DELETED)),
    )
    choice = inline.choose("c", changes)
    assert [bool(r) for r in choice.routes] == [False, True, False, False]
    assert choice.routes[1].startswith(b"Ok@4:")
    assert (choice.inlined, choice.skipped) == (1, 2)


def test_a_connection_that_did_not_ask_gets_no_routes_and_nothing_is_looked_up():
    routes = Routes()
    routes.versions = {"T": 1}
    inline, subs, _ = make_inline(routes)
    subs.subscribe("plain", ["T"])
    assert not inline.active
    assert inline.choose("plain", (("T", 1, 0),)).routes == ()
    assert routes.looked == []
    subs.subscribe("asks", ["T"])
    subs.set_inline("asks", FORM)
    assert inline.active
    subs.set_inline("asks", None)  # a later SUBSCRIBE without the field
    assert not inline.active
    subs.set_inline("asks", FORM)
    subs.drop_connection("asks")
    assert not inline.active


def test_a_change_set_is_chosen_once_per_tick_for_every_connection_owed_it():
    routes = Routes()
    routes.versions = {"T": 1, "U": 1}
    inline, _, counters = make_inline(routes, ("a", "b", "c"))
    changes = (("T", 1, 0), ("U", 1, 0))
    inline.start_slice()
    chosen = {inline.choose(conn, changes).routes for conn in ("a", "b", "c")}
    assert len(chosen) == 1 and routes.looked == ["T", "U"]
    assert counters["inline_routes_sent"] == 6
    inline.start_slice()  # the next slice looks again: a route may have moved meanwhile
    inline.new_tick()
    inline.choose("a", changes)
    assert routes.looked == ["T", "U", "T", "U"]


def test_the_budget_is_the_ticks_over_all_its_slices():
    routes = Routes(size=1000)
    routes.versions = {f"T{i}": 1 for i in range(10)}
    inline, _, _ = make_inline(routes, ("c",), inline_budget_bytes_per_tick=2500)
    inline.new_tick()
    inline.start_slice()
    assert inline.choose("c", (("T0", 1, 0), ("T1", 1, 0))).inlined == 2
    inline.start_slice()  # a continuation of the same tick: 500 bytes left
    assert inline.choose("c", (("T2", 1, 0),)).routes == ()
    inline.new_tick()
    inline.start_slice()
    assert inline.choose("c", (("T2", 1, 0), ("T3", 1, 0))).inlined == 2


def test_zero_bounds_turn_inline_routes_off():
    routes = Routes()
    inline, _, _ = make_inline(routes, ("c",), ["T"], inline_route_max_bytes=0)
    assert not inline.active


# -- over the wire, in the world ----------------------------------------------------------


async def route_answer(client: Any, topic: str) -> Any:
    resp = await client.call(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"}
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return int(resp.ext_fields["routeVersion"]), resp.body


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


@pytest_twisted.ensureDeferred
async def test_inline_subscriber_gets_the_lookup_body_of_the_notified_version_a_plain_one_does_not(
    ns,
):
    broker = await broker_with(ns, "T")
    inline_conn = await connect(ns.port)
    plain_conn = await connect(ns.port)
    await subscribe(inline_conn, "T", inline=True)
    await subscribe(plain_conn, "T")
    await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    ns.clock.advance(TICK)
    await inline_conn.wait_pushed(1)
    await plain_conn.wait_pushed(1)
    [inline_change] = notifications(inline_conn)[0].changes
    [plain_change] = notifications(plain_conn)[0].changes
    assert plain_change == inline_change._replace(route=b"")
    version, body = await route_answer(plain_conn, "T")
    assert (inline_change.version, inline_change.route) == (version, body)
    assert all(q.perm == Perm.READ for q in decode_route(inline_change.route).queue_datas)
    stats = ns.server.stats()
    assert stats["inline_routes_sent"] == 1 and stats["inline_route_bytes"] == len(body)


@pytest_twisted.ensureDeferred
async def test_a_route_that_moves_again_before_the_frame_is_sent_goes_plain_then_exact(
    make_world_server,
):
    # One frame per reactor turn and one topic settled per turn: a change that lands between
    # two slices of one tick is still marked when the second connection's frame is built.
    ns = make_world_server({"push": {"notify_slice_connections": 1, "settle_slice_topics": 1}})
    await broker_with(ns, "T")
    await broker_with(ns, "X", broker_name="broker-b", broker_addr="10.0.0.2:10911")
    first = await connect(ns.port)
    second = await connect(ns.port)
    reader = await connect(ns.port)
    await subscribe(first, "T", inline=True)
    await subscribe(second, "T", inline=True)
    _, before = await route_answer(reader, "T")
    ticker = ns.server.ticker
    send = ticker._send_notifications
    sent_first: list[tuple[int, bytes | None]] = []

    def first_slice_then_changes(notes: Any, now_ms: int) -> None:
        send(notes, now_ms)
        if not sent_first:
            [note] = notes
            body = ns.server.routes.body("T", standard_json=True)
            sent_first.append((note.changes[0][1], body))
            # Between the slices X and then T change again; the next slice settles only X.
            ns.server.registry.wipe_write_perm("broker-b")
            ns.server.registry.add_write_perm("broker-a")

    ticker._send_notifications = first_slice_then_changes  # type: ignore[method-assign]
    ns.server.registry.wipe_write_perm("broker-a")
    ns.clock.advance(TICK)  # the tick and its continuations, until all is settled and sent
    await first.wait_pushed(2)
    await second.wait_pushed(2)
    await round_trip(first, second)
    [(notified_version, notified_body)] = sent_first
    assert notified_body != before
    # The first slice's connection got T with the route of its notified version; the other
    # one, sent after T moved again, got that version without a route (it refetches)...
    first_frames = sorted(
        (change.version, change.route)
        for client in (first, second)
        for change in notifications(client)[0].changes
    )
    assert first_frames == [(notified_version, b""), (notified_version, notified_body)]
    # ... and both then got T's newest version with exactly its route.
    latest_version, latest = await route_answer(reader, "T")
    assert latest_version > notified_version
    for client in (first, second):
        [newest] = notifications(client)[1].changes
        assert (newest.version, newest.route) == (latest_version, latest)
    assert all(q.perm & Perm.WRITE for q in decode_route(latest).queue_datas)


@pytest_twisted.ensureDeferred
async def test_ten_thousand_changed_topics_one_frame_within_the_budget_the_rest_plain(
    make_world_server,
):
    ns = make_world_server(
        {
            "push": {"inline_budget_bytes_per_tick": 32 * 1024},
        }
    )
    topics = [f"T{i:05d}" for i in range(10_000)]
    broker = await broker_with(ns, *topics)
    client = await connect(ns.port)
    await subscribe(client, *topics, inline=True)
    await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    ns.clock.advance(TICK)  # one tick, sliced over reactor turns (5,000 topics settled each)
    await client.wait_pushed(1)
    await round_trip(client)
    notes = notifications(client)
    sent = [c for note in notes for c in note.changes]
    assert len(notes) >= 2 and sorted(c.topic for c in sent) == topics
    routes = [c.route for c in sent if c.route]
    assert 0 < len(routes) < 10_000
    assert sum(map(len, routes)) <= 32 * 1024  # over every frame of the tick
    assert ns.server.stats()["inline_routes_skipped"] == 10_000 - len(routes)
    sample = next(c for c in sent if c.route)
    version, body = await route_answer(client, sample.topic)
    assert (sample.version, sample.route) == (version, body)


@pytest_twisted.ensureDeferred
async def test_a_broker_departure_entry_reaches_an_inline_subscriber_as_before(ns):
    broker = await broker_with(ns, "T", "U")
    client = await connect(ns.port)
    await subscribe(client, "T", inline=True)
    broker.transport.loseConnection()  # channel close: a departure entry, no topic entry
    await until(lambda: ns.server.registry.broker_count == 0)
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    [note] = notifications(client)
    assert [b.broker_name for b in note.brokers] == ["broker-a"]
    assert note.brokers[0].broker_name_gone
    assert note.changes == ()


@pytest.mark.parametrize("version", [int(Version.V4_9_4) - 1, int(Version.V5_0_0) - 1])
@pytest_twisted.ensureDeferred
async def test_inline_routes_take_the_body_form_a_lookup_of_that_client_version_gets(ns, version):
    broker = await broker_with(ns, "T")
    client = await connect(ns.port)
    await subscribe(client, "T", inline=True, version=version)
    await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    [change] = notifications(client)[0].changes
    resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, version=version)
    assert change.route == resp.body
