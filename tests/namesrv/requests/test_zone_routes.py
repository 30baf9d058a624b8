"""Zone-mode lookups: the route upstream's zone rule leaves, cached per zone. In the
deterministic world (``support.memory_world``)."""

from __future__ import annotations

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs, unregister_request
from support.memory_world import connect

from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.route_model import DataVersion

V5 = 479  # a 5.x client: routes carry zoneName


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


def lookup(topic: str, *, version: int = V5, **ext: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **ext}, version=version
    )


def in_zone(topic: str, zone: str, mode: str = "true") -> RemotingCommand:
    return lookup(topic, __ZONE_MODE=mode, __ZONE_NAME=zone)


async def brokers(ns):
    """broker-a in zoneA, broker-b in ZONEB, broker-c in no zone, broker-d in zoneB whose
    master has left (its slave stays, so its queues stay in the routes)."""
    conn = await connect(ns.port)
    plan = [
        ("broker-a", "10.0.0.1:10911", 0, "zoneA", ("T1", "T2")),
        ("broker-b", "10.0.0.2:10911", 0, "ZONEB", ("T1", "T3")),
        ("broker-c", "10.0.0.3:10911", 0, None, ("T1",)),
        ("broker-d", "10.0.0.4:10911", 0, "zoneB", ("T1",)),
        ("broker-d", "10.0.0.5:10911", 1, "zoneB", ("T1",)),
    ]
    for name, addr, bid, zone, topics in plan:
        resp = await conn.request(
            register_request(
                topic_configs(*topics), broker_name=name, broker_addr=addr, broker_id=bid, zone=zone
            )
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await conn.request(
        unregister_request(broker_name="broker-d", broker_addr="10.0.0.4:10911", broker_id=0)
    )
    assert resp.code == ResponseCode.SUCCESS
    return conn


def names(resp: RemotingCommand) -> tuple[list[str], list[str]]:
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    route = bodies.decode_route(resp.body)
    return (
        sorted(b.broker_name for b in route.broker_datas),
        sorted(q.broker_name for q in route.queue_datas),
    )


@pytest_twisted.ensureDeferred
async def test_a_zone_lookup_gets_its_zones_groups_plus_master_less_ones(ns):
    await brokers(ns)
    client = await connect(ns.port)
    whole = await client.request(lookup("T1"))
    assert names(whole) == (["broker-a", "broker-b", "broker-c", "broker-d"],) * 2
    resp = await client.request(in_zone("T1", "ZoneA"))
    assert names(resp) == (["broker-a", "broker-d"],) * 2
    resp = await client.request(in_zone("T1", "zoneb", mode="TRUE"))
    assert names(resp) == (["broker-b", "broker-d"],) * 2
    resp = await client.request(in_zone("T1", "nowhere"))
    assert names(resp) == (["broker-d"],) * 2


@pytest_twisted.ensureDeferred
async def test_a_topic_only_in_other_zones_answers_success_with_empty_lists(ns):
    await brokers(ns)
    client = await connect(ns.port)
    resp = await client.request(in_zone("T3", "zoneA"))
    assert names(resp) == ([], [])
    resp = await client.request(in_zone("NoSuchTopic", "zoneA"))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST


@pytest_twisted.ensureDeferred
async def test_without_a_true_flag_or_a_zone_name_the_route_is_whole(ns):
    await brokers(ns)
    client = await connect(ns.port)
    whole = ["broker-a", "broker-b", "broker-c", "broker-d"]
    for request in (
        in_zone("T1", "zoneA", mode="yes"),
        in_zone("T1", "zoneA", mode="false"),
        in_zone("T1", "  "),
        lookup("T1", __ZONE_NAME="zoneA"),
    ):
        resp = await client.request(request)
        assert names(resp)[0] == whole


@pytest_twisted.ensureDeferred
async def test_routes_name_each_groups_zone_for_5x_clients_only(ns):
    await brokers(ns)
    client = await connect(ns.port)
    resp = await client.request(lookup("T2"))
    assert b'"zoneName":"zoneA"' in resp.body
    resp = await client.request(lookup("T2", version=373))  # a 4.9.x client
    assert b"zoneName" not in resp.body


@pytest_twisted.ensureDeferred
async def test_answers_are_cached_per_zone_and_dropped_when_a_group_changes_zone(ns):
    conn = await brokers(ns)
    client = await connect(ns.port)
    cache = ns.server.route_responses
    first = await client.request(in_zone("T1", "zoneA"))
    hits = cache.hits
    again = await client.request(in_zone("T1", "zoneA"))
    assert cache.hits == hits + 1
    assert again.body == first.body
    other = await client.request(in_zone("T1", "ZONEB"))
    assert names(other) == (["broker-b", "broker-d"],) * 2
    version = int(first.ext_fields["routeVersion"])

    resp = await conn.request(
        register_request(
            topic_configs("T1", "T2"),
            broker_name="broker-a",
            broker_addr="10.0.0.1:10911",
            zone="zoneB",
            data_version=DataVersion(state_version=0, timestamp=1, counter=1),
        )
    )
    assert resp.code == ResponseCode.SUCCESS
    ns.clock.advance(1.0)  # the tick that notices the change moves the version
    moved = await client.request(in_zone("T1", "zoneA"))
    assert names(moved) == (["broker-d"],) * 2
    assert int(moved.ext_fields["routeVersion"]) > version
    now_b = await client.request(in_zone("T1", "zoneB"))
    assert names(now_b) == (["broker-a", "broker-b", "broker-d"],) * 2


@pytest_twisted.ensureDeferred
async def test_made_up_zone_names_are_answered_but_not_kept(ns):
    await brokers(ns)
    client = await connect(ns.port)
    for i in range(50):
        resp = await client.request(in_zone("T1", f"made-up-{i}"))
        assert names(resp) == (["broker-d"],) * 2
    assert ns.server.routes.zones_cached == 0
    await client.request(in_zone("T1", "zoneA"))
    assert ns.server.routes.zones_cached == 1
