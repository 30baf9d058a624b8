"""The producer across restarts and departures: sends go on to the held brokers while a name
server knows none, and a route with no writable queue for a moment is waited for within the
send's deadline. The Twisted producer and route client, a ``FakeNamesrv`` and broker stand-ins
in the deterministic world (``support.memory_world``: one virtual clock, TCP in memory).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from support.fake_namesrv import FakeNamesrv
from support.memory_world import MemoryWorld, until
from twisted.internet import defer

from client_push.errors import TopicNotExistError
from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.queue_select import NoWritableQueueError
from namesrv_sandbox.standin import BrokerStandIn
from protocol.codes import Perm, RequestCode
from protocol.frame import RemotingCommand
from protocol.push_codec import BrokerChangeKind, ChangeKind, encode_notification
from protocol.route_model import BrokerData, QueueData, TopicRouteData

RW = int(Perm.READ | Perm.WRITE)
STEP_S = 0.02
NO_DETECTOR = FaultStrategyConfig(detector_enabled=False)


def route_to(addr: str) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, RW)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: addr})],
    )


class Rig:
    """A ``FakeNamesrv``, broker stand-ins, the route client and the producer in one world."""

    def __init__(self, world: MemoryWorld) -> None:
        self.world = world
        self.clock = world.reactor
        self.servers: list[FakeNamesrv] = []
        self.ns = self.namesrv()
        self.client: Any = None
        self.producer: Any = None

    def namesrv(self, port: int = 0, **kw: Any) -> FakeNamesrv:
        """A fake name server listening in the world (``kw``: ``FakeNamesrv``'s own)."""
        ns = FakeNamesrv(network=self.world.reactor, **kw)
        ns.listen(port)
        self.servers.append(ns)
        return ns

    async def broker(self) -> BrokerStandIn:
        return self.world.broker("broker-a", {"T": 4})

    async def start(self, timeout_ms: int = 3_000) -> None:
        self.client = self.world.client(self.ns.addr, seed=7)
        config = ProducerConfig(fault=NO_DETECTOR, send_timeout_ms=timeout_ms)
        self.producer = self.world.producer(self.client, config, seed=3)

    async def finish(self, d: defer.Deferred[Any], max_steps: int = 2_000) -> Any:
        """The send's result (or its error raised), the clock moved as its timers need."""
        return self.world.wait(d, within=max_steps * STEP_S)

    async def run_for(self, seconds: float) -> None:
        self.world.advance(seconds)

    def close(self) -> None:
        for ns in self.servers:
            if ns._listening is not None and ns._listening.connected:
                self.world.wait(ns.close())


@pytest.fixture
def rig(memory_world: MemoryWorld) -> Iterator[Rig]:
    r = Rig(memory_world)
    yield r
    r.close()


def read_only_departure(ns: FakeNamesrv, addr: str, version: int) -> None:
    """broker-a's master left; the group stays listed without it (acting master read-only)."""
    entry = (
        int(BrokerChangeKind.DEPARTED),
        "broker-a",
        "DefaultCluster",
        ((0, addr),),
        "channel_close",
        False,
        True,
        (("T", version, version - 1),),
        0,
    )
    for conn in ns.conns:
        conn.sequence += 1
        body = encode_notification([], conn.sequence, 1_000, ns.epoch, [entry])
        notify = RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED
        conn.push(RemotingCommand.request(notify, body=body, oneway=True))


@pytest_twisted.ensureDeferred
async def test_sends_go_on_to_the_held_broker_while_a_restarted_server_knows_none(rig):
    broker = await rig.broker()
    rig.ns.set_route("T", route_to(broker.addr))
    await rig.start()
    assert (await rig.finish(rig.producer.send("T", b"before"))).queue.broker_name == "broker-a"
    await until(lambda: rig.client.push_active)
    port = rig.ns.port
    await rig.ns.close()
    fresh = rig.namesrv(port, epoch="e2", warming=True, uptime_ms=100)
    await until(lambda: not rig.client.connected)
    for i in range(50):  # 1 s of sends every 20 ms across the restart and the refetch
        result = await rig.finish(rig.producer.send("T", b"m%d" % i))
        assert result.queue.broker_name == "broker-a"
        await rig.run_for(STEP_S)
    await until(lambda: fresh.count(RequestCode.GET_ROUTEINFO_BY_TOPIC, "T") >= 1)
    assert rig.client.cached_route("T").stale
    assert rig.producer.counters["failed"] == 0 and broker.received == 51


@pytest_twisted.ensureDeferred
async def test_a_departure_leaving_no_writable_queue_waits_for_the_new_master(rig):
    old = await rig.broker()
    new = await rig.broker()
    rig.ns.set_route("T", route_to(old.addr))
    await rig.start(timeout_ms=3_000)
    await rig.finish(rig.producer.send("T", b"m"))
    await until(lambda: rig.client.push_active)
    read_only_departure(rig.ns, old.addr, rig.ns.unroute("T"))
    await until(lambda: not rig.client.cached_route("T").publish_info.ok)

    pending = rig.producer.send("T", b"during the election")
    await rig.run_for(1.0)
    assert not pending.called  # waiting, not failing with "no writable queue"
    promoted = rig.ns.set_route("T", route_to(new.addr))
    rig.ns.notify([("T", promoted, ChangeKind.UPDATED)])
    result = await rig.finish(pending)
    assert result.attempts == 1 and new.messages[-1].body == b"during the election"
    stats = rig.producer.routing.stats()
    assert stats["route_waits.no_writable_queue"] == 1
    assert 1_000 <= stats["route_wait_ms.no_writable_queue"] < 1_200
    assert rig.producer.counters["failed"] == 0


@pytest_twisted.ensureDeferred
async def test_without_a_new_route_the_send_fails_at_its_deadline_as_before(rig):
    old = await rig.broker()
    rig.ns.set_route("T", route_to(old.addr))
    await rig.start()
    await rig.finish(rig.producer.send("T", b"m"))
    await until(lambda: rig.client.push_active)
    read_only_departure(rig.ns, old.addr, rig.ns.unroute("T"))
    await until(lambda: not rig.client.cached_route("T").publish_info.ok)
    started = rig.clock.seconds()
    with pytest.raises(NoWritableQueueError, match="topic T has no writable queue"):
        await rig.finish(rig.producer.send("T", b"m", timeout_ms=2_000))
    assert 2.0 <= rig.clock.seconds() - started < 2.1
    assert rig.producer.routing.stats()["route_wait_timeouts.no_writable_queue"] == 1


@pytest_twisted.ensureDeferred
async def test_a_topic_known_absent_still_fails_at_once(rig):
    await rig.start()
    await until(lambda: rig.client.connected)
    with pytest.raises(TopicNotExistError):
        await rig.finish(rig.producer.send("missing", b"m"))
    started = rig.clock.seconds()
    with pytest.raises(TopicNotExistError):
        await rig.finish(rig.producer.send("missing", b"m"))
    assert rig.clock.seconds() == started
