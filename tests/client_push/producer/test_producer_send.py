"""The producer end to end: a real name server, broker stand-ins on loopback, the route client
and the producer, every timer on the cluster's fake clock (connections are real)."""

from __future__ import annotations

import random
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
import pytest_twisted
from support.loopback_wait import until
from support.producer_drive import drive
from twisted.internet import defer, reactor, task

from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.producer import BrokerRefusedError, Producer, SendError
from client_push.producer.send_answer import SendStatus
from protocol.codes import ResponseCode
from protocol.message import MessageError
from sandbox.standin import BrokerStandIn

NAMES = ("broker-a", "broker-b", "broker-c")
STEP_S = 0.02


class Rig:
    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.clock = cluster.clock
        self.brokers: dict[str, BrokerStandIn] = {}
        self.producers: list[Producer] = []
        self.port = 0

    async def start(self, names: tuple[str, ...] = NAMES, **server: Any) -> None:
        _server, self.port = self.cluster.start_server(**server)
        for name in names:
            await self.add_broker(name)

    async def add_broker(self, name: str, port: int = 0) -> BrokerStandIn:
        broker = BrokerStandIn(
            name,
            {"T": 4},
            [f"127.0.0.1:{self.port}"],
            reactor=reactor,
            clock=self.clock,
            port=port,
        )
        await broker.start()
        assert broker.counters["registered"] == 1
        self.brokers[name] = broker
        return broker

    def producer(self, config: ProducerConfig | None = None) -> Producer:
        client = self.cluster.client(self.port)
        producer = Producer(
            client, "pg", config, reactor=reactor, clock=self.clock, rng=random.Random(5)
        )
        producer.start()
        self.producers.append(producer)
        return producer

    async def drive(self, d: defer.Deferred[Any], max_steps: int = 5_000) -> Any:
        """Let loopback traffic run, advancing the fake clock while ``d`` waits on a timer."""
        return await drive(self.clock, d, max_steps)

    async def send_many(self, producer: Producer, n: int) -> list[Any]:
        results = []
        for i in range(n):
            results.append(await self.drive(producer.send("T", b"m%d" % i)))
        return results

    async def close(self) -> None:
        for p in self.producers:
            p.stop()
        for b in self.brokers.values():
            await b.kill()


@pytest.fixture
def rig(cluster):
    r = Rig(cluster)
    yield r
    pytest_twisted.blockon(defer.ensureDeferred(r.close()))


@pytest_twisted.ensureDeferred
async def test_one_connection_per_broker_is_kept_and_reused(rig):
    await rig.start()
    producer = rig.producer(ProducerConfig(fault=FaultStrategyConfig(detector_enabled=False)))
    await rig.send_many(producer, 30)
    assert producer.connections.counters["connections_opened"] == 3
    assert all(b.counters["connections_accepted"] == 1 for b in rig.brokers.values())
    assert sum(b.received for b in rig.brokers.values()) == 30


@pytest_twisted.ensureDeferred
async def test_statuses_other_than_ok_are_stored_sends_with_their_status(rig):
    await rig.start(("broker-a",))
    producer = rig.producer()
    broker = rig.brokers["broker-a"]
    original = broker._send

    def flush_timeout(cmd: Any) -> Any:
        answer = original(cmd)
        answer.code = ResponseCode.FLUSH_DISK_TIMEOUT
        return answer

    broker._send = flush_timeout  # type: ignore[method-assign]
    result = await rig.drive(producer.send("T", b"x"))
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT and result.attempts == 1
    assert producer.stats()["statuses"] == {"FLUSH_DISK_TIMEOUT": 1}


@pytest_twisted.ensureDeferred
async def test_black_holed_and_slow_brokers_get_few_first_attempts_with_the_strategy(rig):
    await rig.start()
    rig.brokers["broker-a"].black_hole()
    rig.brokers["broker-b"].slow(800)
    shares = {}
    for strategy in ("5x", "off"):
        producer = rig.producer(ProducerConfig(fault=FaultStrategyConfig.preset(strategy)))
        results = await rig.send_many(producer, 60)
        assert all(r.status is SendStatus.SEND_OK for r in results)
        firsts = producer.first_attempts_by_broker
        shares[strategy] = firsts["broker-a"] + firsts["broker-b"]
        producer.stop()
    # With the strategy, after the first failure each bad broker is isolated; without it,
    # round-robin keeps sending two thirds of first attempts to them.
    assert shares["5x"] <= 4
    assert shares["off"] >= 30


@pytest.mark.parametrize("detector", [True, False])
@pytest_twisted.ensureDeferred
async def test_the_first_wave_of_sends_reaches_the_bad_brokers_only_without_the_detector(
    rig, detector
):
    await rig.start()
    rig.brokers["broker-a"].black_hole()
    rig.brokers["broker-b"].slow(800)
    # the bound on the first probe is not under test here: a generous one, so the fake clock
    # (driven faster than real time) cannot end the wait before loopback answers
    fault = FaultStrategyConfig.preset("5x" if detector else "4x", detector=detector)
    producer = rig.producer(ProducerConfig(fault=replace(fault, first_probe_wait_ms=60_000)))
    wave = [producer.send("T", b"w%d" % i) for i in range(24)]  # all in flight before any answer
    results = [await rig.drive(d) for d in wave]
    assert all(r.status is SendStatus.SEND_OK for r in results)
    firsts = producer.first_attempts_by_broker
    bad = firsts["broker-a"] + firsts["broker-b"]
    if detector:  # the route's brokers were probed first; only broker-c answered
        assert bad == 0 and producer.counters["retries"] == 0
    else:  # round-robin over brokers nobody has heard from: two thirds to the bad ones
        assert bad >= 8


@pytest_twisted.ensureDeferred
async def test_a_busy_broker_costs_retries_but_every_send_succeeds_on_the_others(rig):
    await rig.start()
    rig.brokers["broker-c"].busy()
    producer = rig.producer(ProducerConfig(fault=FaultStrategyConfig.preset("off")))
    results = await rig.send_many(producer, 30)
    assert all(r.queue.broker_name != "broker-c" for r in results)
    assert producer.counters["answers_busy"] >= 2 and producer.counters["failed"] == 0
    assert rig.brokers["broker-c"].received == 0


@pytest_twisted.ensureDeferred
async def test_busy_answers_are_not_retried_when_switched_off(rig):
    await rig.start(("broker-a",))
    rig.brokers["broker-a"].busy(ResponseCode.FLOW_CONTROL, "flow control")
    producer = rig.producer(ProducerConfig(retry_on_busy=False))
    with pytest.raises(SendError, match="215"):
        await rig.drive(producer.send("T", b"x"))
    assert producer.counters["answers_busy"] == 1 and producer.counters["retries"] == 0


@pytest_twisted.ensureDeferred
async def test_a_message_the_broker_refuses_is_not_retried(rig):
    await rig.start(("broker-a",))
    producer = rig.producer()
    broker = rig.brokers["broker-a"]
    broker._send = lambda cmd: cmd.make_response(  # type: ignore[method-assign]
        ResponseCode.MESSAGE_ILLEGAL, "the message is illegal"
    )
    with pytest.raises(BrokerRefusedError, match="illegal") as info:
        await rig.drive(producer.send("T", b"x"))
    assert info.value.attempts == 1 and info.value.code == ResponseCode.MESSAGE_ILLEGAL


@pytest_twisted.ensureDeferred
async def test_bad_messages_fail_before_anything_is_sent(rig):
    await rig.start(("broker-a",))
    producer = rig.producer()
    with pytest.raises(MessageError, match="empty"):
        await producer.send("T", b"")
    with pytest.raises(MessageError, match="separator"):
        await producer.send("T", b"x", tags="a\x02")
    assert producer.connections.counters["connections_opened"] == 0


@pytest_twisted.ensureDeferred
async def test_with_go_away_ignored_sends_keep_going_to_the_leaving_broker(rig):
    await rig.start(("broker-a", "broker-b"))
    producer = rig.producer(
        ProducerConfig(honour_go_away=False, fault=FaultStrategyConfig(detector_enabled=False))
    )
    await rig.send_many(producer, 8)  # both connections open
    rig.brokers["broker-a"].shutdown(grace_ms=60_000)
    await rig.send_many(producer, 20)
    assert producer.connections.counters["go_away_received"] == 1
    assert "brokers_going_away" not in producer.routing.stats()


@pytest_twisted.ensureDeferred
async def test_a_departed_broker_is_avoided_until_the_route_shows_it_back(rig):
    await rig.start(("broker-a", "broker-b"))
    producer = rig.producer()
    await rig.send_many(producer, 2)
    producer.routing.broker_gone("broker-a")
    results = await rig.send_many(producer, 10)
    assert {r.queue.broker_name for r in results} == {"broker-b"}
    # the route without it, then with it again: back at once, before departed_avoid_ms
    client = rig.cluster.clients[-1]
    await rig.brokers["broker-a"].kill()
    await rig.drive(defer.ensureDeferred(client._fetches.wait(client._fetches.fetch("T", "poll"))))
    await rig.send_many(producer, 2)
    await rig.add_broker("broker-a")
    await rig.drive(defer.ensureDeferred(client._fetches.wait(client._fetches.fetch("T", "poll"))))
    results = await rig.send_many(producer, 10)
    assert "broker-a" in {r.queue.broker_name for r in results}
    assert producer.routing.stats()["brokers_returned"] == 1


@pytest_twisted.ensureDeferred
async def test_with_every_broker_isolated_sends_go_to_those_the_probe_reaches(rig):
    await rig.start()
    producer = rig.producer(ProducerConfig(fault=FaultStrategyConfig.preset("4x")))
    table = producer.routing.table
    await rig.send_many(producer, 3)  # the route is held
    now = int(rig.clock.seconds() * 1000)
    for name in NAMES:  # all isolated by failures
        producer.routing.report_send(name, 3_000, outcome=_unreachable())
    rig.brokers["broker-a"].black_hole()
    # one detector round: b and c answer their probes, a does not
    await rig.drive(task.deferLater(rig.clock, 2.3, lambda: None))
    now = int(rig.clock.seconds() * 1000)
    assert not any(table.is_available(n, now) for n in NAMES)
    assert table.is_reachable("broker-b", now) and not table.is_reachable("broker-a", now)
    results = await rig.send_many(producer, 12)
    assert "broker-a" not in {r.queue.broker_name for r in results}


@pytest_twisted.ensureDeferred
async def test_a_black_holed_broker_that_recovers_is_used_within_interval_plus_isolation(rig):
    await rig.start(("broker-a", "broker-b"))
    fault = FaultStrategyConfig.preset("5x")
    producer = rig.producer(ProducerConfig(fault=fault))
    rig.brokers["broker-a"].black_hole()
    await rig.send_many(producer, 6)
    isolated_at = rig.clock.seconds()
    rig.brokers["broker-a"].normal()
    budget_s = (fault.detect_interval_ms + fault.isolation_for(fault.failure_latency_ms)) / 1000
    used_again = None
    while rig.clock.seconds() - isolated_at <= budget_s + 1:
        result = await rig.drive(producer.send("T", b"x"))
        if result.queue.broker_name == "broker-a":
            used_again = rig.clock.seconds() - isolated_at
            break
        rig.clock.advance(0.25)
    assert used_again is not None and used_again <= budget_s + STEP_S * 10


def _unreachable() -> Any:
    from client_push.producer.fault_table import SendOutcome

    return SendOutcome.UNREACHABLE


@pytest_twisted.ensureDeferred
async def test_connections_to_brokers_that_left_every_route_are_closed(rig):
    await rig.start(("broker-a", "broker-b"))
    producer = rig.producer(ProducerConfig(fault=FaultStrategyConfig(detector_enabled=False)))
    await rig.send_many(producer, 8)
    assert producer.connections.connections == 2
    a = rig.brokers["broker-a"]
    a._register_loop.stop()  # type: ignore[union-attr]
    await a._unregister_all()  # leaves the route but keeps serving
    client = rig.cluster.clients[-1]
    await rig.drive(defer.ensureDeferred(client._fetches.wait(client._fetches.fetch("T", "poll"))))
    rig.clock.advance(30)
    await until(lambda: producer.connections.connections == 1)
    assert producer.connections.counters["connections_dropped"] == 1


@pytest_twisted.ensureDeferred
async def test_busy_answers_wait_the_configured_backoff_doubling_up_to_its_cap(rig):
    await rig.start(("broker-a",))
    rig.brokers["broker-a"].busy()
    producer = rig.producer(
        ProducerConfig(
            busy_backoff_ms=300,
            busy_backoff_max_ms=400,
            send_timeout_ms=60_000,
            fault=FaultStrategyConfig.preset("off"),
        )
    )
    started = rig.clock.seconds()
    with pytest.raises(SendError, match="answered code 2"):
        await rig.drive(producer.send("T", b"x"))
    # three busy answers; waits of 300 then min(600, 400) ms before the two retries
    assert producer.counters["answers_busy"] == 3
    assert 0.7 <= rig.clock.seconds() - started < 0.7 + 10 * STEP_S


@pytest_twisted.ensureDeferred
async def test_a_rolling_restart_with_go_away_fails_no_send_and_every_broker_comes_back(rig):
    await rig.start()
    producer = rig.producer(ProducerConfig(retries=0))  # any failed attempt is a failed send
    await rig.send_many(producer, 12)
    for name in NAMES:
        old = rig.brokers[name]
        stopped = old.shutdown(grace_ms=1_000)
        await until(lambda: producer.counters["go_away_received"] >= 1)
        await rig.send_many(producer, 10)  # during the grace
        await rig.drive(stopped)
        await rig.send_many(producer, 10)  # while it is down
        await rig.add_broker(name, port=old.port)
        rig.clock.advance(2.5)  # a detector round probes it
        await until(partial(producer.routing.table.is_available, name, rig.clock.seconds() * 1e3))
        producer.counters["go_away_received"] = 0
    results = await rig.send_many(producer, 30)
    assert producer.counters["failed"] == 0 and producer.counters["attempts_unreachable"] == 0
    assert {r.queue.broker_name for r in results} == set(NAMES)


@pytest_twisted.ensureDeferred
async def test_a_departure_the_name_server_announces_keeps_sends_off_until_the_broker_is_back(rig):
    await rig.start(("broker-a", "broker-b"))
    producer = rig.producer(ProducerConfig(fault=FaultStrategyConfig(detector_enabled=False)))
    await rig.send_many(producer, 8)
    client = rig.cluster.clients[-1]
    await until(lambda: client.push_active)
    a = rig.brokers["broker-a"]
    await a.shutdown(grace_ms=0, go_away=False)  # unregisters: a departure is announced
    for _ in range(50):
        if producer.routing.stats().get("brokers_gone"):
            break
        rig.clock.advance(1.0)  # the name server's tick
        await task.deferLater(reactor, 0.01, lambda: None)
    assert producer.routing.stats()["brokers_gone"] == 1
    results = await rig.send_many(producer, 10)
    assert {r.queue.broker_name for r in results} == {"broker-b"}
    await rig.add_broker("broker-a", port=a.port)  # an arrival, then the route shows it back
    used: set[str] = set()
    for _ in range(100):
        used |= {r.queue.broker_name for r in await rig.send_many(producer, 4)}
        if "broker-a" in used:
            break
        rig.clock.advance(1.0)
    assert "broker-a" in used and producer.routing.stats()["brokers_returned"] == 1
    assert producer.counters["failed"] == 0
