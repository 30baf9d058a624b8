"""Route push over the wire against the real server.

The server and the test's connections live in the deterministic world (``support.memory_world``:
one virtual clock, TCP in memory; ``ns.clock.advance(TICK)`` is one tick). To prove a
connection received *nothing*, a test makes a request on it afterwards: the server writes a
tick's notifications before it reads the next request, so a notification would arrive first.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs, unregister_request
from support.journal_files import journal_records
from support.memory_world import connect, kept_in_use, until
from support.push_wire import TICK, broker_with, changes, notifications, round_trip, subscribe

from namesrv.push.pressure import PsutilSampler, Sample
from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import ChangeKind, encode_subscribe, encode_unsubscribe


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


@pytest_twisted.ensureDeferred
async def test_wipe_perm_notifies_each_subscriber_once_and_no_one_else(ns):
    broker = await broker_with(ns, "T", "U")
    subscribers = [await connect(ns.port) for _ in range(100)]
    bystanders = [await connect(ns.port) for _ in range(10)]
    for client in subscribers:
        await subscribe(client, "T")
    for client in bystanders:
        await subscribe(client, "U-other")

    resp = await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert resp.ext_fields["wipeTopicCount"] == "2"
    ns.clock.advance(TICK)
    for client in subscribers:
        await client.wait_pushed(1)
    await round_trip(*subscribers, *bystanders)

    for client in subscribers:
        [note] = notifications(client)
        assert [(c.topic, c.kind) for c in note.changes] == [("T", ChangeKind.UPDATED)]
        assert note.epoch == "e1" and note.sequence == 1
    assert all(c.pushed == [] for c in bystanders)
    assert ns.server.stats()["notifications_sent"] == 100


@pytest_twisted.ensureDeferred
async def test_route_version_in_get_routeinfo_matches_the_notified_version(ns):
    broker = await broker_with(ns, "T")
    client = await connect(ns.port)
    ack = await subscribe(client, "T")
    [before] = ack.topics
    await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    [change] = notifications(client)[0].changes
    assert change.version == before.version + 1
    resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert resp.ext_fields["routeVersion"] == str(change.version)


@pytest_twisted.ensureDeferred
async def test_topic_created_on_live_broker_reaches_early_subscribers_then_delete(ns):
    broker = await broker_with(ns, "A", "B")
    client = await connect(ns.port)
    ack = await subscribe(client, "NEW")
    assert not ack.topics[0].exists

    resp = await broker.request(register_request(topic_configs("A", "B", "NEW")))
    assert resp.code == ResponseCode.SUCCESS
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    assert changes(client) == [("NEW", ChangeKind.CREATED)]

    resp = await broker.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "NEW"})
    assert resp.code == ResponseCode.SUCCESS
    ns.clock.advance(TICK)
    await client.wait_pushed(2)
    assert changes(client)[1] == ("NEW", ChangeKind.DELETED)
    assert [n.sequence for n in notifications(client)] == [1, 2]


BROKER_EVENTS_OFF = {
    "broker_events": {
        "unregister": False,
        "channel_close": False,
        "expiry": False,
        "arrival": False,
    }
}


async def start_up_then_unregister(ns: Any, *subscribed: str) -> Any:
    """A client subscribes to ``subscribed``; then a broker of T1, T2, T3 starts, a tick,
    and it unregisters, a tick: the client has received whatever it was sent."""
    client = await connect(ns.port)
    await subscribe(client, *subscribed)
    broker = await broker_with(ns, "T1", "T2", "T3")
    await broker.request(unregister_request())
    ns.clock.advance(TICK)
    await round_trip(client)
    return client


@pytest_twisted.ensureDeferred
async def test_start_up_and_unregister_are_silent_with_broker_events_off(make_world_server):
    ns = make_world_server({"push": BROKER_EVENTS_OFF})
    client = await start_up_then_unregister(ns, "T1", "T2")
    assert client.pushed == []
    resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"})
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST  # the change happened, silently


@pytest.mark.parametrize("rule", ["broker_startup", "unregister"])
@pytest_twisted.ensureDeferred
async def test_start_up_and_unregister_notify_when_their_rule_is_off(rule, make_world_server):
    ns = make_world_server({"push": {"suppress": {rule: False}}})
    client = await start_up_then_unregister(ns, "T1")
    expected = {
        "broker_startup": [("T1", ChangeKind.CREATED)],
        "unregister": [("T1", ChangeKind.UNROUTED)],  # its broker left: not a deletion
    }[rule]
    assert changes(client) == expected


@pytest_twisted.ensureDeferred
async def test_channel_close_and_expiry_are_silent_with_broker_events_off(make_world_server):
    ns = make_world_server({"push": BROKER_EVENTS_OFF})
    client = await connect(ns.port)
    await subscribe(client, "T1", "X1")
    broker = await broker_with(ns, "T1", "T2")
    broker.transport.loseConnection()
    await until(lambda: broker.lost.called)
    ns.clock.advance(TICK)
    other = await broker_with(ns, "X1", "X2", broker_name="broker-x", broker_addr="10.0.0.9:1")
    # broker-x silent, its connection in use: it leaves by expiry
    await kept_in_use(ns.server.config.registry.broker_expiry_ms / 1000 + 10, other)
    await round_trip(client)
    assert client.pushed == []
    assert ns.server.registry.broker_count == 0


class SwitchableSampler:
    """The real psutil sampler until ``relieve()``; then a quiet machine."""

    def __init__(self) -> None:
        self.real: PsutilSampler | None = PsutilSampler()

    def __call__(self) -> Sample:
        if self.real is not None:
            return self.real()
        return Sample(cpu_percent=0.05, memory_percent=0.05)

    def relieve(self) -> None:
        self.real = None


@pytest_twisted.ensureDeferred
async def test_pressure_holds_notifications_and_recovery_sends_each_missed_topic_once(
    make_world_server, tmp_path
):
    # Memory thresholds far below what any host uses: the real process is "under pressure".
    overrides = {
        "journal": {"directory": str(tmp_path)},
        "pressure": {
            "memory_high_percent": 0.2,
            "memory_low_percent": 0.1,
            "cpu_high_percent": 100.0,
            "cpu_low_percent": 1.0,
        },
    }
    ns = make_world_server(overrides)
    sampler = SwitchableSampler()
    ns.server.pressure._sampler = sampler
    broker = await broker_with(ns, "T1", "T2", "T3")
    client = await connect(ns.port)
    await subscribe(client, "T1", "T2")
    ns.clock.advance(ns.server.config.pressure.sample_interval_ms / 1000)
    assert ns.server.pressure.degraded

    for call in ("WIPE", "ADD", "WIPE"):
        code = getattr(RequestCode, f"{call}_WRITE_PERM_OF_BROKER")
        await broker.call(code, {"brokerName": "broker-a"})
        ns.clock.advance(TICK)
    await round_trip(client)
    assert client.pushed == []
    assert ns.server.stats()["degraded"] == 1

    sampler.relieve()
    ns.clock.advance(TICK)
    ns.clock.advance(TICK)
    await round_trip(client)
    assert not ns.server.pressure.degraded
    [note] = notifications(client)
    assert sorted(c.topic for c in note.changes) == ["T1", "T2"]
    ns.clock.advance(TICK)
    await round_trip(client)
    assert len(notifications(client)) == 1
    assert ns.server.stats()["degradation_transitions"] == 2

    ns.server.journal.flush()
    records = journal_records(tmp_path)
    episode = [r for r in records if r["event"] in ("degradation", "backlog_drained")]
    assert [(r["event"], r.get("degraded")) for r in episode] == [
        ("degradation", True),
        ("degradation", False),
        ("backlog_drained", None),
    ]
    assert episode[0]["pending_connections"] == 0
    assert episode[1]["pending_connections"] == 1
    assert episode[2]["frames"] == 1
    assert episode[2]["duration_ms"] == episode[2]["ts_ms"] - episode[1]["ts_ms"]


@pytest_twisted.ensureDeferred
async def test_subscription_bounds_are_refused_whole(make_world_server):
    ns = make_world_server({"push": {"max_topics_per_connection": 3}})
    client = await connect(ns.port)
    await subscribe(client, "A", "B")
    resp = await client.call(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(["C", "D"], "x")
    )
    assert resp.code != ResponseCode.SUCCESS and "3" in resp.remark
    assert ns.server.subscriptions.topics_of(_server_conn(ns)) == {"A", "B"}
    resp = await client.call(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=b"\xff\xff\xff")
    assert resp.code == ResponseCode.INVALID_PARAMETER and "malformed" in resp.remark
    resp = await client.call(
        RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_unsubscribe(["A", "Z"])
    )
    assert resp.code == ResponseCode.SUCCESS
    assert ns.server.subscriptions.topics_of(_server_conn(ns)) == {"B"}
    client.transport.loseConnection()
    await until(lambda: client.lost.called)
    await round_trip(await connect(ns.port))
    assert ns.server.subscriptions.total == 0


def _server_conn(ns: Any) -> Any:
    [conn] = ns.server.connections.values()
    return conn


@pytest_twisted.ensureDeferred
async def test_push_disabled_answers_subscribe_with_not_supported(make_world_server):
    ns = make_world_server({"push": {"enabled": False}})
    client = await connect(ns.port)
    resp = await client.call(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(["T"], "x")
    )
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


@pytest_twisted.ensureDeferred
async def test_a_client_that_never_reads_is_bounded_while_others_keep_receiving(make_world_server):
    bound = 64 * 1024
    ns = make_world_server({"server": {"output_buffer_bytes": bound}})
    topics = [f"topic-{i:04d}-" + "x" * 80 for i in range(1000)]
    broker = await broker_with(ns, *topics)
    reader = await connect(ns.port)
    stalled = await connect(ns.port)
    await subscribe(reader, *topics)
    await subscribe(stalled, *topics)
    stalled_conn = max(ns.server.connections.values(), key=lambda c: c.conn_id)
    stalled.transport.pauseProducing()  # stop reading: the send buffer fills, then ours

    frame_bytes = 0
    peak = 0
    for i in range(120):
        code = (
            RequestCode.WIPE_WRITE_PERM_OF_BROKER
            if i % 2 == 0
            else (RequestCode.ADD_WRITE_PERM_OF_BROKER)
        )
        await broker.call(code, {"brokerName": "broker-a"})
        ns.clock.advance(TICK)
        await reader.wait_pushed(i + 1)
        frame_bytes = max(frame_bytes, len(reader.pushed[-1].body))
        peak = max(peak, stalled_conn.unsent_bytes)
    assert len(notifications(reader)) == 120
    assert ns.server.stats()["slow_subscriber_skips"] > 0
    # One frame may be accepted while the buffer is just under the bound.
    assert peak <= bound + frame_bytes + 1024
    assert ns.server.detector.pending_topics_of(stalled_conn) <= len(topics)

    # Once it reads again it gets one frame covering what it missed, with no sequence gap.
    stalled.transport.resumeProducing()
    for _ in range(50):
        await round_trip(stalled)
        ns.clock.advance(TICK)
        if ns.server.detector.pending_topics_of(stalled_conn) == 0:
            break
    await round_trip(stalled)
    seen = notifications(stalled)
    assert [n.sequence for n in seen] == list(range(1, len(seen) + 1))
    assert len(seen) < 120
    latest = {c.topic: c.version for n in seen for c in n.changes}
    expected = {c.topic: c.version for n in notifications(reader) for c in n.changes}
    assert latest == expected
