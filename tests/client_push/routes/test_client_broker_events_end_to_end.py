"""RouteClient receiving broker entries from a fake name server (``support.fake_namesrv``):
departures applied locally, confirmations, the stale-answer guard, the version check.

Client, fake name server and test share the deterministic world (``support.memory_world``):
one virtual clock, TCP in memory; after each step the world has settled, so every request the
client sent has been answered and every frame the server pushed has been read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import pytest_twisted
from support.departures import ONLY_B, TWO, departure
from support.fake_namesrv import FakeNamesrv
from support.memory_route_world import MemoryDriver, MemoryRouteWorld, held
from support.memory_world import MemoryWorld, until
from twisted.internet import defer

from client_push.routes.client import RouteClient
from protocol.codes import Perm, RequestCode
from protocol.route_model import TopicRouteData

RW = int(Perm.READ | Perm.WRITE)
CONFIRM_DELAY_S = 1.0
CONFIRM_WINDOW_S = 10.0
"""The client's defaults: a departure's confirmation is fetched within this window after the
delay."""


@dataclass
class Harness:
    ns: FakeNamesrv
    driver: MemoryDriver
    world: MemoryWorld

    @property
    def client(self) -> RouteClient:
        return self.driver.client


@pytest.fixture
def harness(memory_routes: MemoryRouteWorld) -> Harness:
    ns = memory_routes.server()
    driver = pytest_twisted.blockon(defer.ensureDeferred(memory_routes.client(ns)))
    return Harness(ns, driver, memory_routes.world)


def gets(ns: FakeNamesrv) -> int:
    return ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC)


def version_of(h: Harness, topic: str) -> int | None:
    entry = h.client.cached_route(topic)
    return None if entry is None else entry.version


async def held_on_two(h: Harness) -> None:
    h.ns.set_route("T", TWO)
    await held(h.driver, h.ns, "T")


@pytest_twisted.ensureDeferred
async def test_an_exact_step_is_adopted_and_the_confirmation_finds_the_same_route(harness):
    await held_on_two(harness)
    brokers: list[Any] = []
    harness.client.add_broker_listener(brokers.append)
    version = harness.ns.set_route("T", ONLY_B)
    departure(harness.ns, (("T", version, version - 1),))
    await until(lambda: version_of(harness, "T") == version)
    assert harness.client.cached_route("T").route == ONLY_B  # type: ignore[union-attr]
    assert gets(harness.ns) == 1 and [b.kind for b in brokers] == ["departed"]
    assert brokers[0].topics == ("T",)
    # The confirmation goes out after the delay, inside the window, and not before.
    took = harness.world.run_until(
        lambda: gets(harness.ns) == 2, within=CONFIRM_DELAY_S + CONFIRM_WINDOW_S
    )
    assert CONFIRM_DELAY_S <= took <= CONFIRM_DELAY_S + CONFIRM_WINDOW_S
    harness.world.settle()
    assert harness.client.counters["fetch.confirm"] == 1
    assert harness.client.cached_route("T").route == ONLY_B  # type: ignore[union-attr]


@pytest_twisted.ensureDeferred
async def test_a_stale_holder_drops_the_broker_keeps_its_version_and_the_confirmation_catches_up(
    harness,
):
    await held_on_two(harness)
    harness.ns.set_route(
        "T",
        TopicRouteData(
            queue_datas=TWO.queue_datas, broker_datas=TWO.broker_datas, order_topic_conf="x"
        ),
    )
    version = harness.ns.set_route("T", ONLY_B)  # the client missed the version before
    departure(harness.ns, (("T", version, version - 1),))
    await until(lambda: harness.client.counters["departure_inexact"] == 1)
    entry = harness.client.cached_route("T")
    assert entry is not None and entry.version == 1 and entry.route == ONLY_B
    took = harness.world.run_until(
        lambda: version_of(harness, "T") == version, within=CONFIRM_DELAY_S + CONFIRM_WINDOW_S
    )
    assert took >= CONFIRM_DELAY_S


@pytest_twisted.ensureDeferred
async def test_an_answer_sent_before_the_departure_cannot_bring_the_broker_back(harness):
    await held_on_two(harness)
    harness.ns.hold_gets = True
    harness.ns.notify([("T", 5, 0)])  # a refetch goes out and is held
    await until(lambda: len(harness.ns.held_gets) == 1)
    version = harness.ns.set_route("T", ONLY_B)
    conn, cmd = harness.ns.held_gets.pop()
    harness.ns.hold_gets = False
    departure(harness.ns, (("T", version + 5, 0),))
    await until(lambda: harness.client.counters["broker_departures"] == 1)
    harness.ns.routes["T"] = (TWO, version)  # answered from before the departure
    conn.push(harness.ns.route_answer(cmd))
    await until(lambda: harness.client.counters["fetch_older_than_local"] == 1)
    assert harness.client.cached_route("T").route == ONLY_B  # type: ignore[union-attr]


@pytest_twisted.ensureDeferred
async def test_a_departure_in_a_frame_after_a_gap_is_applied_and_everything_refetched(harness):
    await held_on_two(harness)
    version = harness.ns.set_route("T", ONLY_B)
    departure(harness.ns, (("T", version, version - 1),), sequence=5)
    await until(lambda: harness.client.counters["fetch.gap"] == 1)
    assert harness.client.counters["departure_inexact"] == 1


@pytest_twisted.ensureDeferred
async def test_the_version_check_finds_a_change_push_never_delivered_within_30_s(harness):
    await held(harness.driver, harness.ns, "T")
    subscribes = harness.ns.count(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED)
    version = harness.ns.set_route("T", ONLY_B)  # silently: no NOTIFY
    harness.world.advance(1.0)
    assert version_of(harness, "T") == 1  # push said nothing: nothing was fetched yet
    harness.world.run_until(lambda: version_of(harness, "T") == version, within=29.0)
    assert harness.client.counters["fetch.version_check"] == 1
    assert harness.ns.count(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED) == subscribes + 1
