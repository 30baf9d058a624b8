"""Typed ext-field headers: wire names, required fields, and refusals that name the field."""

from __future__ import annotations

import dataclasses

import pytest

from protocol import headers as h
from protocol.codes import ResponseCode
from protocol.errors import HeaderError

# (header, its extFields on the wire): each pair must convert both ways exactly.
CASES = [
    (
        h.RegisterBrokerRequestHeader(
            broker_name="broker-a",
            broker_addr="10.0.0.1:10911",
            cluster_name="DefaultCluster",
            ha_server_addr="10.0.0.1:10912",
            broker_id=0,
            heartbeat_timeout_millis=30000,
            enable_acting_master=True,
            compressed=True,
            body_crc32=1274297638,
        ),
        {
            "brokerName": "broker-a",
            "brokerAddr": "10.0.0.1:10911",
            "clusterName": "DefaultCluster",
            "haServerAddr": "10.0.0.1:10912",
            "brokerId": "0",
            "heartbeatTimeoutMillis": "30000",
            "enableActingMaster": "true",
            "compressed": "true",
            "bodyCrc32": "1274297638",
        },
    ),
    (
        h.RegisterBrokerResponseHeader(
            ha_server_addr="10.0.0.1:10912", master_addr="10.0.0.1:10911"
        ),
        {"haServerAddr": "10.0.0.1:10912", "masterAddr": "10.0.0.1:10911"},
    ),
    (
        h.UnregisterBrokerRequestHeader(
            broker_name="broker-a", broker_addr="10.0.0.1:10911", cluster_name="C", broker_id=1
        ),
        {
            "brokerName": "broker-a",
            "brokerAddr": "10.0.0.1:10911",
            "clusterName": "C",
            "brokerId": "1",
        },
    ),
    (
        h.BrokerHeartbeatRequestHeader(
            cluster_name="C",
            broker_addr="10.0.0.1:10911",
            broker_name="broker-a",
            broker_id=0,
            epoch=3,
            max_offset=1 << 40,
            confirm_offset=99,
            heartbeat_timeout_mills=10000,
            election_priority=2,
        ),
        {
            "clusterName": "C",
            "brokerAddr": "10.0.0.1:10911",
            "brokerName": "broker-a",
            "brokerId": "0",
            "epoch": "3",
            "maxOffset": str(1 << 40),
            "confirmOffset": "99",
            "heartbeatTimeoutMills": "10000",
            "electionPriority": "2",
        },
    ),
    (
        h.QueryDataVersionRequestHeader(
            broker_name="broker-a", broker_addr="10.0.0.1:10911", cluster_name="C", broker_id=0
        ),
        {
            "brokerName": "broker-a",
            "brokerAddr": "10.0.0.1:10911",
            "clusterName": "C",
            "brokerId": "0",
        },
    ),
    (h.QueryDataVersionResponseHeader(changed=True), {"changed": "true"}),
    (h.QueryDataVersionResponseHeader(changed=False), {"changed": "false"}),
    (
        h.GetRouteInfoRequestHeader(topic="T1", accept_standard_json_only=True),
        {"topic": "T1", "acceptStandardJsonOnly": "true"},
    ),
    (h.WipeWritePermOfBrokerRequestHeader(broker_name="broker-a"), {"brokerName": "broker-a"}),
    (h.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=3), {"wipeTopicCount": "3"}),
    (h.AddWritePermOfBrokerRequestHeader(broker_name="broker-a"), {"brokerName": "broker-a"}),
    (h.AddWritePermOfBrokerResponseHeader(add_topic_count=0), {"addTopicCount": "0"}),
    (
        h.DeleteTopicFromNamesrvRequestHeader(topic="T1", cluster_name="C"),
        {"topic": "T1", "clusterName": "C"},
    ),
    (h.DeleteTopicFromNamesrvRequestHeader(topic="T1"), {"topic": "T1"}),
    (
        h.PutKVConfigRequestHeader(namespace="ns", key="k", value="v"),
        {"namespace": "ns", "key": "k", "value": "v"},
    ),
    (h.GetKVConfigRequestHeader(namespace="ns", key="k"), {"namespace": "ns", "key": "k"}),
    (h.GetKVConfigResponseHeader(value="v"), {"value": "v"}),
    (h.GetKVConfigResponseHeader(value=None), {}),
    (h.DeleteKVConfigRequestHeader(namespace="ns", key="k"), {"namespace": "ns", "key": "k"}),
    (h.GetKVListByNamespaceRequestHeader(namespace="ns"), {"namespace": "ns"}),
    (h.GetTopicsByClusterRequestHeader(cluster="C"), {"cluster": "C"}),
    (h.RegisterTopicRequestHeader(topic="T1"), {"topic": "T1"}),
    (
        h.GetBrokerMemberGroupRequestHeader(cluster_name="C", broker_name="broker-a"),
        {"clusterName": "C", "brokerName": "broker-a"},
    ),
]


@pytest.mark.parametrize(("header", "ext"), CASES, ids=lambda v: type(v).__name__)
def test_header_converts_to_and_from_its_upstream_ext_fields(header, ext):
    assert header.to_wire() == ext
    assert type(header).from_wire(ext) == header


@pytest.mark.parametrize("cls", sorted({type(c[0]) for c in CASES}, key=lambda c: c.__name__))
def test_every_header_is_a_frozen_slotted_dataclass(cls):
    assert dataclasses.is_dataclass(cls)
    assert "__slots__" in cls.__dict__
    assert cls.__dataclass_params__.frozen


def test_optional_fields_default_and_are_left_out_of_the_wire():
    ext = {
        "brokerName": "broker-a",
        "brokerAddr": "10.0.0.1:10911",
        "clusterName": "C",
        "haServerAddr": "10.0.0.1:10912",
        "brokerId": "0",
    }
    header = h.RegisterBrokerRequestHeader.from_wire(ext)
    assert header.heartbeat_timeout_millis is None
    assert (header.enable_acting_master, header.compressed, header.body_crc32) == (False, False, 0)
    assert "heartbeatTimeoutMillis" not in header.to_wire()
    assert h.GetRouteInfoRequestHeader.from_wire({"topic": "T1"}).accept_standard_json_only is False


def test_heartbeat_needs_only_cluster_and_address():
    header = h.BrokerHeartbeatRequestHeader.from_wire({"clusterName": "C", "brokerAddr": "a:1"})
    assert header == h.BrokerHeartbeatRequestHeader(cluster_name="C", broker_addr="a:1")
    assert header.to_wire() == {"clusterName": "C", "brokerAddr": "a:1"}


def test_unknown_ext_fields_are_ignored():
    header = h.GetRouteInfoRequestHeader.from_wire({"topic": "T1", "lo": "true", "x": "y"})
    assert header == h.GetRouteInfoRequestHeader(topic="T1")


def test_a_header_with_only_optional_fields_reads_from_no_ext_fields():
    assert h.RegisterBrokerResponseHeader.from_wire(None) == h.RegisterBrokerResponseHeader()


@pytest.mark.parametrize("ext", [None, {}, {"brokerName": "broker-a"}])
def test_missing_required_field_is_refused_naming_it(ext):
    with pytest.raises(HeaderError) as info:
        h.UnregisterBrokerRequestHeader.from_wire(ext)
    assert info.value.code == ResponseCode.INVALID_PARAMETER
    assert "missing required header field" in info.value.remark
    assert "brokerAddr" in info.value.remark or "brokerName" in info.value.remark


def test_missing_broker_id_is_refused_by_its_wire_name():
    ext = {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "C"}
    with pytest.raises(HeaderError, match="missing required header field brokerId"):
        h.UnregisterBrokerRequestHeader.from_wire(ext)


@pytest.mark.parametrize("value", ["abc", "1.5", "0x10", "", "99999999999999999999"])
def test_non_integer_broker_id_is_refused_naming_field(value):
    ext = {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "C", "brokerId": value}
    with pytest.raises(HeaderError, match="brokerId") as info:
        h.UnregisterBrokerRequestHeader.from_wire(ext)
    assert info.value.code == ResponseCode.INVALID_PARAMETER
    if value not in ("", "99999999999999999999"):
        assert repr(value) in info.value.remark


@pytest.mark.parametrize(("text", "expected"), [("true", True), ("TRUE", True), ("False", False)])
def test_booleans_are_read_case_insensitively(text, expected):
    header = h.GetRouteInfoRequestHeader.from_wire({"topic": "T", "acceptStandardJsonOnly": text})
    assert header.accept_standard_json_only is expected


@pytest.mark.parametrize("text", ["yes", "1", "t"])
def test_a_boolean_that_is_not_true_or_false_is_refused(text):
    with pytest.raises(HeaderError, match="acceptStandardJsonOnly"):
        h.GetRouteInfoRequestHeader.from_wire({"topic": "T", "acceptStandardJsonOnly": text})


@pytest.mark.parametrize(
    ("cls", "ext"),
    [
        (h.GetRouteInfoRequestHeader, {"topic": ""}),
        (h.RegisterTopicRequestHeader, {"topic": ""}),
        (h.WipeWritePermOfBrokerRequestHeader, {"brokerName": ""}),
        (h.GetTopicsByClusterRequestHeader, {"cluster": ""}),
    ],
)
def test_an_empty_required_string_is_refused(cls, ext):
    with pytest.raises(HeaderError, match=next(iter(ext))):
        cls.from_wire(ext)


def test_count_headers_read_back_their_numbers():
    assert (
        h.WipeWritePermOfBrokerResponseHeader.from_wire({"wipeTopicCount": "7"}).wipe_topic_count
        == 7
    )
    with pytest.raises(HeaderError, match="addTopicCount"):
        h.AddWritePermOfBrokerResponseHeader.from_wire({"addTopicCount": "seven"})


REGISTER_FIELDS = CASES[0][1]


def test_a_remembered_header_is_read_once_and_equals_its_reading():
    read = h.remembering(h.RegisterBrokerRequestHeader, 4)
    first = read(dict(REGISTER_FIELDS))
    again = read({**REGISTER_FIELDS, "unknownField": "x"})  # a field no one reads: same header
    assert first == h.RegisterBrokerRequestHeader.from_wire(REGISTER_FIELDS)
    assert again is first


def test_a_refused_header_is_refused_each_time_and_a_missing_field_stays_missing():
    read = h.remembering(h.RegisterBrokerRequestHeader, 4)
    broken = {**REGISTER_FIELDS, "brokerId": "zero"}
    for _ in range(2):
        with pytest.raises(HeaderError, match="brokerId"):
            read(broken)
    lacking = {k: v for k, v in REGISTER_FIELDS.items() if k != "brokerName"}
    for _ in range(2):
        with pytest.raises(HeaderError, match="brokerName"):
            read(lacking)
    without_zone = read(dict(REGISTER_FIELDS))
    assert without_zone.zone_name is None


def test_what_is_remembered_stays_bounded_whatever_peers_send():
    """Distinct headers past the bound push the oldest out; a long value is read each time
    and never kept."""
    size = 8
    read = h.remembering(h.RegisterBrokerRequestHeader, size, longest=64)
    first = read({**REGISTER_FIELDS, "brokerName": "broker-0"})
    for i in range(1, 100):
        read({**REGISTER_FIELDS, "brokerName": f"broker-{i}"})
    assert read({**REGISTER_FIELDS, "brokerName": "broker-0"}) is not first
    long_name = {**REGISTER_FIELDS, "brokerName": "b" * 65}
    one, two = read(long_name), read(long_name)
    assert one == two and one is not two
