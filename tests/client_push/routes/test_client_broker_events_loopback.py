"""RouteClient receiving broker entries from a fake name server (``support.fake_namesrv``):
departures applied locally, confirmations, the stale-answer guard, the version check."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from support.departures import ONLY_B, TWO, departure
from support.fake_namesrv import FakeNamesrv, Harness, get, held, make_client
from support.loopback_wait import until
from support.route_drivers import barrier
from twisted.internet import task

from protocol.codes import Perm, RequestCode
from protocol.route_model import TopicRouteData

RW = int(Perm.READ | Perm.WRITE)


@pytest.fixture
def harness():
    ns = FakeNamesrv()
    ns.listen()
    clock = task.Clock()
    client = make_client([ns.addr], clock)
    client.start()
    yield Harness(ns, client, clock)
    pytest_twisted.blockon(client.stop())
    pytest_twisted.blockon(ns.close())


def gets(ns: FakeNamesrv) -> int:
    return ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC)


async def held_on_two(h: Any) -> None:
    h.ns.set_route("T", TWO)
    await get(h.client, "T")
    await until(lambda: "T" in h.ns.subscribed() and h.client.push_active)


@pytest_twisted.ensureDeferred
async def test_an_exact_step_is_adopted_and_the_confirmation_finds_the_same_route(harness):
    await held_on_two(harness)
    brokers: list[Any] = []
    harness.client.add_broker_listener(brokers.append)
    version = harness.ns.set_route("T", ONLY_B)
    departure(harness.ns, (("T", version, version - 1),))
    await until(lambda: harness.client.cached_route("T").version == version)  # type: ignore[union-attr]
    assert harness.client.cached_route("T").route == ONLY_B  # type: ignore[union-attr]
    assert gets(harness.ns) == 1 and [b.kind for b in brokers] == ["departed"]
    assert brokers[0].topics == ("T",)
    harness.clock.advance(11.5)  # past the confirmation delay and window
    await until(lambda: gets(harness.ns) == 2)
    await barrier(harness.client)
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
    harness.clock.advance(11.5)
    await until(lambda: harness.client.cached_route("T").version == version)  # type: ignore[union-attr]


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
    await held(harness, "T")
    await barrier(harness.client)
    subscribes = harness.ns.count(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED)
    version = harness.ns.set_route("T", ONLY_B)  # silently: no NOTIFY
    for _ in range(30):
        harness.clock.advance(1.0)
        await barrier(harness.client)
    await until(lambda: harness.client.cached_route("T").version == version)  # type: ignore[union-attr]
    assert harness.client.counters["fetch.version_check"] == 1
    assert harness.ns.count(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED) == subscribes + 1
