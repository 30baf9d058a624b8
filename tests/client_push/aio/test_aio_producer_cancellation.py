"""Clean cancellation in the asyncio producer: a send cancelled while its request is in flight,
while it waits for a route with a master, or while it waits for a first probe answer leaves no
request, timer, wait or listener behind (the producer's, the connection pool's, the routing's
and the route client's tables, and the injected clock's armed timers). On Twisted, plain
asyncio and uvloop: the producer is one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import pytest_twisted
from support.loopback_wait import until
from support.producer_drivers import PRODUCER_KINDS, AsyncioProducerDriver, producer_driver
from twisted.internet import defer

from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig

NO_DETECTOR = FaultStrategyConfig(detector_enabled=False)


@pytest.fixture(params=PRODUCER_KINDS)
def rig(cluster: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    driver, cleanup = producer_driver(request.param, cluster)
    driver.server()
    yield driver
    pytest_twisted.blockon(defer.ensureDeferred(driver.close()))
    cleanup()


async def spawn_send(rig: AsyncioProducerDriver) -> asyncio.Task[Any]:
    assert rig.producer is not None
    return await rig.loop.spawn(rig.producer.send("T", b"to cancel"))


async def cancel(rig: AsyncioProducerDriver, task: asyncio.Task[Any]) -> bool:
    return await rig.loop.cancel(task)


async def tables(rig: AsyncioProducerDriver) -> dict[str, int]:
    """Everything in flight or armed, with the connections that stay open left out."""
    producer = rig.producer
    assert producer is not None
    out = dict(await rig.call(producer.outstanding))
    client = await rig.call(rig.client.outstanding)
    out["client_route_listeners"] = client["route_listeners"]
    out["client_requests"] = client["requests"]
    out["timers"] = await rig.armed()
    return out


@pytest_twisted.ensureDeferred
async def test_a_send_cancelled_in_flight_leaves_no_request_timer_or_bookkeeping(rig):
    broker = await rig.broker("broker-a", {"T": 4})
    await rig.start(ProducerConfig(fault=NO_DETECTOR))
    await rig.send("T", b"first")  # route held, connection open
    before = await tables(rig)
    broker.black_hole()
    task = await spawn_send(rig)
    await until(lambda: broker.counters["swallowed"] == 1)
    during = await tables(rig)
    assert (during["sends"], during["requests"]) == (1, 1)
    assert during["timers"] == before["timers"] + 2  # the request's timeout and its watchdog
    assert await cancel(rig, task)
    assert await tables(rig) == before
    assert before["sends"] == before["requests"] == 0
    assert rig.producer.counters["failed"] == 0  # cancelled, not failed


@pytest_twisted.ensureDeferred
async def test_a_send_cancelled_while_waiting_for_a_new_master_leaves_no_wait_or_listener(rig):
    master = await rig.broker("broker-a", {"T": 4})
    await rig.broker("broker-a", {"T": 4}, broker_id=1)
    await rig.start(ProducerConfig(fault=NO_DETECTOR, send_timeout_ms=60_000))
    await rig.send("T", b"first")
    await rig.kill_master(master)
    before = await tables(rig)
    task = await spawn_send(rig)
    await until(lambda: rig.producer.routing.outstanding()["route_waits"] == 1)
    during = await tables(rig)
    assert (during["route_listeners"], during["client_route_listeners"]) == (1, 1)
    assert during["timers"] == before["timers"] + 1  # the wait's timeout
    assert await cancel(rig, task)
    after = await tables(rig)
    assert after == before
    assert (after["route_waits"], after["route_listeners"], after["sends"]) == (0, 0, 0)


@pytest_twisted.ensureDeferred
async def test_a_send_cancelled_while_waiting_for_a_first_probe_answer_leaves_no_wait(rig):
    broker = await rig.broker("broker-a", {"T": 4})
    broker.black_hole()  # the first probe is never answered
    fault = replace(FaultStrategyConfig(), first_probe_wait_ms=60_000, detect_timeout_ms=60_000)
    await rig.start(ProducerConfig(fault=fault))
    task = await spawn_send(rig)
    await until(lambda: rig.producer.routing.outstanding()["first_answer_waits"] == 1)
    assert rig.producer.routing.outstanding()["core_first_answer_waits"] == 1
    assert await cancel(rig, task)
    out = await tables(rig)
    assert (out["first_answer_waits"], out["core_first_answer_waits"], out["sends"]) == (0, 0, 0)
    assert out["requests"] == 0  # the probe's connection is the detector's, not a send's
