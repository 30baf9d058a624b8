"""Answers listing the whole registry: encoded once per registry change, shared, and cut at
``registry.max_listing_bytes`` in upstream's form. In the deterministic world
(``support.memory_world``)."""

from __future__ import annotations

import pytest_twisted
from support.fake_broker import register_request, topic_configs
from support.memory_world import connect
from support.wire_client import WireClient

from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.headers import GetTopicsByClusterRequestHeader

ALL = RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER
LISTINGS = [
    ALL,
    RequestCode.GET_BROKER_CLUSTER_INFO,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS,
    RequestCode.GET_UNIT_TOPIC_LIST,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
]


async def registered(client: WireClient, request: RemotingCommand) -> None:
    resp = await client.request(request)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def by_cluster(cluster: str) -> dict[str, str]:
    return GetTopicsByClusterRequestHeader(cluster=cluster).to_wire()


@pytest_twisted.ensureDeferred
async def test_each_listing_is_encoded_once_per_registry_change_and_shared(make_world_server):
    ns = make_world_server()
    server = ns.server
    broker = await connect(ns.port)
    await registered(broker, register_request(topic_configs("A", "B")))
    clients = [await connect(ns.port, f"127.0.0.{n}") for n in (2, 3, 4)]
    for code in LISTINGS:
        answers = [await c.call(code) for c in clients]
        assert {a.code for a in answers} == {ResponseCode.SUCCESS}
        assert len({bytes(a.body) for a in answers}) == 1
    for _ in range(3):
        await clients[0].call(RequestCode.GET_TOPICS_BY_CLUSTER, by_cluster("DefaultCluster"))
    assert server.stats()["listing_builds"] == len(LISTINGS) + 1
    # A heartbeat (the same register again) changes nothing: nothing is encoded again.
    await registered(broker, register_request(topic_configs("A", "B")))
    assert bodies.decode_topic_list((await clients[1].call(ALL)).body) == ["A", "B"]
    assert server.stats()["listing_builds"] == len(LISTINGS) + 1
    # A new topic is a change: the next listing is encoded anew, once.
    await registered(broker, register_request(topic_configs("A", "B", "C")))
    for client in clients:
        assert bodies.decode_topic_list((await client.call(ALL)).body) == ["A", "B", "C"]
    assert server.stats()["listing_builds"] == len(LISTINGS) + 2


@pytest_twisted.ensureDeferred
async def test_a_broker_group_change_that_touches_no_topic_renews_the_cluster_info(
    make_world_server,
):
    ns = make_world_server()
    broker = await connect(ns.port)
    client = await connect(ns.port, "127.0.0.2")
    await registered(broker, register_request({}, broker_name="empty"))
    first = bodies.decode_cluster_info(
        (await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)).body
    )
    assert first.broker_addr_table["empty"].zone_name is None
    await registered(broker, register_request({}, broker_name="empty", zone="z1"))
    again = bodies.decode_cluster_info(
        (await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)).body
    )
    assert again.broker_addr_table["empty"].zone_name == "z1"
    await registered(broker, register_request({}, cluster="Other", broker_name="empty"))
    moved = bodies.decode_cluster_info(
        (await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)).body
    )
    assert moved.cluster_addr_table["Other"] == ["empty"]


@pytest_twisted.ensureDeferred
async def test_unknown_clusters_are_answered_empty_and_never_kept(make_world_server):
    ns = make_world_server()
    client = await connect(ns.port)
    for n in range(50):
        resp = await client.call(RequestCode.GET_TOPICS_BY_CLUSTER, by_cluster(f"made-up-{n}"))
        assert resp.code == ResponseCode.SUCCESS
        assert bodies.decode_topic_list(resp.body) == []
    assert len(ns.server.processor.s.listings._built) == 0


@pytest_twisted.ensureDeferred
async def test_a_listing_past_the_byte_limit_lists_its_first_entries_and_says_so(make_world_server):
    limit = 1024
    ns = make_world_server({"registry": {"max_listing_bytes": limit}})
    broker = await connect(ns.port)
    names = [f"Topic-{n:04d}" for n in range(300)]
    await registered(broker, register_request(topic_configs(*names)))
    for n in range(12):
        request = register_request({}, broker_name=f"b{n:02d}", broker_addr=f"10.0.1.{n}:10911")
        await registered(broker, request)
    client = await connect(ns.port, "127.0.0.2")

    resp = await client.call(ALL)
    assert resp.code == ResponseCode.SUCCESS  # upstream clients read it as they always do
    listed = bodies.decode_topic_list(resp.body)
    assert 0 < len(listed) < 300 and listed == names[: len(listed)]
    assert len(resp.body) <= limit
    # One more name would not have fitted.
    assert len(bodies.encode_topic_list(names[: len(listed) + 1])) > limit
    assert resp.ext_fields["listed"] == str(len(listed))
    assert resp.ext_fields["total"] == "300"
    assert "registry.max_listing_bytes=1024" in (resp.remark or "")

    info_resp = await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert info_resp.code == ResponseCode.SUCCESS and len(info_resp.body) <= limit
    info = bodies.decode_cluster_info(info_resp.body)
    brokers = sorted(["broker-a", *(f"b{n:02d}" for n in range(12))])
    assert list(info.broker_addr_table) == brokers[: len(info.broker_addr_table)]
    assert info_resp.ext_fields["total"] == "13"
    assert int(info_resp.ext_fields["listed"]) == len(info.broker_addr_table) < 13
    assert info.cluster_addr_table == {"DefaultCluster": list(info.broker_addr_table)}

    small = await client.call(RequestCode.GET_TOPICS_BY_CLUSTER, by_cluster("None"))
    assert "listed" not in small.ext_fields and small.remark is None
