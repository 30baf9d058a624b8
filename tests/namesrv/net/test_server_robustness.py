"""Bad input costs the sender its request or its connection, never anyone else's service."""

from __future__ import annotations

import struct

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs
from support.server_fixtures import running_server
from support.wire_client import connect
from twisted.internet import defer, reactor

from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand, encode_command


@pytest.fixture
def ns():
    yield from running_server({"server": {"max_frame_size": 1024 * 1024}})


@defer.inlineCallbacks
def assert_still_serving(port: int):
    other = yield connect(port)
    resp = yield other.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert resp.code == ResponseCode.SUCCESS
    other.transport.loseConnection()


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"\xde\xad\xbe\xef" * 64, id="garbage"),
        pytest.param(struct.pack(">I", 2 * 1024**3), id="2GiB-length"),
        pytest.param(struct.pack(">I", 2) + b"\x00\x00", id="length-below-header-word"),
        pytest.param(struct.pack(">II", 12, 200) + b"{}" * 4, id="header-longer-than-frame"),
        pytest.param(struct.pack(">II", 4 + 9, 9) + b"not json!", id="invalid-json-header"),
        pytest.param(struct.pack(">II", 4 + 2, 2) + b"[]", id="header-not-an-object"),
        pytest.param(struct.pack(">II", 4 + 2, (7 << 24) | 2) + b"{}", id="unknown-serialize-type"),
    ],
)
@pytest_twisted.inlineCallbacks
def test_broken_stream_closes_only_that_connection(ns, raw):
    bad = yield connect(ns.port)
    bystander = yield connect(ns.port)
    bad.transport.write(raw)
    yield bad.lost.addTimeout(5, reactor)
    assert ns.server.stats()["frames_refused"] == 1
    resp = yield bystander.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert resp.code == ResponseCode.SUCCESS
    yield assert_still_serving(ns.port)


@pytest_twisted.inlineCallbacks
def test_truncated_frame_then_hangup_leaves_server_serving(ns):
    bad = yield connect(ns.port)
    frame = register_request(topic_configs("T1"))
    bad.transport.write(encode_command(frame)[:-7])
    bad.transport.loseConnection()
    yield bad.lost
    yield assert_still_serving(ns.port)
    assert ns.server.registry.broker_count == 0


@pytest_twisted.inlineCallbacks
def test_bad_body_and_bad_header_get_error_responses_and_connection_survives(ns):
    client = yield connect(ns.port)
    bad_body = RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        {
            "brokerName": "b",
            "brokerAddr": "1.1.1.1:1",
            "clusterName": "c",
            "haServerAddr": "1.1.1.1:2",
            "brokerId": "0",
            "compressed": "false",
            "bodyCrc32": "0",
        },
        b"{this is not json",
    )
    resp = yield client.request(bad_body)
    assert resp.code != ResponseCode.SUCCESS
    assert resp.remark
    compressed_garbage = RemotingCommand.request(
        RequestCode.REGISTER_BROKER, {**bad_body.ext_fields, "compressed": "true"}, b"\x00\x01"
    )
    resp = yield client.request(compressed_garbage)
    assert resp.code != ResponseCode.SUCCESS and resp.remark
    missing = yield client.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {})
    assert missing.code == ResponseCode.INVALID_PARAMETER
    assert "brokerName" in missing.remark
    not_int = yield client.call(
        RequestCode.UNREGISTER_BROKER,
        {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "brokerId": "zero"},
    )
    assert not_int.code == ResponseCode.INVALID_PARAMETER
    assert "brokerId" in not_int.remark
    bad_route_body = yield client.call(
        RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "T"}, b"[1,"
    )
    assert bad_route_body.code != ResponseCode.SUCCESS and bad_route_body.remark
    ok = yield client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert ok.code == ResponseCode.SUCCESS
    assert ns.server.registry.broker_count == 0


@pytest_twisted.inlineCallbacks
def test_unknown_request_code_is_not_supported_with_remark(ns):
    client = yield connect(ns.port)
    resp = yield client.call(4242)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "4242" in resp.remark


@pytest_twisted.inlineCallbacks
def test_oneway_request_gets_no_response(ns):
    client = yield connect(ns.port)
    yield client.call(
        RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}, oneway=True
    )
    resp = yield client.call(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"})
    assert resp.ext_fields["value"] == "v"
    assert client.pushed == []
    assert client.decoder.buffered == 0


@pytest_twisted.inlineCallbacks
def test_binary_header_request_is_answered_in_binary(ns):
    from protocol.codes import SerializeType

    client = yield connect(ns.port)
    resp = yield client.request(
        RemotingCommand.request(
            RequestCode.GET_BROKER_CLUSTER_INFO, serialize_type=SerializeType.ROCKETMQ
        )
    )
    assert resp.code == ResponseCode.SUCCESS
    assert resp.serialize_type == SerializeType.ROCKETMQ
