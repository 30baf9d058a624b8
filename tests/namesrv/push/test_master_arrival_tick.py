"""A broker name's new master brings the next tick forward (``push.master_arrival_tick_ms``).

Producers fail their sends from a master's death until they learn who took over; waiting for the
regular tick would add up to a whole interval to that window. Wire-level tests against the real
server in the deterministic world (``support.memory_world``: one virtual clock, each timer run at
its own time): the regular tick comes every ``TICK`` s, so a subscriber that hears of the new
master after ``EARLY`` s heard it from the brought-forward tick.
With the journal on, each tick brought forward writes one ``early_tick`` record when it runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest_twisted
from support.fake_broker import register_request, topic_configs, unregister_request
from support.journal_files import journal_records
from support.memory_world import WorldDeferred, connect, the_world
from support.push_wire import TICK, notifications, round_trip, subscribe

from namesrv.ops.metrics import NamesrvCollector
from protocol.codes import RequestCode
from protocol.push_codec import BrokerChangeKind

MASTER = "10.0.0.1:10911"
SLAVE = "10.0.0.2:10911"
EARLY = 0.05
"""The default ``push.master_arrival_tick_ms``, in seconds."""


async def master_and_slave(ns: Any) -> Any:
    """broker-a's master and slave serve T1; a subscriber of T1 has heard everything so far."""
    master = await connect(ns.port)
    await master.request(register_request(topic_configs("T1"), broker_addr=MASTER))
    slave = await connect(ns.port)
    await slave.request(register_request(topic_configs("T1"), broker_addr=SLAVE, broker_id=1))
    ns.clock.advance(TICK)
    client = await connect(ns.port)
    await subscribe(client, "T1")
    ns.clock.advance(TICK)
    await round_trip(client)
    client.pushed.clear()
    ns.server.counters["expedited_ticks"] = 0  # the master's start-up brought one forward
    return master, slave, client


async def master_address(client: Any) -> Any:
    resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"})
    [data] = json.loads(resp.body)["brokerDatas"]
    return data["brokerAddrs"].get("0")


async def failed_over(ns: Any) -> Any:
    """:func:`master_and_slave`, then the master leaves and its slave registers as master
    (what controller mode does)."""
    master, slave, client = await master_and_slave(ns)
    await master.request(unregister_request(broker_addr=MASTER))
    await slave.request(register_request(topic_configs("T1"), broker_addr=SLAVE, broker_id=0))
    return master, slave, client


async def pushed_only_at_the_regular_tick(ns: Any, client: Any) -> None:
    """Nothing reaches ``client`` until the regular tick, which pushes it one notification."""
    ns.clock.advance(TICK - 0.01)
    await round_trip(client)
    assert notifications(client) == []
    ns.clock.advance(0.01)
    await client.wait_pushed(1)


def exported(ns: Any, name: str) -> float | None:
    """The value of sample ``name`` on the metrics page."""
    for family in NamesrvCollector(ns.server).collect():
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    return None


def early_ticks_pending(ns: Any) -> int:
    return sum(
        getattr(call.func, "__name__", "") == "_expedited_tick"
        for call in ns.clock.getDelayedCalls()
    )


def arrivals(client: Any) -> list[tuple[int, str]]:
    return [
        (a.broker_id, a.addr)
        for note in notifications(client)
        for entry in note.brokers
        if entry.kind == BrokerChangeKind.ARRIVED
        for a in entry.addrs
    ]


@pytest_twisted.ensureDeferred
async def test_a_promoted_slave_is_pushed_within_the_early_tick(make_world_server):
    ns = make_world_server()
    _master, _slave, client = await failed_over(ns)
    ns.clock.advance(EARLY)
    await client.wait_pushed(1)
    assert arrivals(client) == [(0, SLAVE)]
    assert (await master_address(client)) == SLAVE
    assert ns.server.stats()["expedited_ticks"] == 1
    assert exported(ns, "rocketmq_namesrv_expedited_ticks_total") == 1
    assert early_ticks_pending(ns) == 0


@pytest_twisted.ensureDeferred
async def test_off_the_new_master_waits_for_the_regular_tick(make_world_server):
    ns = make_world_server({"push": {"master_arrival_tick_ms": 0}})
    _master, _slave, client = await failed_over(ns)
    await pushed_only_at_the_regular_tick(ns, client)
    assert arrivals(client) == [(0, SLAVE)]
    assert ns.server.stats()["expedited_ticks"] == 0


@pytest_twisted.ensureDeferred
async def test_a_slave_arriving_waits_for_the_regular_tick(make_world_server):
    ns = make_world_server()
    _master, _slave, client = await master_and_slave(ns)
    other = await connect(ns.port)
    await other.request(
        register_request(topic_configs("T1"), broker_addr="10.0.0.3:10911", broker_id=2)
    )
    await pushed_only_at_the_regular_tick(ns, client)
    assert arrivals(client) == [(2, "10.0.0.3:10911")]
    assert ns.server.stats()["expedited_ticks"] == 0


@pytest_twisted.ensureDeferred
async def test_at_most_one_early_tick_between_two_regular_ones(make_world_server):
    """A cluster of masters starting at once adds one tick per interval, not one per broker."""
    ns = make_world_server()
    _master, _slave, client = await master_and_slave(ns)
    brokers = [await connect(ns.port) for _ in range(5)]
    for i, broker in enumerate(brokers):
        await broker.request(
            register_request(
                topic_configs("T1"), broker_name=f"new-{i}", broker_addr=f"10.0.1.{i}:10911"
            )
        )
        ns.clock.advance(EARLY)  # the first arrival's early tick runs; the rest wait
    await client.wait_pushed(1)
    await round_trip(client)
    assert len(notifications(client)) == 1
    assert ns.server.stats()["expedited_ticks"] == 1
    ns.clock.advance(TICK)  # a regular tick: the next master may bring one forward again
    extra = await connect(ns.port)
    await extra.request(
        register_request(topic_configs("T1"), broker_name="new-x", broker_addr="10.0.2.1:10911")
    )
    ns.clock.advance(EARLY)
    await client.wait_pushed(3)
    assert ns.server.stats()["expedited_ticks"] == 2


async def failed_over_with_a_late_early_tick(make_world_server: Any) -> Any:
    """A failover whose early tick is 5 s away: later than the next regular tick."""
    ns = make_world_server({"push": {"master_arrival_tick_ms": 5_000}})
    _master, _slave, client = await failed_over(ns)
    assert early_ticks_pending(ns) == 1
    return ns, client


@pytest_twisted.ensureDeferred
async def test_a_regular_tick_before_it_carries_the_change_and_drops_the_early_one(
    make_world_server,
):
    ns, client = await failed_over_with_a_late_early_tick(make_world_server)
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    assert early_ticks_pending(ns) == 0  # the regular tick dropped it
    ns.clock.advance(5.0)
    await round_trip(client)
    assert len(notifications(client)) == 1


@pytest_twisted.ensureDeferred
async def test_stopping_the_server_drops_a_pending_early_tick(make_world_server):
    ns, _client = await failed_over_with_a_late_early_tick(make_world_server)
    await WorldDeferred(the_world(), ns.server.stop(grace_ms=0))
    assert early_ticks_pending(ns) == 0


def journaled(tmp_path: Path, **journal: Any) -> dict[str, Any]:
    return {"journal": {"directory": str(tmp_path), **journal}}


def flushed_records(ns: Any, tmp_path: Path, event: str | None = None) -> list[dict[str, Any]]:
    """The records written so far (of ``event`` only, when given)."""
    ns.server.journal.flush()
    return journal_records(tmp_path, event)


@pytest_twisted.ensureDeferred
async def test_each_early_tick_is_journaled_when_it_runs_and_no_regular_one_is(
    make_world_server, tmp_path
):
    ns = make_world_server(journaled(tmp_path))
    # The master's start-up brought one forward; it ran ``EARLY`` after that register (t=0).
    _master, slave, client = await failed_over(ns)
    ns.clock.advance(EARLY)
    await client.wait_pushed(1)
    ns.clock.advance(3 * TICK)  # regular ticks with nothing to send
    await slave.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    ns.clock.advance(TICK)  # a regular tick that sends
    await client.wait_pushed(2)
    records = flushed_records(ns, tmp_path)
    assert [r for r in records if r["event"] == "early_tick"] == [
        {"ts_ms": 50, "event": "early_tick", "delay_ms": 50},
        {"ts_ms": 2_050, "event": "early_tick", "delay_ms": 50},
    ]
    sent = [r["ts_ms"] for r in records if r["event"] == "notification_sent"]
    # the early tick's frame, then the regular tick's at 6 s: the first after the wipe at 5.05 s
    assert sent == [2_050, 6_000]
    assert ns.server.stats()["expedited_ticks"] == 1


@pytest_twisted.ensureDeferred
async def test_the_record_carries_the_configured_delay(make_world_server, tmp_path):
    ns = make_world_server({**journaled(tmp_path), "push": {"master_arrival_tick_ms": 300}})
    _master, _slave, client = await failed_over(ns)
    ns.clock.advance(0.3)
    await client.wait_pushed(1)
    assert flushed_records(ns, tmp_path, "early_tick")[-1] == {
        "ts_ms": 2_300,
        "event": "early_tick",
        "delay_ms": 300,
    }


@pytest_twisted.ensureDeferred
async def test_an_early_tick_dropped_for_a_regular_one_is_not_journaled(
    make_world_server, tmp_path
):
    ns = make_world_server({**journaled(tmp_path), "push": {"master_arrival_tick_ms": 5_000}})
    _master, _slave, client = await failed_over(ns)  # its start-up's one was dropped too
    assert early_ticks_pending(ns) == 1
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    ns.clock.advance(5.0)
    await round_trip(client)
    assert early_ticks_pending(ns) == 0
    assert ns.server.stats()["expedited_ticks"] == 1  # brought forward, then dropped
    assert flushed_records(ns, tmp_path, "early_tick") == []
    assert flushed_records(ns, tmp_path, "notification_sent") != []


@pytest_twisted.ensureDeferred
async def test_the_flood_limit_never_drops_an_early_tick(make_world_server, tmp_path):
    """One record a second: the failover's second broker event is dropped, its tick is not."""
    ns = make_world_server(journaled(tmp_path, max_records_per_second=1))
    _master, _slave, client = await failed_over(ns)
    ns.clock.advance(EARLY)
    await client.wait_pushed(1)
    ns.clock.advance(TICK)  # the second is over: its drops are summarized
    records = flushed_records(ns, tmp_path)
    assert ns.server.journal.suppressed_records >= 1
    [summary] = [r for r in records if r["event"] == "journal_suppressed" and r["ts_ms"] >= 2_000]
    assert summary["events"].get("broker_event", 0) >= 1
    assert "early_tick" not in summary["events"]
    assert [r["ts_ms"] for r in records if r["event"] == "early_tick"] == [50, 2_050]
