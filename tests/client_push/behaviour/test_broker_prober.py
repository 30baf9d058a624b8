"""The active detector's wire side (``BrokerProber``) against fake brokers, in the deterministic
world (``support.memory_world``).

Connections are in memory; probe timeouts run on the world's clock, so a silent broker is
failed by advancing the clock, never by waiting. Selection through the detector, with
the real name server, is in ``test_producer_selection.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import pytest_twisted
from support.loopback_broker import FakeBroker
from support.memory_world import MemoryWorld, WorldDeferred, until

from client_push.producer.broker_probe import BrokerProber
from client_push.runtime.twisted_loop import TwistedRuntime
from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import encode_go_away

TIMEOUT_MS = 1_500
"""A probe's timeout, on the world's clock."""
TOPIC = "TopicTest"


class Detector:
    """A prober on the world's runtime, recording the GoAways it passes on."""

    def __init__(self, world: MemoryWorld) -> None:
        self.world = world
        self.go_aways: list[tuple[str, int]] = []
        runtime = TwistedRuntime(world.reactor, world.reactor)
        self.prober = BrokerProber(runtime, lambda addr, grace: self.go_aways.append((addr, grace)))

    def start_probe(self, addr: str) -> WorldDeferred[bool]:
        """A probe of ``addr``, not waited for."""
        return self.world.start(self.prober.probe(addr, TOPIC, TIMEOUT_MS))

    async def probe(self, addr: str) -> bool:
        return await self.start_probe(addr)

    async def advance(self, seconds: float) -> None:
        self.world.advance(seconds)

    async def settle(self) -> None:
        self.world.settle()

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    def counter(self, name: str) -> int:
        return self.prober.counters[name]


@pytest.fixture
def brokers(memory_world: MemoryWorld) -> Iterator[Any]:
    made: list[FakeBroker] = []
    detector = Detector(memory_world)

    def make(answer: int | None = ResponseCode.SUCCESS) -> tuple[Detector, FakeBroker]:
        broker = FakeBroker(answer, network=memory_world.reactor)
        made.append(broker)
        return detector, broker

    yield make
    detector.prober.stop()
    for broker in made:
        memory_world.wait(broker.close())


@pytest_twisted.ensureDeferred
async def test_an_answering_broker_is_probed_over_one_connection_kept_between_probes(brokers):
    det, broker = brokers()
    for _ in range(3):
        assert await det.probe(broker.addr) is True
    assert broker.opened == 1 and det.prober.connections == 1
    assert det.counter("probes_answered") == 3 and det.counter("connections_opened") == 1
    probe = broker.probes[0]
    assert probe.code == RequestCode.GET_MAX_OFFSET
    assert probe.ext_fields["topic"] == TOPIC and probe.ext_fields["queueId"] == "0"


@pytest_twisted.ensureDeferred
async def test_an_error_answer_still_shows_the_broker_is_reachable(brokers):
    det, broker = brokers(answer=ResponseCode.SYSTEM_ERROR)
    assert await det.probe(broker.addr) is True


@pytest_twisted.ensureDeferred
async def test_a_silent_broker_fails_at_the_timeout_and_its_connection_is_reused(brokers):
    det, broker = brokers(answer=None)
    result = det.start_probe(broker.addr)
    await until(lambda: len(broker.probes) == 1)
    await det.advance(TIMEOUT_MS / 1000 - 0.001)
    await det.settle()
    assert not result.called
    await det.advance(0.001)
    await det.settle()
    assert result.called and await result is False
    assert det.counter("probes_failed") == 1

    broker.answer = ResponseCode.SUCCESS
    assert await det.probe(broker.addr) is True
    assert broker.opened == 1  # a timeout does not cost the connection


@pytest_twisted.ensureDeferred
async def test_at_most_one_probe_per_broker_is_in_flight(brokers):
    det, broker = brokers(answer=None)
    first = det.start_probe(broker.addr)
    assert await det.probe(broker.addr) is False  # skipped, not sent
    await until(lambda: len(broker.probes) == 1)
    assert det.counter("probes_skipped") == 1 and det.counter("probes_sent") == 1
    await det.advance(TIMEOUT_MS / 1000)
    assert await first is False


@pytest_twisted.ensureDeferred
async def test_a_connection_the_broker_closed_is_reopened_by_the_next_probe(brokers):
    det, broker = brokers()
    assert await det.probe(broker.addr) is True
    broker.drop_connections()
    await until(lambda: det.prober.connections == 0)
    assert await det.probe(broker.addr) is True
    assert broker.opened == 2 and det.prober.connections == 1


@pytest_twisted.ensureDeferred
async def test_a_broker_that_refuses_connections_is_unreachable(brokers):
    det, broker = brokers()
    await broker.close()
    assert await det.probe(broker.addr) is False
    assert det.prober.connections == 0 and det.counter("probes_failed") == 1


@pytest_twisted.ensureDeferred
async def test_go_away_passes_on_its_grace_and_closes_the_connection(brokers):
    det, broker = brokers()
    assert await det.probe(broker.addr) is True
    broker.send_go_away(encode_go_away(5_000, [], "restart"))
    await until(lambda: det.go_aways == [(broker.addr, 5_000)])
    await until(lambda: not broker.conns and det.prober.connections == 0)
    assert det.counter("go_away_received") == 1
    assert await det.probe(broker.addr) is True
    assert broker.opened == 2  # a fresh connection to the same broker


@pytest_twisted.ensureDeferred
async def test_a_malformed_go_away_is_counted_and_taken_as_no_grace(brokers):
    det, broker = brokers()
    assert await det.probe(broker.addr) is True
    broker.send_go_away(b"\xff\xff\xff")
    await until(lambda: det.go_aways == [(broker.addr, 0)])
    assert det.counter("go_away_malformed") == 1
    await until(lambda: not broker.conns)


@pytest_twisted.ensureDeferred
async def test_a_go_away_answer_fails_the_probe_and_closes_the_connection(brokers):
    det, broker = brokers(answer=ResponseCode.GO_AWAY)
    assert await det.probe(broker.addr) is False
    assert det.go_aways == [(broker.addr, 0)]
    await until(lambda: not broker.conns and det.prober.connections == 0)


@pytest_twisted.ensureDeferred
async def test_connections_of_brokers_no_longer_held_are_closed_and_stop_closes_the_rest(brokers):
    det, kept = brokers()
    _, dropped = brokers()
    assert await det.probe(kept.addr) is True
    assert await det.probe(dropped.addr) is True
    await det.call(det.prober.retain, {kept.addr})
    await until(lambda: not dropped.conns)
    assert det.prober.connections == 1 and len(kept.conns) == 1
    await det.call(det.prober.stop)
    await until(lambda: not kept.conns)
    assert await det.probe(kept.addr) is False  # nothing is probed after stop
    assert kept.opened == 1
