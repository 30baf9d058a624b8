"""Queue selection (``ProducerRouting`` alone) against the real name server, with brokers
faked, in the deterministic world (``support.memory_producer_world``).

The name server, the route client, the detector's timer and its probe timeouts run on the
world's clock the cases advance; connections are in memory. A fake broker answers probes, stays
silent, or announces a graceful shutdown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
import pytest_twisted
from support.loopback_broker import FakeBroker
from support.memory_producer_world import MemoryProducerDriver as ProducerDriver
from support.memory_world import until

from client_push.producer.fault_table import FaultStrategyConfig, SendOutcome
from protocol.codes import ResponseCode
from protocol.push_codec import encode_go_away

CONFIG = FaultStrategyConfig(detect_timeout_ms=1_500)
"""The probe timeout also bounds a probe's connect, in real time: a loaded machine can hold the
event loop past the default 200 ms while the loopback connect is done, failing the probe. The
cases step the probe timeouts on the fake clock, so a longer one (still under the interval)
changes nothing else they see."""
INTERVAL_S = CONFIG.detect_interval_ms / 1000
TIMEOUT_S = CONFIG.detect_timeout_ms / 1000
WAIT_S = CONFIG.first_probe_wait_ms / 1000


@pytest.fixture
def fakes() -> Iterator[list[FakeBroker]]:
    made: list[FakeBroker] = []
    yield made
    for fake in made:
        fake.close()


async def two_brokers(
    rig: ProducerDriver,
    fakes: list[FakeBroker],
    silent_b: bool = False,
    *,
    silent_a: bool = False,
    config: FaultStrategyConfig | None = None,
) -> tuple[FakeBroker, FakeBroker]:
    """Brokers a and b serving T (4 queues each) registered with the name server, and the
    rig's routing started."""
    a = rig.fake_broker(None if silent_a else ResponseCode.SUCCESS)
    b = rig.fake_broker(None if silent_b else ResponseCode.SUCCESS)
    fakes.extend((a, b))
    await rig.cluster.broker(rig.port, "T", broker_name="broker-a", broker_addr=a.addr)
    await rig.cluster.broker(rig.port, "T", broker_name="broker-b", broker_addr=b.addr)
    await rig.start_routing(config or CONFIG)
    return a, b


async def choose(rig: ProducerDriver, n: int, last: str | None = None) -> Counter[str]:
    return Counter([(await rig.select("T", last)).broker_name for _ in range(n)])


def stat(rig: ProducerDriver, name: str) -> object:
    """A reading of the routing's ``stats()`` (run where the routing lives)."""
    return rig.routing.stats().get(name)


@pytest_twisted.ensureDeferred
async def test_queues_come_from_the_real_route_and_retries_go_to_the_other_broker(rig, fakes):
    await two_brokers(rig, fakes)
    await choose(rig, 1)  # the route is held, both brokers get a first probe
    await rig.until(lambda: stat(rig, "probe.probes_answered") == 2)
    spread = await choose(rig, 80)
    assert spread == {"broker-a": 40, "broker-b": 40}  # 4 write queues each, round-robin
    assert await choose(rig, 10, last="broker-a") == {"broker-b": 10}


@pytest_twisted.ensureDeferred
async def test_the_detector_brings_back_the_broker_that_answers_and_not_the_silent_one(rig, fakes):
    a, b = await two_brokers(rig, fakes, silent_b=True)
    routing = rig.routing
    await choose(rig, 1)  # the route is held now; its brokers get a first probe
    await until(lambda: len(a.probes) == 1 and len(b.probes) == 1)
    await rig.until(lambda: stat(rig, "probe.probes_answered") == 1)
    await rig.call(routing.report_send, "broker-a", 0, SendOutcome.UNREACHABLE)
    await rig.call(routing.report_send, "broker-b", 0, SendOutcome.UNREACHABLE)
    assert set(await choose(rig, 20)) == {"broker-a", "broker-b"}  # nothing better: any

    await rig.advance(INTERVAL_S)  # b's first probe timed out; a round: both probed
    await until(lambda: len(a.probes) == 2 and len(b.probes) == 2)
    await rig.until(lambda: stat(rig, "probe.probes_answered") == 2)
    await rig.advance(TIMEOUT_S)  # b's probe times out again
    await rig.until(lambda: stat(rig, "probe.probes_failed") == 2)
    assert await choose(rig, 20) == {"broker-a": 20}  # reachable beats unreachable

    await rig.advance(INTERVAL_S)
    await until(lambda: len(a.probes) == 3)
    assert a.opened == 1  # the probe connection is kept between rounds


@pytest_twisted.ensureDeferred
async def test_a_broker_going_away_is_avoided_until_its_grace_is_over_and_it_answers(rig, fakes):
    a, _b = await two_brokers(rig, fakes)
    await choose(rig, 1)  # a first probe of each broker
    await rig.until(lambda: stat(rig, "probe.probes_answered") == 2)
    # 30 s isolation: gets probed
    await rig.call(rig.routing.report_send, "broker-a", 600, SendOutcome.OK)
    await rig.advance(INTERVAL_S)
    await until(lambda: len(a.probes) == 2 and len(a.conns) == 1)
    a.send_go_away(encode_go_away(5_000, [], "restart"))
    await rig.until(lambda: stat(rig, "brokers_going_away") == 1)
    await until(lambda: not a.conns)  # the client closed that connection
    assert await choose(rig, 20) == {"broker-b": 20}
    assert await choose(rig, 10, last="broker-b") == {"broker-b": 10}  # a is going away

    # Past the grace, within the 30 s of the isolation, the next round probes it.
    went_away_at = rig.now()
    await rig.advancing_until(lambda: len(a.probes) == 3, 30.0)
    await rig.until(lambda: stat(rig, "brokers_reachable_again") == 1)
    assert a.opened == 2  # a fresh connection after GoAway
    await rig.advance(30.0 - (rig.now() - went_away_at))  # the isolation is over too
    assert set(await choose(rig, 20)) == {"broker-a", "broker-b"}


@pytest_twisted.ensureDeferred
async def test_reports_about_unknown_brokers_and_routes_that_lose_a_broker_stay_bounded(rig, fakes):
    await two_brokers(rig, fakes)
    await choose(rig, 1)  # broker-a and broker-b are tracked for the detector
    await rig.call(rig.routing.report_send, "no-such-broker", 20_000, SendOutcome.FAILED)
    assert await rig.call(stat, rig, "fault_items") == 3
    await rig.advance(INTERVAL_S)  # the round drops what no held route names
    await rig.until(lambda: stat(rig, "fault_items") == 2)
    assert await rig.call(rig.routing.table.item, "no-such-broker") is None


@pytest_twisted.ensureDeferred
async def test_the_first_selections_of_a_route_go_to_the_broker_whose_probe_answered(rig, fakes):
    a, b = await two_brokers(rig, fakes, silent_b=True)
    wave = [rig.select("T") for _ in range(30)]
    await until(lambda: all(d.called for d in wave))
    assert Counter([(await d).broker_name for d in wave]) == {"broker-a": 30}
    assert len(a.probes) == 1 and len(b.probes) == 1  # probed when the route was first used
    stats = await rig.call(rig.routing.stats)
    assert stats["first_probe_waits"] == 30 and "first_probe_waits_expired" not in stats

    await rig.advance(TIMEOUT_S)  # b's first probe times out: held off until it answers
    await rig.until(lambda: stat(rig, "unheard_brokers_held_off") == 1)
    assert await choose(rig, 20) == {"broker-a": 20}
    assert (await choose(rig, 1, last="broker-a")).total() == 1  # never stuck

    b.answer = ResponseCode.SUCCESS
    await rig.advance(INTERVAL_S)  # the next round probes b, and it answers
    await rig.until(lambda: stat(rig, "brokers_reachable_again") == 1)
    assert await choose(rig, 40) == {"broker-a": 20, "broker-b": 20}


@pytest_twisted.ensureDeferred
async def test_when_no_broker_answers_the_first_selection_waits_only_its_bound(rig, fakes):
    a, b = await two_brokers(rig, fakes, silent_b=True, silent_a=True)
    d = rig.select("T")
    await until(lambda: len(a.probes) == 1 and len(b.probes) == 1)
    await rig.advance(WAIT_S - 0.001)
    await rig.settle()
    # Both brokers are silent: only the clock can end the wait.
    assert not d.called
    await rig.advance(0.001)
    assert (await d).broker_name in {"broker-a", "broker-b"}
    assert await rig.call(stat, rig, "first_probe_waits_expired") == 1
    # later selections of the same route do not wait again
    assert (await choose(rig, 10)).total() == 10
    assert await rig.call(stat, rig, "first_probe_waits") == 1


@pytest_twisted.ensureDeferred
async def test_stopping_releases_selections_waiting_for_a_first_probe(rig, fakes):
    await two_brokers(rig, fakes, silent_b=True, silent_a=True)
    d = rig.select("T")
    await rig.until(lambda: stat(rig, "first_probe_waits") == 1)
    await rig.call(rig.routing.stop)
    assert (await d).broker_name in {"broker-a", "broker-b"}


@pytest_twisted.ensureDeferred
async def test_without_the_detector_nothing_is_probed_and_nothing_waits(rig, fakes):
    config = FaultStrategyConfig(detector_enabled=False)
    a, b = await two_brokers(rig, fakes, silent_b=True, config=config)
    assert await choose(rig, 40) == {"broker-a": 20, "broker-b": 20}
    stats = await rig.call(rig.routing.stats)
    assert not stats.get("probes_sent") and "first_probe_waits" not in stats
    assert not a.probes and not b.probes
