"""The registry's size bounds, each tried by a broker that sends past it.

A register past a bound is refused whole: INVALID_PARAMETER with a remark naming the bound, the
registry as it was, a counter and a log line. The server and the brokers' connections live in
the deterministic world (``support.memory_world``): the register slices run on its one clock.
"""

from __future__ import annotations

import json
import logging
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pytest
import pytest_twisted
from support.memory_world import connect
from support.register_bodies import compressed_body, plain_body, register, topic_names
from support.server_fixtures import Running

from protocol import bodies, peer_text
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.register import read, table
from protocol.route_model import QueueData, TopicRouteData


@pytest.fixture
def make_registry_server(make_world_server: Callable[..., Running]) -> Callable[..., Running]:
    """Start test servers in the world with ``registry`` config overrides (keywords)."""

    def make(**overrides: Any) -> Running:
        return make_world_server({"registry": overrides})

    return make


async def answered(ns: Running, broker: Any, request: RemotingCommand) -> Any:
    """Send a request; answered once the world has run the server's slices."""
    return await broker.request(request)


def snapshot(ns: Running) -> tuple[int, int, str]:
    registry = ns.server.registry
    info = bodies.encode_cluster_info(registry.cluster_info())
    return registry.topic_count, registry.broker_count, info.decode()


def refused_at(ns: Running, resp: Any, bound: str) -> None:
    assert resp.code == ResponseCode.INVALID_PARAMETER, resp.remark
    assert f"registry.{bound}" in resp.remark
    assert ns.server.stats()[f"limit_refusals.{bound}"] == 1


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
@pytest_twisted.ensureDeferred
async def test_a_register_past_the_topics_per_broker_bound_is_refused_and_changes_nothing(
    make_registry_server, compressed, caplog
):
    ns = make_registry_server(
        max_topics_per_broker=1_000, register_slice_topics=100, register_read_slice_topics=100
    )
    broker = await connect(ns.port)
    names = topic_names(900)
    body = compressed_body(names, 1) if compressed else plain_body(names, 1)
    ok = await answered(ns, broker, register(body, compressed=compressed))
    assert ok.code == ResponseCode.SUCCESS
    before = snapshot(ns)

    names = topic_names(1_001)
    body = compressed_body(names, 2) if compressed else plain_body(names, 2)
    with caplog.at_level(logging.INFO):
        resp = await answered(ns, broker, register(body, compressed=compressed))
    refused_at(ns, resp, "max_topics_per_broker")
    assert "1001 topics" in resp.remark
    assert snapshot(ns) == before
    assert not ns.server.registry.route_exists("T001000")
    assert any("max_topics_per_broker" in r.getMessage() for r in caplog.records)
    # The same broker at the bound still registers.
    names = topic_names(1_000)
    body = compressed_body(names, 3) if compressed else plain_body(names, 3)
    ok = await answered(ns, broker, register(body, compressed=compressed))
    assert ok.code == ResponseCode.SUCCESS and ns.server.registry.topic_count == 1_000


@pytest_twisted.ensureDeferred
async def test_a_register_past_the_total_topics_bound_is_refused_but_known_topics_do_not_count(
    make_registry_server,
):
    ns = make_registry_server(max_total_topics=1_500, register_slice_topics=100)
    a = await connect(ns.port)
    b = await connect(ns.port)
    names = topic_names(1_000)
    assert (await answered(ns, a, register(plain_body(names, 1)))).code == ResponseCode.SUCCESS
    # Broker b serves the same 1,000 topics and 500 more: 1,500 in all, at the bound.
    more = topic_names(1_500)
    resp = await answered(ns, b, register(plain_body(more, 1), name="broker-b"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    before = snapshot(ns)
    # One topic more than the registry may hold: refused whole, from either broker.
    resp = await answered(ns, b, register(plain_body(topic_names(1_501), 2), name="broker-b"))
    refused_at(ns, resp, "max_total_topics")
    assert snapshot(ns) == before

    route = TopicRouteData(queue_datas=[QueueData("broker-a", 4, 4, 6, 0)], broker_datas=[])
    body = bodies.encode_route(route, standard_json=True)
    ext = {"topic": "ByHand"}
    cmd = RemotingCommand.request(RequestCode.REGISTER_TOPIC_IN_NAMESRV, ext, body)
    resp = await answered(ns, a, cmd)
    assert resp.code == ResponseCode.INVALID_PARAMETER and "max_total_topics" in resp.remark
    assert not ns.server.registry.route_exists("ByHand")
    ext = {"topic": "T000001"}  # a topic it holds: nothing new
    cmd = RemotingCommand.request(RequestCode.REGISTER_TOPIC_IN_NAMESRV, ext, body)
    assert (await answered(ns, a, cmd)).code == ResponseCode.SUCCESS


def _record(text: bytes) -> bytes:
    return struct.pack(">i", len(text)) + text


def _compressed_records(records: list[bytes]) -> bytes:
    inflated = b"".join(
        [
            _record(b'{"counter":1,"timestamp":1}'),
            struct.pack(">i", len(records)),
            *map(_record, records),
            _record(b"[]"),
        ]
    )
    return zlib.compress(inflated)


def _plain_with_attributes(attributes: dict[str, str]) -> bytes:
    doc = json.loads(plain_body(["Small", "Big"], 1))
    doc["topicConfigSerializeWrapper"]["topicConfigTable"]["Big"]["attributes"] = attributes
    return json.dumps(doc).encode()


@pytest.mark.parametrize("form", ["plain", "compressed-5x", "compressed-unusual"])
@pytest_twisted.ensureDeferred
async def test_a_topic_whose_attributes_pass_the_bound_refuses_its_register(
    make_registry_server, form
):
    ns = make_registry_server(max_topic_attributes_bytes=1_000)
    broker = await connect(ns.port)
    value = "v" * 1_000
    if form == "plain":
        body, compressed = _plain_with_attributes({"+message.type": value}), False
    else:
        text = json.dumps({"+message.type": value}, separators=(",", ":")).encode()
        filter_type = b"SINGLE_TAG" if form == "compressed-5x" else b"MULTI_TAG"
        records = [b"Small 8 8 6 SINGLE_TAG {}", b"Big 8 8 6 " + filter_type + b" " + text]
        body, compressed = _compressed_records(records), True
    before = snapshot(ns)
    resp = await answered(ns, broker, register(body, compressed=compressed))
    refused_at(ns, resp, "max_topic_attributes_bytes")
    assert "'Big'" in resp.remark
    assert snapshot(ns) == before
    # Attributes within the bound register.
    small = {"+message.type": "NORMAL"}
    ok = await answered(ns, broker, register(_plain_with_attributes(small)))
    assert ok.code == ResponseCode.SUCCESS and ns.server.registry.route_exists("Big")


@pytest_twisted.ensureDeferred
async def test_a_topic_name_past_the_name_bound_is_dropped_from_its_register(make_registry_server):
    ns = make_registry_server(max_topic_name_bytes=20)
    broker = await connect(ns.port)
    resp = await answered(ns, broker, register(plain_body(["Short", "N" * 21], 1)))
    assert resp.code == ResponseCode.SUCCESS
    assert ns.server.registry.all_topics() == ["Short"]
    assert ns.server.stats()["register_topics_dropped"] == 1
    ok = await answered(ns, broker, register(plain_body(["Short", "N" * 20], 1)))
    assert ok.code == ResponseCode.SUCCESS
    assert ns.server.registry.topic_count == 2


@pytest_twisted.ensureDeferred
async def test_a_compression_bomb_is_refused_at_the_inflate_ratio(make_registry_server):
    ns = make_registry_server(register_max_inflate_ratio=64)
    broker = await connect(ns.port)
    bomb = zlib.compress(b"\0" * (32 << 20), 9)  # about 1,000 times
    resp = await answered(ns, broker, register(bomb, compressed=True))
    refused_at(ns, resp, "register_max_inflate_ratio")
    limit = read.inflate_limit(len(bomb), 64)
    assert f"past {limit} bytes" in resp.remark
    assert ns.server.registry.broker_count == 0


@pytest_twisted.ensureDeferred
async def test_oversized_parts_are_refused_before_they_are_parsed(make_registry_server):
    ns = make_registry_server()
    broker = await connect(ns.port)
    ext = {"brokerName": "b", "brokerAddr": "10.0.0.1:10911", "clusterName": "c"}
    ext["brokerId"] = "0"
    body = b'"' + b'\\"' * (table.MAX_DATA_VERSION_BYTES // 2)
    cmd = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, ext, body)
    resp = await answered(ns, broker, cmd)
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert ns.server.stats()["limit_refusals.dataVersion_bytes"] == 1

    servers = json.dumps(["10.0.0.1:1"] * (peer_text.MAX_PART_BYTES // 10)).encode()
    doc = json.loads(plain_body(["T"], 1))
    doc["filterServerList"] = json.loads(servers)
    resp = await answered(ns, broker, register(json.dumps(doc).encode()))
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert "filterServerList" in resp.remark
    assert ns.server.registry.topic_count == 0


@pytest.mark.parametrize(
    "spelling",
    [
        b'"attributes" :{"a":"%s"}',
        b'"attr\\u0069butes":{"a":"%s"}',
        b'"attributes":{"attributes":{},"a":"%s"}',
    ],
    ids=["space before the colon", "escaped key", "nested key"],
)
@pytest_twisted.ensureDeferred
async def test_long_attributes_are_found_however_their_key_is_written(
    make_registry_server, spelling
):
    ns = make_registry_server(max_topic_attributes_bytes=1_000)
    broker = await connect(ns.port)
    body = plain_body(["Small", "Big"], 1)
    usual = b'"attributes":{},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":'
    usual += b'"SINGLE_TAG","topicName":"Big"'
    assert usual in body
    body = body.replace(usual, usual.replace(b'"attributes":{}', spelling % (b"v" * 1_000)))
    resp = await answered(ns, broker, register(body))
    refused_at(ns, resp, "max_topic_attributes_bytes")
    assert ns.server.registry.topic_count == 0


@pytest_twisted.ensureDeferred
async def test_brokers_with_equal_tables_hold_one_and_the_stats_count_it(make_registry_server):
    ns = make_registry_server()
    a, b = await connect(ns.port), await connect(ns.port)
    body = plain_body(["Shared1", "Shared2"], 1)
    for broker, name in ((a, "broker-a"), (b, "broker-b")):
        resp = await answered(ns, broker, register(body, name=name))
        assert resp.code == ResponseCode.SUCCESS
    assert ns.server.stats()["register_tables_shared"] == 1
    # A write to one (a new perm, a new data version) leaves the other's queue data as it was.
    other = plain_body(["Shared1", "Shared2"], 2, perms={"Shared2": 4})
    assert (await answered(ns, b, register(other, name="broker-b"))).code == ResponseCode.SUCCESS
    route = ns.server.registry.get_route("Shared2")
    assert route is not None
    assert {q.broker_name: q.perm for q in route.queue_datas} == {"broker-a": 6, "broker-b": 4}
