"""The producer rides a failover: a real name server with route push, broker stand-ins on
loopback (a master and its slave in one group), every timer on the cluster's fake clock.

The controller's election is played by the slave re-registering with brokerId 0 (``promote``);
the master's death by ``kill`` (its name-server channel closes, its clients' connections drop).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import pytest_twisted
from support.producer_drive import drive, run_for
from twisted.internet import defer, reactor

from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig, SendOutcome
from client_push.producer.producer import Producer
from sandbox.standin import BrokerStandIn

TICK_S = 0.1


class Failover:
    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.clock = cluster.clock
        self.brokers: list[BrokerStandIn] = []
        self.producer: Producer | None = None
        self.port = 0

    async def start(self, *, other_group: bool = False) -> None:
        _server, self.port = self.cluster.start_server(push={"tick_interval_ms": 100})
        self.master = await self.broker("broker-a", 0)
        self.slave = await self.broker("broker-a", 1)
        self.other = await self.broker("broker-b", 0) if other_group else None

    async def broker(self, name: str, broker_id: int) -> BrokerStandIn:
        broker = BrokerStandIn(
            name,
            {"T": 4},
            [f"127.0.0.1:{self.port}"],
            reactor=reactor,
            clock=self.clock,
            broker_id=broker_id,
        )
        await broker.start()
        assert broker.counters["registered"] == 1
        self.brokers.append(broker)
        return broker

    def make_producer(self, **config: Any) -> Producer:
        fault = FaultStrategyConfig(detector_enabled=False)
        client = self.cluster.client(self.port)
        self.producer = Producer(
            client,
            "pg",
            ProducerConfig(fault=fault, **config),
            reactor=reactor,
            clock=self.clock,
            rng=random.Random(3),
        )
        self.producer.start()
        return self.producer

    async def send(self, **kw: Any) -> Any:
        assert self.producer is not None
        return await drive(self.clock, self.producer.send("T", b"m", **kw))

    async def kill_master(self) -> None:
        await self.master.kill()
        await run_for(self.clock, 2 * TICK_S)  # the departure is announced and applied

    async def close(self) -> None:
        if self.producer is not None:
            self.producer.stop()
        for broker in self.brokers:
            await broker.kill()


@pytest.fixture
def failover(cluster):
    f = Failover(cluster)
    yield f
    pytest_twisted.blockon(defer.ensureDeferred(f.close()))


@pytest_twisted.ensureDeferred
async def test_groups_with_a_master_keep_taking_sends_while_another_has_none(failover):
    await failover.start(other_group=True)
    producer = failover.make_producer()
    await failover.send()
    # A send met the master as it died: the fault strategy isolates the group's name.
    producer.routing.report_send("broker-a", 5, SendOutcome.UNREACHABLE)
    await failover.kill_master()
    results = [await failover.send() for _ in range(10)]
    assert {r.queue.broker_name for r in results} == {"broker-b"}
    assert all(r.attempts == 1 for r in results)
    assert "awaiting_master" not in producer.routing.stats()

    await failover.slave.promote()
    await run_for(failover.clock, 2 * TICK_S)
    after = [(await failover.send()).queue.broker_name for _ in range(16)]
    # The new master (another address) inherits nothing of the dead one's isolation.
    assert after.count("broker-a") == 8 and failover.slave.received == 8
    assert producer.routing.stats()["new_masters"] == 1


@pytest_twisted.ensureDeferred
async def test_a_send_in_flight_to_the_dead_master_is_retried_on_the_new_master(failover):
    await failover.start()
    producer = failover.make_producer(send_timeout_ms=5_000)
    await failover.send()
    failover.master.black_hole()  # the next send stays in flight until the master dies
    pending = producer.send("T", b"in flight")
    await run_for(failover.clock, 0.1)
    assert failover.master.counters["swallowed"] == 1
    await failover.kill_master()
    assert not pending.called
    await failover.slave.promote()
    result = await drive(failover.clock, pending)
    assert result.attempts == 2 and failover.slave.messages[-1].body == b"in flight"
    assert producer.counters["attempts_unreachable"] == 1
    assert producer.counters["failed"] == 0
