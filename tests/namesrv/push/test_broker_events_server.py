"""Broker arrivals and departures, server side: each is pushed as one entry per broker.

Wire-level tests against the real server in the deterministic world (``support.memory_world``:
one virtual clock, TCP in memory), plus unit tests of the per-connection broker debt
(``BrokerEventBook``) through the change detector.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs, unregister_request
from support.journal_files import journal_records
from support.memory_world import connect, kept_in_use, until
from support.push_wire import TICK, broker_with, notifications, round_trip, subscribe

from namesrv.config import BrokerEventConfig, SuppressionConfig
from namesrv.push.broker_events import BrokerEventBook
from namesrv.push.change_detector import ChangeDetector
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.events import BrokerEvent
from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import BrokerChangeKind, ChangeKind

A_ADDR = "10.0.0.1:10911"
B_ADDR = "10.0.0.2:10911"


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


async def two_brokers(ns: Any) -> Any:
    """broker-a serves T1, T2, T3; broker-b serves T1 and U; both settled before subscribing."""
    a = await connect(ns.port)
    await a.request(register_request(topic_configs("T1", "T2", "T3")))
    b = await connect(ns.port)
    await b.request(
        register_request(topic_configs("T1", "U"), broker_name="broker-b", broker_addr=B_ADDR)
    )
    ns.clock.advance(TICK)
    return a, b


async def route_version(client: Any, topic: str) -> Any:
    resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return int(resp.ext_fields["routeVersion"]), resp


def steps(entry: Any) -> dict[str, tuple[int, int]]:
    return {s.topic: (s.from_version, s.version) for s in entry.topics}


@pytest_twisted.ensureDeferred
async def test_unregister_sends_each_subscriber_one_exact_entry_and_no_topic_entries(ns):
    await two_brokers(ns)
    subscribers = [await connect(ns.port) for _ in range(20)]
    bystander = await connect(ns.port)
    acks = []
    for client in subscribers:
        acks.append(await subscribe(client, "T1", "T2"))
    await subscribe(bystander, "U")
    before = {tv.topic: tv.version for tv in acks[0].topics}

    a = await connect(ns.port)
    await a.request(unregister_request())
    ns.clock.advance(TICK)
    for client in subscribers:
        await client.wait_pushed(1)
    await round_trip(*subscribers, bystander)

    for client in subscribers:
        [note] = notifications(client)
        assert list(note.changes) == []
        [entry] = note.brokers
        assert entry.kind == BrokerChangeKind.DEPARTED
        assert (entry.broker_name, entry.cluster, entry.cause) == (
            "broker-a",
            "DefaultCluster",
            "unregister",
        )
        assert [(x.broker_id, x.addr) for x in entry.addrs] == [(0, A_ADDR)]
        assert entry.broker_name_gone and not entry.read_only
        assert steps(entry) == {t: (v, v + 1) for t, v in before.items()}
    assert bystander.pushed == []
    # What a later fetch returns carries the announced version.
    version, resp = await route_version(subscribers[0], "T1")
    assert version == before["T1"] + 1 and resp.code == ResponseCode.SUCCESS
    version, resp = await route_version(subscribers[0], "T2")
    assert version == before["T2"] + 1 and resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert ns.server.stats()["broker_entries_sent"] == 20


@pytest_twisted.ensureDeferred
async def test_channel_close_and_expiry_announce_like_unregister(ns):
    a, b = await two_brokers(ns)
    client = await connect(ns.port)
    await subscribe(client, "T1", "U")
    a.transport.loseConnection()
    await until(lambda: a.lost.called)
    assert ns.server.registry.broker_count == 1
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    [closed] = notifications(client)[0].brokers
    assert (closed.broker_name, closed.cause, closed.broker_name_gone) == (
        "broker-a",
        "channel_close",
        True,
    )
    assert set(steps(closed)) == {"T1"}

    await kept_in_use(ns.server.config.registry.broker_expiry_ms / 1000 + 10, b)  # b silent
    ns.clock.advance(TICK)  # the tick after the scan that expired it
    await client.wait_pushed(2)
    [expired] = notifications(client)[1].brokers
    assert (expired.broker_name, expired.cause) == ("broker-b", "expiry")
    assert {t for t, (origin, _) in steps(expired).items() if origin} == {"T1", "U"}
    assert ns.server.registry.broker_count == 0


@pytest_twisted.ensureDeferred
async def test_arrival_lists_the_subscribed_topics_it_changed_without_exact_steps(ns):
    client = await connect(ns.port)
    await subscribe(client, "T1", "T2", "X")
    a = await broker_with(ns, "T1", "T2", "T3")
    await client.wait_pushed(1)
    [note] = notifications(client)
    assert list(note.changes) == []  # the start-up's per-topic entries stay suppressed
    [entry] = note.brokers
    assert entry.kind == BrokerChangeKind.ARRIVED and entry.cause == "broker_startup"
    assert steps(entry) == {"T1": (0, 1), "T2": (0, 1)}
    # A heartbeat-like re-register of the same address is not an arrival.
    await a.request(register_request(topic_configs("T1", "T2", "T3")))
    ns.clock.advance(TICK)
    await round_trip(client)
    assert len(notifications(client)) == 1


@pytest_twisted.ensureDeferred
async def test_a_departure_mixed_with_a_notified_change_is_not_an_exact_step(ns):
    a, b = await two_brokers(ns)
    client = await connect(ns.port)
    ack = await subscribe(client, "T1", "T2")
    before = {tv.topic: tv.version for tv in ack.topics}
    await b.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-b"})
    await a.request(unregister_request())
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    [note] = notifications(client)
    assert [(c.topic, c.kind, c.version) for c in note.changes] == [
        ("T1", ChangeKind.UPDATED, before["T1"] + 1)
    ]
    [entry] = note.brokers
    assert steps(entry) == {"T1": (0, before["T1"] + 1), "T2": (before["T2"], before["T2"] + 1)}


@pytest.mark.parametrize("rule", ["unregister", "channel_close", "expiry", "arrival"])
@pytest_twisted.ensureDeferred
async def test_each_rule_off_keeps_that_event_silent_and_journals_it(
    rule, make_world_server, tmp_path
):
    ns = make_world_server(
        {"push": {"broker_events": {rule: False}}, "journal": {"directory": str(tmp_path)}}
    )
    client = await connect(ns.port)
    await subscribe(client, "T1")
    a = await broker_with(ns, "T1", "T2")
    departure = "unregister" if rule == "arrival" else rule
    if departure == "unregister":
        await a.request(unregister_request())
    elif departure == "channel_close":
        a.transport.loseConnection()
        await until(lambda: ns.server.registry.broker_count == 0)
    else:
        await kept_in_use(ns.server.config.registry.broker_expiry_ms / 1000 + 10, a)
    ns.clock.advance(TICK)
    await round_trip(client)
    kinds = [e.kind for n in notifications(client) for e in n.brokers]
    expected = [BrokerChangeKind.DEPARTED] if rule == "arrival" else [BrokerChangeKind.ARRIVED]
    assert kinds == expected
    assert all(list(n.changes) == [] for n in notifications(client))
    ns.server.journal.flush()
    records = journal_records(tmp_path)
    events = [(r["kind"], r["cause"], r["notify"]) for r in records if r["event"] == "broker_event"]
    assert events == [
        ("ARRIVED", "broker_startup", rule != "arrival"),
        ("DEPARTED", departure, rule == "arrival"),
    ]
    sent = [r for r in records if r["event"] == "notification_sent"]
    assert [r["broker_entries"] for r in sent] == [1]


@pytest_twisted.ensureDeferred
async def test_a_slave_leaving_keeps_the_broker_and_lists_only_its_address(ns):
    a = await connect(ns.port)
    await a.request(register_request(topic_configs("T1", "T2")))
    slave = await connect(ns.port)
    await slave.request(
        register_request(topic_configs("T1", "T2"), broker_addr=B_ADDR, broker_id=1)
    )
    ns.clock.advance(TICK)
    client = await connect(ns.port)
    await subscribe(client, "T1")
    await slave.request(unregister_request(broker_addr=B_ADDR, broker_id=1))
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    [entry] = notifications(client)[0].brokers
    assert [(x.broker_id, x.addr) for x in entry.addrs] == [(1, B_ADDR)]
    assert not entry.broker_name_gone


# -- the per-connection debt, through the detector ------------------------------------------------


class Book:
    """T exists at version 1, settled, and ``subscribed`` connections subscribe to it."""

    def __init__(
        self, config: BrokerEventConfig | None = None, subscribed: tuple[str, ...] = ("c1",)
    ) -> None:
        self.routes: dict[str, bytes] = {}
        self.subs = SubscriptionRegistry(1000, 100_000)
        self.book = BrokerEventBook(config or BrokerEventConfig(), self.subs)
        self.detector = ChangeDetector(
            self.routes.get, self.subs, SuppressionConfig(), "e", broker_events=self.book
        )
        self.routes["T"] = b"v1"
        self.detector.mark(["T"], ChangeCause.REGISTER)
        self.detector.version("T")
        for conn in subscribed:
            self.subs.subscribe(conn, ["T"])

    def change(self, topics: dict[str, bytes | None], event: BrokerEvent) -> None:
        for topic, route in topics.items():
            if route is None:
                self.routes.pop(topic, None)
            else:
                self.routes[topic] = route
        self.detector.mark(list(topics), event.cause)
        self.book.record(event)

    def tick(self, degraded: bool = False, can_send: Any = None) -> Any:
        return self.detector.tick(
            0, can_send=can_send or (lambda c: True), degraded=degraded, max_notifications=None
        )


def departed(addr: str = A_ADDR, cause: ChangeCause = ChangeCause.UNREGISTER, **kw: Any) -> Any:
    return BrokerEvent(
        BrokerChangeKind.DEPARTED, cause, "c", "broker-a", ((0, addr),), ("T",), **kw
    )


def arrived(addr: str = A_ADDR) -> BrokerEvent:
    return BrokerEvent(
        BrokerChangeKind.ARRIVED, ChangeCause.BROKER_STARTUP, "c", "broker-a", ((0, addr),), ("T",)
    )


def test_degraded_mode_keeps_the_entry_and_later_departures_chain_into_one_exact_step():
    h = Book()
    h.change({"T": b"v2"}, departed())
    assert h.tick(degraded=True) == []
    h.change({"T": b"v3"}, departed("10.0.0.3:1"))
    [note] = h.tick()
    [entry] = note.brokers
    assert entry[3] == ((0, A_ADDR), (0, "10.0.0.3:1"))  # both masters that left
    assert entry[7] == (("T", 3, 1),)
    assert h.tick() == []


def test_slow_reader_keeps_its_entry_until_it_can_take_a_frame():
    h = Book()
    h.change({"T": b"v2"}, departed())
    assert h.tick(can_send=lambda c: False) == []
    assert h.detector.pending_connections == 1
    [note] = h.tick()
    assert note.brokers[0][7] == (("T", 2, 1),)


def test_arrival_after_departure_makes_the_departure_inexact_and_drops_returned_addresses():
    h = Book()
    h.change({"T": None}, departed())
    h.detector.version("T")  # settled by a lookup in between
    h.change({"T": b"v1"}, arrived())
    [note] = h.tick()
    # The address came back: no departure is left to announce; the arrival lists both steps.
    [entry] = note.brokers
    assert entry[0] == BrokerChangeKind.ARRIVED
    assert entry[7] == (("T", 3, 0),)


class SlicedTable:
    """A broker table applied in slices (``RegisterJobs``), as a broker event sees it."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.applied = 0
        self.done = False


def arrival_in_slices(h: Book, table: SlicedTable) -> None:
    """broker-a arrives with ``table``'s topics, none of them applied yet."""
    event = BrokerEvent(
        BrokerChangeKind.ARRIVED,
        ChangeCause.BROKER_STARTUP,
        "c",
        "broker-a",
        ((0, A_ADDR),),
        tuple(table.names),
        table=table,
    )
    h.book.record(event)


def apply_slice(h: Book, table: SlicedTable, count: int) -> None:
    topics = table.names[table.applied : table.applied + count]
    h.routes.update(dict.fromkeys(topics, b"with broker-a"))
    h.detector.mark(topics, ChangeCause.BROKER_STARTUP)
    table.applied += len(topics)
    table.done = table.applied == len(table.names)


def subscribe_settled(h: Book, conn: str, topics: list[str]) -> None:
    """As SUBSCRIBE does: each topic settled first, then subscribed, then told to the book."""
    for topic in topics:
        h.detector.version(topic)
    h.detector.subscribed(h.subs.subscribe(conn, topics))


def test_a_topic_subscribed_while_an_arrival_is_applied_is_owed_when_it_is_applied():
    """Subscribed before its slice was applied: the arrival names it. Subscribed after (its
    change already settled into the ack's version): the arrival does not."""
    h = Book(subscribed=())
    table = SlicedTable(["U1", "U2", "U3", "U4"])
    arrival_in_slices(h, table)  # nobody subscribes to any of them yet
    apply_slice(h, table, 2)
    subscribe_settled(h, "c2", ["U1", "U3"])  # U1 applied, and settled now; U3 not yet
    apply_slice(h, table, 2)
    notes = h.tick()
    [entry] = [b for note in notes for b in note.brokers]
    assert entry[0] == BrokerChangeKind.ARRIVED
    assert [step[0] for step in entry[7]] == ["U3"]
    h.routes["U3"] = b"changed again"  # a later change is no longer the arrival's
    h.detector.mark(["U3"], ChangeCause.BROKER_STARTUP)
    assert [b for note in h.tick() for b in note.brokers] == []
    assert not h.book.waiting


def test_an_arrival_nobody_subscribes_to_waits_for_nothing_once_applied():
    h = Book(subscribed=())
    table = SlicedTable([f"U{i}" for i in range(10)])
    arrival_in_slices(h, table)
    assert h.book.waiting  # a subscriber may still join its later topics
    apply_slice(h, table, 10)
    assert h.tick() == []
    assert not h.book.waiting


def test_non_contiguous_departures_of_one_broker_merge_into_an_inexact_step():
    h = Book()
    h.change({"T": b"v2"}, departed())
    h.detector.version("T")
    h.routes["T"] = b"v3"  # another change in between, not a departure
    h.detector.mark(["T"], ChangeCause.REGISTER)
    h.detector.version("T")
    h.change({"T": b"v4"}, departed("10.0.0.3:1"))
    [note] = h.tick()
    assert note.brokers[0][7] == (("T", 4, 0),)
    assert note.changes == (("T", 3, int(ChangeKind.UPDATED)),)


def test_unsubscribing_drops_the_owed_entry_and_closing_forgets_it():
    h = Book(subscribed=("c1", "c2"))
    h.change({"T": b"v2"}, departed())
    h.detector.version("T")
    h.subs.unsubscribe("c1", ["T"])
    h.detector.discard_debt("c1", ["T"])
    h.detector.forget_connection("c2")
    assert h.tick() == []
    assert h.book.pending_connections == 0


def test_a_rule_off_records_nothing_owed():
    h = Book(BrokerEventConfig(expiry=False))
    h.change({"T": b"v2"}, departed(cause=ChangeCause.EXPIRY))
    assert h.tick() == []
    assert h.book.events_silent == 1


def test_the_refetch_window_grows_with_the_subscriptions_owed_and_is_capped():
    h = Book(
        BrokerEventConfig(refetch_rate_per_second=2, max_refetch_window_ms=60_000),
        ("c1", "c2", "c3"),
    )
    h.change({"T": b"v2"}, departed())
    notes = h.tick()
    assert [n.brokers[0][8] for n in notes] == [1_500] * 3  # 3 steps at 2 per second
    h = Book(
        BrokerEventConfig(refetch_rate_per_second=1, max_refetch_window_ms=2_000),
        ("c1", "c2", "c3"),
    )
    h.change({"T": b"v2"}, departed())
    assert {n.brokers[0][8] for n in h.tick()} == {2_000}


def test_broker_event_config_is_checked_at_start_up():
    from namesrv.config import ConfigError, from_mapping

    assert from_mapping({}).push.broker_events == BrokerEventConfig()
    with pytest.raises(ConfigError, match="refetch_rate_per_second"):
        from_mapping({"push": {"broker_events": {"refetch_rate_per_second": 0}}})
    with pytest.raises(ConfigError, match="departures"):
        from_mapping({"push": {"broker_events": {"departures": False}}})
