"""Sending through every kind of producer (``support.producer_drivers``: Twisted, asyncio,
uvloop): connections kept per broker, answers other than OK, busy brokers and their backoff,
refusals, the fault strategy and its detector against black-holed and slow brokers, GoAway,
departures and rolling restarts. A real name server, broker stand-ins on loopback, every timer
on fake clocks the cases advance (connections are real).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import pytest_twisted
from support.memory_world import until
from support.producer_drivers import STEP_S, ProducerDriver

from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig, SendOutcome
from client_push.producer.send_answer import SendStatus
from client_push.producer.send_core import BrokerRefusedError, SendError
from namesrv_sandbox.standin import BrokerStandIn
from protocol.codes import ResponseCode
from protocol.message import MessageError

NAMES = ("broker-a", "broker-b", "broker-c")
NO_DETECTOR = FaultStrategyConfig(detector_enabled=False)
NAMESRV_PUSH = {"tick_interval_ms": 1_000}
"""The name server's default tick: departures and arrivals are announced once a second."""
SEED = 5
"""The producers' random choices where a case counts first attempts per broker."""


async def brokers(rig: ProducerDriver, names: tuple[str, ...] = NAMES) -> dict[str, BrokerStandIn]:
    """A stand-in for each of ``names``, serving topic T with 4 queues."""
    return {name: await rig.broker(name, {"T": 4}) for name in names}


def replace_answers(broker: BrokerStandIn, answer: Any) -> None:
    """``answer(cmd)`` instead of the stand-in's own handling of each SEND_MESSAGE_V2."""
    broker._send = answer  # type: ignore[method-assign]


@pytest_twisted.ensureDeferred
async def test_one_connection_per_broker_is_kept_and_reused(rig):
    bs = await brokers(rig)
    await rig.start(ProducerConfig(fault=NO_DETECTOR))
    await rig.send_many(30)
    assert rig.producer.connections.counters["connections_opened"] == 3
    assert all(b.counters["connections_accepted"] == 1 for b in bs.values())
    assert sum(b.received for b in bs.values()) == 30


@pytest_twisted.ensureDeferred
async def test_statuses_other_than_ok_are_stored_sends_with_their_status(rig):
    broker = (await brokers(rig, ("broker-a",)))["broker-a"]
    await rig.start(ProducerConfig())
    original = broker._send

    def flush_timeout(cmd: Any) -> Any:
        answer = original(cmd)
        answer.code = ResponseCode.FLUSH_DISK_TIMEOUT
        return answer

    replace_answers(broker, flush_timeout)
    result = await rig.send("T", b"x")
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT and result.attempts == 1
    assert (await rig.call(rig.producer.stats))["statuses"] == {"FLUSH_DISK_TIMEOUT": 1}


@pytest_twisted.ensureDeferred
async def test_black_holed_and_slow_brokers_get_few_first_attempts_with_the_strategy(rig):
    bs = await brokers(rig)
    bs["broker-a"].black_hole()
    bs["broker-b"].slow(800)
    shares = {}
    for strategy in ("5x", "off"):
        await rig.start(ProducerConfig(fault=FaultStrategyConfig.preset(strategy)), SEED)
        results = await rig.send_many(60)
        assert all(r.status is SendStatus.SEND_OK for r in results)
        firsts = rig.producer.first_attempts_by_broker
        shares[strategy] = firsts["broker-a"] + firsts["broker-b"]
    # With the strategy, after the first failure each bad broker is isolated; without it,
    # round-robin keeps sending two thirds of first attempts to them.
    assert shares["5x"] <= 4
    assert shares["off"] >= 30


@pytest.mark.parametrize("detector", [True, False])
@pytest_twisted.ensureDeferred
async def test_the_first_wave_of_sends_reaches_the_bad_brokers_only_without_the_detector(
    rig, detector
):
    bs = await brokers(rig)
    bs["broker-a"].black_hole()
    bs["broker-b"].slow(800)
    # the bound on the first probe is not under test here: a generous one, so the fake clock
    # (driven faster than real time) cannot end the wait before loopback answers
    fault = FaultStrategyConfig.preset("5x" if detector else "4x", detector=detector)
    await rig.start(ProducerConfig(fault=replace(fault, first_probe_wait_ms=60_000)))
    wave = [rig.start_send("T", b"w%d" % i) for i in range(24)]  # all in flight before any answer
    results = [await rig.finish(d) for d in wave]
    assert all(r.status is SendStatus.SEND_OK for r in results)
    firsts = rig.producer.first_attempts_by_broker
    bad = firsts["broker-a"] + firsts["broker-b"]
    if detector:  # the route's brokers were probed first; only broker-c answered
        assert bad == 0 and rig.producer.counters["retries"] == 0
    else:  # round-robin over brokers nobody has heard from: two thirds to the bad ones
        assert bad >= 8


@pytest_twisted.ensureDeferred
async def test_a_busy_broker_costs_retries_but_every_send_succeeds_on_the_others(rig):
    bs = await brokers(rig)
    bs["broker-c"].busy()
    await rig.start(ProducerConfig(fault=FaultStrategyConfig.preset("off")))
    results = await rig.send_many(30)
    assert all(r.queue.broker_name != "broker-c" for r in results)
    assert rig.producer.counters["answers_busy"] >= 2 and rig.producer.counters["failed"] == 0
    assert bs["broker-c"].received == 0


@pytest_twisted.ensureDeferred
async def test_busy_answers_are_not_retried_when_switched_off(rig):
    bs = await brokers(rig, ("broker-a",))
    bs["broker-a"].busy(ResponseCode.FLOW_CONTROL, "flow control")
    await rig.start(ProducerConfig(retry_on_busy=False))
    with pytest.raises(SendError, match="215"):
        await rig.send("T", b"x")
    assert rig.producer.counters["answers_busy"] == 1 and rig.producer.counters["retries"] == 0


@pytest_twisted.ensureDeferred
async def test_a_message_the_broker_refuses_is_not_retried(rig):
    broker = (await brokers(rig, ("broker-a",)))["broker-a"]
    await rig.start(ProducerConfig())
    replace_answers(
        broker,
        lambda cmd: cmd.make_response(ResponseCode.MESSAGE_ILLEGAL, "the message is illegal"),
    )
    with pytest.raises(BrokerRefusedError, match="illegal") as info:
        await rig.send("T", b"x")
    assert info.value.attempts == 1 and info.value.code == ResponseCode.MESSAGE_ILLEGAL


@pytest_twisted.ensureDeferred
async def test_bad_messages_fail_before_anything_is_sent(rig):
    await brokers(rig, ("broker-a",))
    await rig.start(ProducerConfig())
    with pytest.raises(MessageError, match="empty"):
        await rig.send("T", b"")
    with pytest.raises(MessageError, match="separator"):
        await rig.send("T", b"x", tags="a\x02")
    assert rig.producer.connections.counters["connections_opened"] == 0


@pytest_twisted.ensureDeferred
async def test_with_go_away_ignored_sends_keep_going_to_the_leaving_broker(rig):
    bs = await brokers(rig, ("broker-a", "broker-b"))
    await rig.start(ProducerConfig(honour_go_away=False, fault=NO_DETECTOR))
    await rig.send_many(8)  # both connections open
    bs["broker-a"].shutdown(grace_ms=60_000)
    await rig.send_many(20)
    assert rig.producer.connections.counters["go_away_received"] == 1
    assert "brokers_going_away" not in await rig.call(rig.producer.routing.stats)


@pytest_twisted.ensureDeferred
async def test_a_departed_broker_is_avoided_until_the_route_shows_it_back(rig):
    bs = await brokers(rig, ("broker-a", "broker-b"))
    await rig.start(ProducerConfig())
    await rig.send_many(2)
    await rig.call(rig.producer.routing.broker_gone, "broker-a")
    results = await rig.send_many(10)
    assert {r.queue.broker_name for r in results} == {"broker-b"}
    # the route without it (the name server's departure heard), then with it again at the
    # same address: back at once, before departed_avoid_ms
    a = bs["broker-a"]
    await rig.kill_master(a)
    await rig.until(lambda: rig.producer.routing.stats()["brokers_gone"] == 2)
    await rig.send_many(2)
    await rig.broker("broker-a", {"T": 4}, port=a.port)
    await rig.refetch("T")
    await rig.send_many(1)  # a selection sees the route show it back
    # the detector's first probe of the restarted broker answers (a later round probes again
    # when the fake clocks outran loopback), well within departed_avoid_ms
    table = rig.producer.routing.table
    await rig.advancing_until(
        lambda: table.is_available("broker-a", rig.now() * 1e3),
        seconds=FaultStrategyConfig().departed_avoid_ms / 2000,
    )
    results = await rig.send_many(10)
    assert "broker-a" in {r.queue.broker_name for r in results}
    assert (await rig.call(rig.producer.routing.stats))["brokers_returned"] == 1


@pytest_twisted.ensureDeferred
async def test_with_every_broker_isolated_sends_go_to_those_the_probe_reaches(rig):
    bs = await brokers(rig)
    await rig.start(ProducerConfig(fault=FaultStrategyConfig.preset("4x")))
    table = rig.producer.routing.table
    await rig.send_many(3)  # the route is held
    for name in NAMES:  # all isolated by failures
        await rig.call(rig.producer.routing.report_send, name, 3_000, SendOutcome.UNREACHABLE)
    bs["broker-a"].black_hole()
    await rig.run_for(2.3)  # one detector round: b and c answer their probes, a does not
    now = int(rig.now() * 1000)

    def isolated_and_probed() -> bool:
        return (
            not any(table.is_available(n, now) for n in NAMES)
            and table.is_reachable("broker-b", now)
            and not table.is_reachable("broker-a", now)
        )

    await rig.until(isolated_and_probed)  # the probes' answers (or their lack) are in
    results = await rig.send_many(12)
    assert "broker-a" not in {r.queue.broker_name for r in results}


@pytest_twisted.ensureDeferred
async def test_a_black_holed_broker_that_recovers_is_used_within_interval_plus_isolation(rig):
    bs = await brokers(rig, ("broker-a", "broker-b"))
    fault = FaultStrategyConfig.preset("5x")
    await rig.start(ProducerConfig(fault=fault))
    bs["broker-a"].black_hole()
    await rig.send_many(6)
    isolated_at = rig.now()
    bs["broker-a"].normal()
    budget_s = (fault.detect_interval_ms + fault.isolation_for(fault.failure_latency_ms)) / 1000
    used_again = None
    while rig.now() - isolated_at <= budget_s + 1:
        result = await rig.send("T", b"x")
        if result.queue.broker_name == "broker-a":
            used_again = rig.now() - isolated_at
            break
        await rig.advance(0.25)
    assert used_again is not None and used_again <= budget_s + STEP_S * 10


@pytest_twisted.ensureDeferred
async def test_connections_to_brokers_that_left_every_route_are_closed(rig):
    bs = await brokers(rig, ("broker-a", "broker-b"))
    await rig.start(ProducerConfig(fault=NO_DETECTOR))
    await rig.send_many(8)
    assert rig.producer.connections.connections == 2
    a = bs["broker-a"]
    a._register_loop.stop()  # type: ignore[union-attr]
    await rig.settled(a._unregister_all())  # leaves the route but keeps serving
    await rig.refetch("T")
    await rig.advance(30)
    await rig.until(lambda: rig.producer.connections.connections == 1)
    assert rig.producer.connections.counters["connections_dropped"] == 1


@pytest_twisted.ensureDeferred
async def test_busy_answers_wait_the_configured_backoff_doubling_up_to_its_cap(rig):
    bs = await brokers(rig, ("broker-a",))
    bs["broker-a"].busy()
    await rig.start(
        ProducerConfig(
            busy_backoff_ms=300,
            busy_backoff_max_ms=400,
            send_timeout_ms=60_000,
            fault=FaultStrategyConfig.preset("off"),
        )
    )
    started = rig.now()
    with pytest.raises(SendError, match="answered code 2"):
        await rig.send("T", b"x")
    # three busy answers; waits of 300 then min(600, 400) ms before the two retries
    assert rig.producer.counters["answers_busy"] == 3
    assert 0.7 <= rig.now() - started < 0.7 + 10 * STEP_S


@pytest_twisted.ensureDeferred
async def test_a_rolling_restart_with_go_away_fails_no_send_and_every_broker_comes_back(rig):
    bs = await brokers(rig)
    await rig.start(ProducerConfig(retries=0))  # any failed attempt is a failed send
    producer = rig.producer
    await rig.send_many(12)
    for name in NAMES:
        old = bs[name]
        stopped = old.shutdown(grace_ms=1_000)
        await until(lambda: producer.counters["go_away_received"] >= 1)
        await rig.send_many(10)  # during the grace
        await rig.finish(stopped)
        await rig.send_many(10)  # while it is down
        await rig.broker(name, {"T": 4}, port=old.port)
        await rig.until_routed(name)  # the name server announced it back
        await rig.send_many(1)  # a selection sees the route show it back
        # Detector rounds probe it. The fake clocks run faster than loopback can answer, so
        # a probe may time out; a later round probes it again.
        await rig.advancing_until(
            lambda name=name: producer.routing.table.is_available(name, rig.now() * 1e3),
            seconds=10.0,
        )
        await rig.call(producer.counters.__setitem__, "go_away_received", 0)
    results = await rig.send_many(30)
    assert producer.counters["failed"] == 0 and producer.counters["attempts_unreachable"] == 0
    assert {r.queue.broker_name for r in results} == set(NAMES)


@pytest_twisted.ensureDeferred
async def test_a_departure_the_name_server_announces_keeps_sends_off_until_the_broker_is_back(rig):
    bs = await brokers(rig, ("broker-a", "broker-b"))
    await rig.start(ProducerConfig(fault=NO_DETECTOR))
    producer = rig.producer
    await rig.send_many(8)
    await until(lambda: rig.client.push_active)
    a = bs["broker-a"]
    await rig.settled(
        a.shutdown(grace_ms=0, go_away=False)
    )  # unregisters: a departure is announced
    for _ in range(50):
        if (await rig.call(producer.routing.stats)).get("brokers_gone"):
            break
        await rig.run_for(1.0)  # the name server's tick
    assert (await rig.call(producer.routing.stats))["brokers_gone"] == 1
    results = await rig.send_many(10)
    assert {r.queue.broker_name for r in results} == {"broker-b"}
    await rig.broker("broker-a", {"T": 4}, port=a.port)  # an arrival; the route shows it back
    used: set[str] = set()
    for _ in range(100):
        used |= {r.queue.broker_name for r in await rig.send_many(4)}
        if "broker-a" in used:
            break
        await rig.advance(1.0)
    assert "broker-a" in used
    assert (await rig.call(producer.routing.stats))["brokers_returned"] == 1
    assert producer.counters["failed"] == 0
