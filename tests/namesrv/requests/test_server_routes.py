"""Route lookups, registers and deletes against the real server, in the deterministic world
(``support.memory_world``: one virtual clock, TCP in memory)."""

from __future__ import annotations

import json
import re

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs, unregister_request
from support.memory_world import connect

from protocol import bodies
from protocol.codes import Perm, RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.route_model import DataVersion


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


def route_request(topic: str, version: int = 479, **ext: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **ext}, version=version
    )


@pytest_twisted.ensureDeferred
async def test_register_three_topics_plain_then_compressed_gives_matching_routes(ns):
    broker = await connect(ns.port)
    resp = await broker.request(register_request(topic_configs("T1", "T2", "T3", queues=8)))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await broker.request(
        register_request(
            topic_configs("T1", "T2", "T3", queues=4),
            broker_name="broker-b",
            broker_addr="10.0.0.2:10911",
            compressed=True,
        )
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    client = await connect(ns.port)
    for topic in ("T1", "T2", "T3"):
        resp = await client.request(route_request(topic))
        assert resp.code == ResponseCode.SUCCESS
        route = bodies.decode_route(resp.body)
        queues = {q.broker_name: q for q in route.queue_datas}
        assert set(queues) == {"broker-a", "broker-b"}
        assert queues["broker-a"].write_queue_nums == 8
        assert queues["broker-b"].read_queue_nums == 4
        assert queues["broker-b"].perm == Perm.READ | Perm.WRITE
        addrs = {b.broker_name: b.broker_addrs for b in route.broker_datas}
        assert addrs == {"broker-a": {0: "10.0.0.1:10911"}, "broker-b": {0: "10.0.0.2:10911"}}
        assert int(resp.ext_fields["routeVersion"]) >= 1
    resp = await client.request(route_request("NoSuchTopic"))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert "NoSuchTopic" in resp.remark


@pytest_twisted.ensureDeferred
async def test_register_with_wrong_crc_is_refused_and_changes_nothing(ns):
    broker = await connect(ns.port)
    resp = await broker.request(register_request(topic_configs("T1"), crc=12345))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "crc32 not match"
    assert ns.server.registry.broker_count == 0
    resp = await broker.request(route_request("T1"))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST


@pytest_twisted.ensureDeferred
async def test_route_json_flavour_follows_request_version(ns):
    broker = await connect(ns.port)
    await broker.request(register_request(topic_configs("T1")))
    await broker.request(
        register_request(topic_configs("T1"), broker_addr="10.0.0.9:10911", broker_id=1)
    )
    old = await broker.request(route_request("T1", version=121))
    assert re.search(rb'"brokerAddrs":\{0:"10\.0\.0\.1:10911",1:"10\.0\.0\.9:10911"\}', old.body)
    with pytest.raises(json.JSONDecodeError):
        json.loads(old.body)
    new = await broker.request(route_request("T1", version=479))
    parsed = json.loads(new.body)
    assert parsed["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911", "1": "10.0.0.9:10911"}
    forced = await broker.request(route_request("T1", version=121, acceptStandardJsonOnly="true"))
    assert json.loads(forced.body)["brokerDatas"][0]["brokerAddrs"] == {
        "0": "10.0.0.1:10911",
        "1": "10.0.0.9:10911",
    }


@pytest.mark.parametrize("version", [121, 317, 401, 412])
@pytest_twisted.ensureDeferred
async def test_clients_older_than_5_0_get_the_4_9_route_shape(ns, version):
    broker = await connect(ns.port)
    await broker.request(register_request(topic_configs("T1")))
    old = await broker.request(route_request("T1", version=version, acceptStandardJsonOnly="true"))
    doc = json.loads(old.body)
    assert set(doc) == {"brokerDatas", "filterServerTable", "queueDatas"}
    assert set(doc["brokerDatas"][0]) == {"brokerAddrs", "brokerName", "cluster"}
    assert b"enableActingMaster" not in old.body
    new = await broker.request(route_request("T1", version=413))
    assert json.loads(new.body)["brokerDatas"][0]["enableActingMaster"] is False


@pytest_twisted.ensureDeferred
async def test_master_and_slave_share_broker_data_and_cluster_info(ns):
    broker = await connect(ns.port)
    await broker.request(register_request(topic_configs("T1", "T2")))
    slave = await broker.request(
        register_request(topic_configs("T1", "T2"), broker_addr="10.0.0.9:10911", broker_id=1)
    )
    assert slave.ext_fields.get("masterAddr") == "10.0.0.1:10911"
    resp = await broker.request(route_request("T1"))
    route = bodies.decode_route(resp.body)
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.9:10911"}
    info = await broker.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    cluster = bodies.decode_cluster_info(info.body)
    assert cluster.cluster_addr_table == {"DefaultCluster": ["broker-a"]}
    assert cluster.broker_addr_table["broker-a"].broker_addrs[1] == "10.0.0.9:10911"


@pytest_twisted.ensureDeferred
async def test_wipe_and_add_write_perm_report_counts_and_flip_the_write_bit(ns):
    broker = await connect(ns.port)
    await broker.request(register_request(topic_configs("T1", "T2", "T3")))
    wiped = await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert wiped.code == ResponseCode.SUCCESS
    assert wiped.ext_fields["wipeTopicCount"] == "3"
    resp = await broker.request(route_request("T2"))
    assert bodies.decode_route(resp.body).queue_datas[0].perm & Perm.WRITE == 0
    added = await broker.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert added.ext_fields["addTopicCount"] == "3"
    resp = await broker.request(route_request("T2"))
    assert bodies.decode_route(resp.body).queue_datas[0].perm == Perm.READ | Perm.WRITE


@pytest_twisted.ensureDeferred
async def test_unregister_drops_the_broker_and_orphan_topics(ns):
    broker = await connect(ns.port)
    await broker.request(register_request(topic_configs("T1", "Shared")))
    await broker.request(
        register_request(
            topic_configs("Shared"), broker_name="broker-b", broker_addr="10.0.0.2:10911"
        )
    )
    resp = await broker.request(unregister_request())
    assert resp.code == ResponseCode.SUCCESS
    gone = await broker.request(route_request("T1"))
    assert gone.code == ResponseCode.TOPIC_NOT_EXIST
    shared = await broker.request(route_request("Shared"))
    route = bodies.decode_route(shared.body)
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]


@pytest_twisted.ensureDeferred
async def test_broker_silent_past_expiry_disappears(ns):
    broker = await connect(ns.port)
    await broker.request(register_request(topic_configs("T1", "T2")))
    ns.clock.advance(100)
    await broker.request(
        register_request(
            topic_configs("T9"),
            broker_name="broker-b",
            broker_addr="10.0.0.2:10911",
            data_version=DataVersion(0, 5, 5),
        )
    )
    ns.clock.advance(25)  # broker-a is now 125 s silent; the 5 s scan removes it
    gone = await broker.request(route_request("T1"))
    assert gone.code == ResponseCode.TOPIC_NOT_EXIST
    alive = await broker.request(route_request("T9"))
    assert alive.code == ResponseCode.SUCCESS
    assert ns.server.stats()["brokers_expired"] == 1


@pytest_twisted.ensureDeferred
async def test_delete_topic_and_kv_config_round_trip(ns):
    broker = await connect(ns.port)
    await broker.request(register_request(topic_configs("T1", "T2")))
    resp = await broker.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T1"})
    assert resp.code == ResponseCode.SUCCESS
    gone = await broker.request(route_request("T1"))
    assert gone.code == ResponseCode.TOPIC_NOT_EXIST
    topics = await broker.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert bodies.decode_topic_list(topics.body) == ["T2"]
    put = await broker.call(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}
    )
    assert put.code == ResponseCode.SUCCESS
    got = await broker.call(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert got.ext_fields["value"] == "v"
    listed = await broker.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})
    assert bodies.decode_kv_table(listed.body) == {"k": "v"}
    await broker.call(RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"})
    missing = await broker.call(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND


@pytest_twisted.ensureDeferred
async def test_order_topic_conf_reaches_the_route_when_enabled(make_world_server):
    ns = make_world_server({"registry": {"order_message_enable": True}})
    broker = await connect(ns.port)
    await broker.request(register_request(topic_configs("T1")))
    before = await broker.request(route_request("T1"))
    assert bodies.decode_route(before.body).order_topic_conf is None
    await broker.call(
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "broker-a:4"},
    )
    after = await broker.request(route_request("T1"))
    assert bodies.decode_route(after.body).order_topic_conf == "broker-a:4"
    assert int(after.ext_fields["routeVersion"]) > int(before.ext_fields["routeVersion"])


@pytest_twisted.ensureDeferred
async def test_full_register_drops_unlisted_topics_only_when_configured(make_world_server):
    for enabled in (False, True):
        ns = make_world_server({"registry": {"delete_topic_with_broker_registration": enabled}})
        broker = await connect(ns.port)
        await broker.request(register_request(topic_configs("T1", "T2")))
        await broker.request(
            register_request(topic_configs("T1"), data_version=DataVersion(0, 2, 2))
        )
        client = await connect(ns.port)
        resp = await client.request(route_request("T2"))
        expected = ResponseCode.TOPIC_NOT_EXIST if enabled else ResponseCode.SUCCESS
        assert resp.code == expected
