"""Producer queue selection against the real name server, with brokers faked on loopback.

The name server and route client run on the cluster's fake clock, as do the detector's timer
and its probe timeouts; connections are real. A fake broker answers probes, stays silent, or
announces a graceful shutdown.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest_twisted
from support.loopback_broker import FakeBroker
from support.loopback_wait import until
from twisted.internet import defer, reactor

from client_push.producer.fault_table import FaultStrategyConfig, SendOutcome
from client_push.producer.routing import ProducerRouting
from protocol.codes import ResponseCode
from protocol.push_codec import encode_go_away

INTERVAL_S = FaultStrategyConfig().detect_interval_ms / 1000
TIMEOUT_S = FaultStrategyConfig().detect_timeout_ms / 1000
WAIT_S = FaultStrategyConfig().first_probe_wait_ms / 1000


async def two_brokers(
    cluster: Any,
    silent_b: bool = False,
    *,
    silent_a: bool = False,
    config: FaultStrategyConfig | None = None,
) -> tuple[Any, FakeBroker, FakeBroker]:
    _server, port = cluster.start_server()
    a = FakeBroker(None if silent_a else ResponseCode.SUCCESS)
    b = FakeBroker(None if silent_b else ResponseCode.SUCCESS)
    cluster.fakes = [a, b]
    await cluster.broker(port, "T", broker_name="broker-a", broker_addr=a.addr)
    await cluster.broker(port, "T", broker_name="broker-b", broker_addr=b.addr)
    client = cluster.client(port)
    routing = ProducerRouting(client, config, reactor=reactor, clock=cluster.clock)
    routing.start()
    cluster.routing = routing
    return routing, a, b


async def choose(routing: ProducerRouting, n: int, last: str | None = None) -> Counter[str]:
    return Counter([(await routing.select_queue("T", last)).broker_name for _ in range(n)])


async def shut(cluster: Any) -> None:
    cluster.routing.stop()
    for fake in cluster.fakes:
        await fake.close()


@pytest_twisted.ensureDeferred
async def test_queues_come_from_the_real_route_and_retries_go_to_the_other_broker(cluster):
    routing, _a, _b = await two_brokers(cluster)
    try:
        await choose(routing, 1)  # the route is held, both brokers get a first probe
        await until(lambda: routing.stats().get("probe.probes_answered") == 2)
        spread = await choose(routing, 80)
        assert spread == {"broker-a": 40, "broker-b": 40}  # 4 write queues each, round-robin
        assert await choose(routing, 10, last="broker-a") == {"broker-b": 10}
    finally:
        await shut(cluster)


@pytest_twisted.ensureDeferred
async def test_the_detector_brings_back_the_broker_that_answers_and_not_the_silent_one(cluster):
    routing, a, b = await two_brokers(cluster, silent_b=True)
    try:
        await choose(routing, 1)  # the route is held now; its brokers get a first probe
        await until(lambda: len(a.probes) == 1 and len(b.probes) == 1)
        await until(lambda: routing.stats().get("probe.probes_answered") == 1)
        routing.report_send("broker-a", 0, SendOutcome.UNREACHABLE)
        routing.report_send("broker-b", 0, SendOutcome.UNREACHABLE)
        assert set(await choose(routing, 20)) == {"broker-a", "broker-b"}  # nothing better: any

        cluster.clock.advance(INTERVAL_S)  # b's first probe timed out; a round: both probed
        await until(lambda: len(a.probes) == 2 and len(b.probes) == 2)
        await until(lambda: routing.stats().get("probe.probes_answered") == 2)
        cluster.clock.advance(TIMEOUT_S)  # b's probe times out again
        await until(lambda: routing.stats().get("probe.probes_failed") == 2)
        assert await choose(routing, 20) == {"broker-a": 20}  # reachable beats unreachable

        cluster.clock.advance(INTERVAL_S)
        await until(lambda: len(a.probes) == 3)
        assert a.opened == 1  # the probe connection is kept between rounds
    finally:
        await shut(cluster)


@pytest_twisted.ensureDeferred
async def test_a_broker_going_away_is_avoided_until_its_grace_is_over_and_it_answers(cluster):
    routing, a, _b = await two_brokers(cluster)
    try:
        await choose(routing, 1)  # a first probe of each broker
        await until(lambda: routing.stats().get("probe.probes_answered") == 2)
        routing.report_send("broker-a", 600, SendOutcome.OK)  # 30 s isolation: gets probed
        cluster.clock.advance(INTERVAL_S)
        await until(lambda: len(a.probes) == 2 and len(a.conns) == 1)
        a.send_go_away(encode_go_away(5_000, [], "restart"))
        await until(lambda: routing.stats().get("brokers_going_away") == 1)
        await until(lambda: not a.conns)  # the client closed that connection
        assert await choose(routing, 20) == {"broker-b": 20}
        assert await choose(routing, 10, last="broker-b") == {"broker-b": 10}  # a is going away

        cluster.clock.advance(30.0)  # past the grace and the isolation; the next round probes
        await until(lambda: len(a.probes) == 3)
        await until(lambda: routing.stats().get("brokers_reachable_again") == 1)
        assert a.opened == 2  # a fresh connection after GoAway
        assert set(await choose(routing, 20)) == {"broker-a", "broker-b"}
    finally:
        await shut(cluster)


@pytest_twisted.ensureDeferred
async def test_reports_about_unknown_brokers_and_routes_that_lose_a_broker_stay_bounded(cluster):
    routing, _a, _b = await two_brokers(cluster)
    try:
        await choose(routing, 1)  # broker-a and broker-b are tracked for the detector
        routing.report_send("no-such-broker", 20_000, SendOutcome.FAILED)
        assert routing.stats()["fault_items"] == 3
        cluster.clock.advance(INTERVAL_S)  # the round drops what no held route names
        await until(lambda: routing.stats()["fault_items"] == 2)
        assert routing.table.item("no-such-broker") is None
    finally:
        await shut(cluster)


@pytest_twisted.ensureDeferred
async def test_the_first_selections_of_a_route_go_to_the_broker_whose_probe_answered(cluster):
    routing, a, b = await two_brokers(cluster, silent_b=True)
    try:
        wave = [defer.ensureDeferred(routing.select_queue("T")) for _ in range(30)]
        await until(lambda: all(d.called for d in wave))
        assert Counter([(await d).broker_name for d in wave]) == {"broker-a": 30}
        assert len(a.probes) == 1 and len(b.probes) == 1  # probed when the route was first used
        assert routing.stats()["first_probe_waits"] == 30
        assert "first_probe_waits_expired" not in routing.stats()

        cluster.clock.advance(TIMEOUT_S)  # b's first probe times out: held off until it answers
        await until(lambda: routing.stats().get("unheard_brokers_held_off") == 1)
        assert await choose(routing, 20) == {"broker-a": 20}
        assert (await choose(routing, 1, last="broker-a")).total() == 1  # never stuck

        b.answer = ResponseCode.SUCCESS
        cluster.clock.advance(INTERVAL_S)  # the next round probes b, and it answers
        await until(lambda: routing.stats().get("brokers_reachable_again") == 1)
        assert await choose(routing, 40) == {"broker-a": 20, "broker-b": 20}
    finally:
        await shut(cluster)


@pytest_twisted.ensureDeferred
async def test_when_no_broker_answers_the_first_selection_waits_only_its_bound(cluster):
    routing, a, b = await two_brokers(cluster, silent_b=True, silent_a=True)
    try:
        d = defer.ensureDeferred(routing.select_queue("T"))
        await until(lambda: len(a.probes) == 1 and len(b.probes) == 1)
        cluster.clock.advance(WAIT_S - 0.001)
        # Both brokers are silent: only the clock can end the wait.
        assert not d.called
        cluster.clock.advance(0.001)
        assert (await d).broker_name in {"broker-a", "broker-b"}
        assert routing.stats()["first_probe_waits_expired"] == 1
        # later selections of the same route do not wait again
        assert (await choose(routing, 10)).total() == 10
        assert routing.stats()["first_probe_waits"] == 1
    finally:
        await shut(cluster)


@pytest_twisted.ensureDeferred
async def test_stopping_releases_selections_waiting_for_a_first_probe(cluster):
    routing, _a, _b = await two_brokers(cluster, silent_b=True, silent_a=True)
    try:
        d = defer.ensureDeferred(routing.select_queue("T"))
        await until(lambda: routing.stats().get("first_probe_waits") == 1)
        routing.stop()
        assert (await d).broker_name in {"broker-a", "broker-b"}
    finally:
        await shut(cluster)


@pytest_twisted.ensureDeferred
async def test_without_the_detector_nothing_is_probed_and_nothing_waits(cluster):
    config = FaultStrategyConfig(detector_enabled=False)
    routing, a, b = await two_brokers(cluster, silent_b=True, config=config)
    try:
        assert await choose(routing, 40) == {"broker-a": 20, "broker-b": 20}
        stats = routing.stats()
        assert not stats.get("probes_sent") and "first_probe_waits" not in stats
        assert not a.probes and not b.probes
    finally:
        await shut(cluster)
