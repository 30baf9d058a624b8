"""Body codecs against upstream's byte forms: golden bodies, round trips, and refusals."""

from __future__ import annotations

import json
import re
import struct
import zlib

import pytest
from support import register_oracle

from protocol import bodies, register_body
from protocol.codes import CURRENT_VERSION, ResponseCode, Version
from protocol.errors import BodyError
from protocol.register import table
from protocol.route_model import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicRouteData,
)

ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", 8, 8, 6, 0)],
    broker_datas=[
        BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.9:10911"})
    ],
)

# The shape a 5.x name server sends: bean fields alphabetical, null fields left out.
ROUTE_FASTJSON = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.9:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
    b'"filterServerTable":{},'
    b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,'
    b'"writeQueueNums":8}]}'
)
ROUTE_STANDARD = ROUTE_FASTJSON.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')


def _chunk(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


# -- crc32 ---------------------------------------------------------------------------------------


def test_crc32_is_upstreams_masked_crc():
    assert register_body.crc32(b"123456789") == 0xCBF43926 & 0x7FFFFFFF == 1274296614
    assert register_body.crc32(b"abc") == 891568578  # top bit already clear: unchanged
    assert register_body.crc32(b"") == 0


def test_crc32_of_a_register_body_matches_zlib_masked():
    body = register_body.RegisterBrokerBody(
        register_body.TopicConfigSerializeWrapper({}, DataVersion(0, 1, 1)), []
    ).to_wire()
    assert register_body.crc32(body) == zlib.crc32(body) & 0x7FFFFFFF


# -- routes --------------------------------------------------------------------------------------


def test_encode_route_fastjson_flavour_matches_upstream_bytes():
    assert bodies.encode_route(ROUTE, standard_json=False) == ROUTE_FASTJSON
    with pytest.raises(json.JSONDecodeError):
        json.loads(ROUTE_FASTJSON)


def test_encode_route_standard_flavour_matches_upstream_bytes():
    assert bodies.encode_route(ROUTE, standard_json=True) == ROUTE_STANDARD
    assert json.loads(ROUTE_STANDARD)["brokerDatas"][0]["brokerAddrs"]["1"] == "10.0.0.9:10911"


def test_encode_route_orders_optional_fields_as_fastjson_does():
    route = TopicRouteData(
        queue_datas=[QueueData("b", 1, 1, 4)],
        broker_datas=[BrokerData("C", "b", {1: "x:2", 0: "x:1"}, zone_name="z1")],
        order_topic_conf="b:1",
        filter_server_table={"x:1": ["f:1"]},
        topic_queue_mapping_by_broker={"b": {"topic": "T", "bname": "b"}},
    )
    assert bodies.encode_route(route, standard_json=False) == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"x:1",1:"x:2"},"brokerName":"b","cluster":"C",'
        b'"enableActingMaster":false,"zoneName":"z1"}],"filterServerTable":{"x:1":["f:1"]},'
        b'"orderTopicConf":"b:1","queueDatas":[{"brokerName":"b","perm":4,"readQueueNums":1,'
        b'"topicSysFlag":0,"writeQueueNums":1}],'
        b'"topicQueueMappingByBroker":{"b":{"bname":"b","topic":"T"}}}'
    )


def test_standard_route_escapes_non_ascii_like_browser_compatible():
    route = TopicRouteData(broker_datas=[BrokerData("集群", "b", {0: "x:1"})])
    body = bodies.encode_route(route, standard_json=True)
    assert body.isascii()
    assert bodies.decode_route(body).broker_datas[0].cluster == "集群"


@pytest.mark.parametrize("body", [ROUTE_FASTJSON, ROUTE_STANDARD])
def test_decode_route_reads_both_flavours(body):
    assert bodies.decode_route(body) == ROUTE


@pytest.mark.parametrize("standard", [True, False])
def test_route_round_trips_with_every_field(standard):
    route = TopicRouteData(
        queue_datas=[QueueData("a", 4, 2, 6, 1), QueueData("b", 8, 8, 2)],
        broker_datas=[
            BrokerData("C", "a", {0: "a:1"}, zone_name="z", enable_acting_master=True),
            BrokerData("C", "b", {0: "b:1", 2: "b:3"}),
        ],
        order_topic_conf="a:4;b:8",
        filter_server_table={"a:1": ["f:1", "f:2"]},
        topic_queue_mapping_by_broker={"a": {"topic": "T", "epoch": 1}},
    )
    assert bodies.decode_route(bodies.encode_route(route, standard_json=standard)) == route


def test_decode_route_tolerates_nulls_unknown_fields_and_missing_optionals():
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"a:1"},"brokerName":"a","cluster":"C",'
        b'"zoneName":null,"somethingNew":[1]}],"queueDatas":[{"brokerName":"a","perm":6,'
        b'"readQueueNums":4,"writeQueueNums":4}],"orderTopicConf":null,"extra":{}}'
    )
    route = bodies.decode_route(body)
    assert route == TopicRouteData(
        queue_datas=[QueueData("a", 4, 4, 6, 0)],
        broker_datas=[BrokerData("C", "a", {0: "a:1"})],
    )
    assert bodies.decode_route(b"{}") == TopicRouteData()


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b'{"queueDatas":{}}',
        b'{"queueDatas":[1]}',
        b'{"queueDatas":[{"brokerName":"a","perm":"six"}]}',
        b'{"queueDatas":[{"brokerName":"a","perm":"\xc2\xb2"}]}',
        b'{"queueDatas":[{"brokerName":7}]}',
        b'{"brokerDatas":[{"brokerAddrs":{"master":"a:1"}}]}',
        b'{"brokerDatas":[{"brokerAddrs":{0:5}}]}',
        b'{"brokerDatas":[{"brokerAddrs":[]}]}',
        b'{"brokerDatas":[{"enableActingMaster":"yes"}]}',
        b'{"filterServerTable":[]}',
        b'{"topicQueueMappingByBroker":3}',
        b'{"orderTopicConf":5}',
    ],
)
def test_malformed_route_body_is_a_body_error(body):
    with pytest.raises(BodyError) as info:
        bodies.decode_route(body)
    assert info.value.code == ResponseCode.INVALID_PARAMETER


# -- register broker body ------------------------------------------------------------------------

TOPICS = {
    "T1": TopicConfig("T1", 8, 8, 6),
    "T2": TopicConfig("T2", 4, 2, 4, "MULTI_TAG", attributes={"+message.type": "FIFO"}),
}
WRAPPER = register_body.TopicConfigSerializeWrapper(TOPICS, DataVersion(0, 1700000000000, 3))
MAPPING = {"T1": {"bname": "broker-a", "epoch": 1, "topic": "T1", "totalQueues": 8}}


def test_plain_register_body_is_upstreams_json_shape():
    body = register_body.RegisterBrokerBody(WRAPPER, ["10.0.0.5:9999"]).to_wire()
    doc = json.loads(body)
    assert doc["filterServerList"] == ["10.0.0.5:9999"]
    wrapper = doc["topicConfigSerializeWrapper"]
    assert wrapper["dataVersion"] == {"counter": 3, "stateVersion": 0, "timestamp": 1700000000000}
    assert wrapper["topicConfigTable"]["T2"] == {
        "attributes": {"+message.type": "FIFO"},
        "order": False,
        "perm": 4,
        "readQueueNums": 4,
        "topicFilterType": "MULTI_TAG",
        "topicName": "T2",
        "topicSysFlag": 0,
        "writeQueueNums": 2,
    }


def test_plain_register_body_round_trips():
    wrapper = register_body.TopicConfigSerializeWrapper(
        {"T": TopicConfig("T", 2, 2, 6, topic_sys_flag=1, order=True)},
        DataVersion(1, 2, 3),
        MAPPING,
    )
    body = register_body.RegisterBrokerBody(wrapper, ["f:1"])
    assert register_oracle.decode_register_body(body.to_wire(), False, CURRENT_VERSION) == body


def test_plain_register_body_from_an_upstream_broker_decodes():
    body = (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":7,'
        b'"stateVersion":0,"timestamp":1},"mappingDataVersion":{"counter":0,"stateVersion":0,'
        b'"timestamp":1},"topicConfigTable":{"T1":{"attributes":{},"order":false,"perm":6,'
        b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T1","topicSysFlag":0,'
        b'"writeQueueNums":4}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}'
    )
    decoded = register_oracle.decode_register_body(body, False, CURRENT_VERSION)
    assert decoded.topic_config_serialize_wrapper.topic_config_table == {
        "T1": TopicConfig("T1", 4, 4, 6)
    }
    assert decoded.topic_config_serialize_wrapper.data_version == DataVersion(0, 1, 7)
    assert decoded.filter_server_list == []


def _reference_layout(*, with_mapping: bool) -> bytes:
    """The inflated compressed body, built by hand from the wire reference's layout."""
    out = _chunk(b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}')
    out += struct.pack(">i", 2)
    out += _chunk(b"T1 8 8 6 SINGLE_TAG {}")
    out += _chunk(b'T2 4 2 4 MULTI_TAG {"+message.type":"FIFO"}')
    out += _chunk(b'["10.0.0.5:9999"]')
    if with_mapping:
        out += struct.pack(">i", 1)
        out += _chunk(b'{"bname":"broker-a","epoch":1,"topic":"T1","totalQueues":8}')
    return out


def test_compressed_register_body_inflates_to_the_reference_layout():
    wrapper = register_body.TopicConfigSerializeWrapper(TOPICS, WRAPPER.data_version, MAPPING)
    body = register_body.RegisterBrokerBody(wrapper, ["10.0.0.5:9999"])
    assert zlib.decompress(body.to_wire(True)) == _reference_layout(with_mapping=True)
    old = body.to_wire(True, Version.V4_9_4)
    assert zlib.decompress(old) == _reference_layout(with_mapping=False)


@pytest.mark.parametrize(
    ("version", "with_mapping"),
    [(Version.V5_0_0, True), (CURRENT_VERSION, True), (Version.V4_9_4, False)],
)
def test_hand_built_compressed_body_decodes(version, with_mapping):
    data = zlib.compress(_reference_layout(with_mapping=with_mapping), 9)
    body = register_oracle.decode_register_body(data, True, version)
    wrapper = body.topic_config_serialize_wrapper
    assert wrapper.topic_config_table == TOPICS
    assert wrapper.data_version == DataVersion(0, 1700000000000, 3)
    assert body.filter_server_list == ["10.0.0.5:9999"]
    assert wrapper.topic_queue_mapping_info_map == (MAPPING if with_mapping else {})


def test_compressed_form_drops_sys_flag_and_order_as_upstream_does():
    wrapper = register_body.TopicConfigSerializeWrapper(
        {"T": TopicConfig("T", 2, 2, 6, topic_sys_flag=1, order=True)}, DataVersion()
    )
    data = register_body.RegisterBrokerBody(wrapper, []).to_wire(True)
    decoded = register_oracle.decode_register_body(data, True, CURRENT_VERSION)
    assert decoded.topic_config_serialize_wrapper.topic_config_table == {
        "T": TopicConfig("T", 2, 2, 6)
    }


@pytest.mark.parametrize("version", [Version.V4_9_4, CURRENT_VERSION])
def test_compressed_register_body_round_trips(version):
    mapping = MAPPING if version >= Version.V5_0_0 else {}
    body = register_body.RegisterBrokerBody(
        register_body.TopicConfigSerializeWrapper(TOPICS, DataVersion(2, 3, 4), mapping), ["f:1"]
    )
    assert register_oracle.decode_register_body(body.to_wire(True, version), True, version) == body


def test_compressed_topic_config_attributes_may_contain_spaces():
    layout = _chunk(b"{}") + struct.pack(">i", 1) + _chunk(b'T 1 1 6 SINGLE_TAG {"k":"a b"}')
    layout += _chunk(b"[]") + struct.pack(">i", 0)
    body = register_oracle.decode_register_body(zlib.compress(layout), True, CURRENT_VERSION)
    assert body.topic_config_serialize_wrapper.topic_config_table["T"].attributes == {"k": "a b"}


def _compressed(layout: bytes) -> bytes:
    return zlib.compress(layout)


FULL = _reference_layout(with_mapping=True)


@pytest.mark.parametrize(
    ("data", "remark"),
    [
        (b"\x00\x01garbage", "does not inflate"),
        (b"", "truncated"),
        (zlib.compress(FULL)[:-6], "truncated"),
        (_compressed(FULL[:30]), "truncated"),
        (_compressed(FULL[:-3]), "truncated"),
        (_compressed(struct.pack(">i", -1)), "negative"),
        (_compressed(_chunk(b"{}") + struct.pack(">i", 2**31 - 1)), "truncated"),
        (_compressed(_chunk(b"nope")), "invalid JSON"),
        (_compressed(_chunk(b"[]")), "dataVersion"),
        (_compressed(_chunk(b"{}") + struct.pack(">i", 1) + _chunk(b"T 1 1")), "fewer than 5"),
        (
            _compressed(_chunk(b"{}") + struct.pack(">i", 1) + _chunk(b"T x 1 6 SINGLE_TAG")),
            "non-integer",
        ),
        (
            _compressed(_chunk(b"{}") + struct.pack(">i", 1) + _chunk(b"T 1 1 6 ODD_TAG")),
            "topicFilterType",
        ),
        (
            _compressed(_chunk(b"{}") + struct.pack(">i", 1) + _chunk(b"T 1 1 6 SINGLE_TAG [1]")),
            "attributes",
        ),
        (
            _compressed(_chunk(b"{}") + struct.pack(">i", 1) + _chunk(b"\xff 1 1 6 SINGLE_TAG")),
            "UTF-8",
        ),
        (
            _compressed(_chunk(b"{}") + struct.pack(">i", 0) + _chunk(b'{"a":1}')),
            "filterServerList",
        ),
    ],
)
def test_malformed_compressed_register_body_is_a_body_error(data, remark):
    with pytest.raises(BodyError, match=remark) as info:
        register_oracle.decode_register_body(data, True, CURRENT_VERSION)
    assert info.value.code == ResponseCode.INVALID_PARAMETER
    with pytest.raises(BodyError, match=remark):  # the name server's lean reader alike
        register_oracle.read_register_body(data, True, CURRENT_VERSION)


def test_zip_bomb_past_the_inflate_bound_is_refused():
    packer = zlib.compressobj(9)
    zeros = bytes(1 << 20)
    parts = [packer.compress(zeros) for _ in range(table.MAX_INFLATED_BYTES // len(zeros) + 1)]
    bomb = b"".join(parts) + packer.flush()
    assert len(bomb) < 200_000
    with pytest.raises(BodyError, match="inflates past"):
        register_oracle.decode_register_body(bomb, True, CURRENT_VERSION)
    with pytest.raises(BodyError, match="inflates past"):
        register_oracle.read_register_body(bomb, True, CURRENT_VERSION)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[1]",
        b'{"topicConfigSerializeWrapper":[]}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":3}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"rw"}}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":"x"}}}',
        b'{"topicConfigSerializeWrapper":{"topicQueueMappingInfoMap":[]}}',
        b'{"filterServerList":"a:1"}',
        b"\xff\xfe",
    ],
)
def test_malformed_plain_register_body_is_a_body_error(body):
    with pytest.raises(BodyError) as info:
        register_oracle.decode_register_body(body, False, CURRENT_VERSION)
    with pytest.raises(BodyError, match=re.escape(info.value.remark)):
        register_oracle.read_register_body(body, False, CURRENT_VERSION)


# -- data version, cluster info, topic list, KV table, member group -------------------------


def test_decode_data_version():
    assert register_body.decode_data_version(b"") == DataVersion()
    body = b'{"counter":5,"stateVersion":2,"timestamp":1700000000000,"other":1}'
    assert register_body.decode_data_version(body) == DataVersion(2, 1700000000000, 5)
    with pytest.raises(BodyError):
        register_body.decode_data_version(b'"x"')
    with pytest.raises(BodyError):
        register_body.decode_data_version(b'{"counter":true}')


def test_cluster_info_is_written_in_fastjson_form_and_reads_back():
    info = ClusterInfo(
        broker_addr_table={"broker-a": BrokerData("C", "broker-a", {0: "a:1", 1: "a:2"})},
        cluster_addr_table={"C": ["broker-b", "broker-a"]},
    )
    body = bodies.encode_cluster_info(info)
    assert body == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"a:1",1:"a:2"},"brokerName":"broker-a",'
        b'"cluster":"C","enableActingMaster":false}},"clusterAddrTable":{"C":["broker-a","broker-b"]}}'
    )
    decoded = bodies.decode_cluster_info(body)
    assert decoded.broker_addr_table == info.broker_addr_table
    assert decoded.cluster_addr_table == {"C": ["broker-a", "broker-b"]}
    with pytest.raises(BodyError):
        bodies.decode_cluster_info(b'{"clusterAddrTable":{"C":"broker-a"}}')


def test_topic_list_round_trips_with_and_without_broker_addr():
    assert bodies.decode_topic_list(bodies.encode_topic_list(["T2", "T1"])) == ["T1", "T2"]
    body = bodies.encode_topic_list(["T1"], broker_addr="a:1")
    assert json.loads(body) == {"brokerAddr": "a:1", "topicList": ["T1"]}
    assert bodies.decode_topic_list(b'{"topicList":["x"],"brokerAddr":"a:1"}') == ["x"]
    assert bodies.decode_topic_list(b"{}") == []
    with pytest.raises(BodyError):
        bodies.decode_topic_list(b'{"topicList":"x"}')


def test_kv_table_round_trips():
    table = {"T1": "broker-a:4", "k": "v"}
    body = bodies.encode_kv_table(table)
    assert json.loads(body) == {"table": table}
    assert bodies.decode_kv_table(body) == table
    with pytest.raises(BodyError):
        bodies.decode_kv_table(b'{"table":[]}')


def test_broker_member_group_is_upstreams_shape():
    body = bodies.encode_broker_member_group("C", "broker-a", {1: "a:2", 0: "a:1"})
    assert body == (
        b'{"brokerMemberGroup":{"brokerAddrs":{0:"a:1",1:"a:2"},"brokerName":"broker-a",'
        b'"cluster":"C"}}'
    )
