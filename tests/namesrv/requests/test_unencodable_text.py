"""A peer spells text no UTF-8 holds (a lone UTF-16 surrogate, JSON's ``\\ud800``).

Such text is refused where it is decoded, before anything is applied: the request is answered
INVALID_PARAMETER and changes nothing, and the answers, ticks and journal records that would
carry the name later go on working. Stopping the server completes whatever a connection holds.
The server and its peers live in the deterministic world (``support.memory_world``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted
from support.memory_world import WorldDeferred, connect, the_world, until
from support.register_bodies import plain_body
from twisted.internet import defer

from protocol import bodies, register_body
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand, SerializeType, encode_command

LONE = "\ud800"


def _register_ext(name: str, body: bytes, cluster: str = "DefaultCluster") -> dict[str, str]:
    return {
        "brokerName": name,
        "brokerAddr": "10.0.0.1:10911",
        "clusterName": cluster,
        "haServerAddr": "10.0.0.1:10912",
        "brokerId": "0",
        "compressed": "false",
        "bodyCrc32": str(register_body.crc32(body)),
    }


async def _answered(ns: Any, d: defer.Deferred[Any]) -> Any:
    """The answer to a request, once the world has run the server's slices of it."""
    return await d


def _journal(tmp_path: Any) -> list[dict[str, Any]]:
    records = []
    for path in sorted(tmp_path.glob("journal-*.jsonl")):
        records += [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return records


def _everyone_served(ns: Any) -> None:
    """The answers and ticks that carry stored names all still encode."""
    bodies.encode_cluster_info(ns.server.registry.cluster_info())
    ns.server.tick()
    ns.server.journal.flush()


@pytest.mark.parametrize(
    "field", ["brokerName", "clusterName", "brokerAddr"], ids=lambda f: f"header {f}"
)
@pytest_twisted.ensureDeferred
async def test_a_register_naming_a_lone_surrogate_in_a_header_is_refused_and_changes_nothing(
    make_world_server, tmp_path, field
):
    ns = make_world_server({"journal": {"directory": str(tmp_path)}})
    broker = await connect(ns.port)
    body = plain_body(["T1"], 1)
    ext = _register_ext("broker-a", body)
    ext[field] = f"x{LONE}y"
    resp = await _answered(ns, broker.ascii_json_request(RequestCode.REGISTER_BROKER, ext, body))
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert "surrogate" in resp.remark
    assert ns.server.registry.broker_count == 0
    assert not ns.server.registry.route_exists("T1")
    _everyone_served(ns)
    lookup = await broker.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert lookup.code == ResponseCode.SUCCESS
    assert not any(r["event"] == "broker_event" for r in _journal(tmp_path))
    # The connection goes on: the same register spelled correctly is applied and answered.
    good = await _answered(
        ns, broker.ascii_json_request(RequestCode.REGISTER_BROKER, _register_ext("b", body), body)
    )
    assert good.code == ResponseCode.SUCCESS
    assert ns.server.registry.route_exists("T1")


@pytest.mark.parametrize("where", ["topic name", "attribute value"])
@pytest_twisted.ensureDeferred
async def test_a_register_body_holding_a_lone_surrogate_is_refused_and_changes_nothing(
    make_world_server, tmp_path, where
):
    ns = make_world_server({"journal": {"directory": str(tmp_path)}})
    broker = await connect(ns.port)
    doc = json.loads(plain_body(["T1", "T2"], 1))
    table = doc["topicConfigSerializeWrapper"]["topicConfigTable"]
    if where == "topic name":
        table[f"T{LONE}"] = dict(table["T2"], topicName=f"T{LONE}")
    else:
        table["T2"]["attributes"] = {"+k": f"v{LONE}"}
    body = json.dumps(doc).encode("ascii")
    assert b"\\ud800" in body
    ext = _register_ext("broker-a", body)
    resp = await _answered(ns, broker.ascii_json_request(RequestCode.REGISTER_BROKER, ext, body))
    assert resp.code == ResponseCode.INVALID_PARAMETER, resp.remark
    assert "surrogate" in resp.remark
    assert ns.server.registry.broker_count == 0
    assert ns.server.registry.topic_count == 0
    _everyone_served(ns)


@pytest_twisted.ensureDeferred
async def test_kv_and_lookup_requests_naming_a_lone_surrogate_are_refused(make_world_server):
    ns = make_world_server()
    client = await connect(ns.port)
    put = await client.ascii_json_request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": f"k{LONE}", "value": "v"}
    )
    assert put.code == ResponseCode.INVALID_PARAMETER
    lookup = await client.ascii_json_request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"T{LONE}"}
    )
    assert lookup.code == ResponseCode.INVALID_PARAMETER
    got = await client.call(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert got.code == ResponseCode.QUERY_NOT_FOUND


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ], ids=str)
@pytest_twisted.ensureDeferred
async def test_a_header_holding_an_encoded_surrogate_is_refused(make_world_server, kind):
    """The bytes of a surrogate (ED A0 80) where JSON would spell it ``\\ud800``: no UTF-8
    either, answered as such; the same connection is then served."""
    ns = make_world_server()
    client = await connect(ns.port)
    cmd = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T-placeholder"}, b""
    )
    cmd.serialize_type = kind
    cmd.opaque = 77
    frame = encode_command(cmd).replace(b"T-placeholder", b"T-\xed\xa0\x80-xxxxxxx")
    d: defer.Deferred[Any] = defer.Deferred()
    client._pending[77] = d
    client.transport.write(frame)
    resp = await WorldDeferred(the_world(), d)
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert "UTF-8" in (resp.remark or "")
    again = await client.ascii_json_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert again.code == ResponseCode.TOPIC_NOT_EXIST


@pytest_twisted.ensureDeferred
async def test_stopping_completes_when_releasing_a_connection_raises(
    make_world_server, monkeypatch
):
    ns = make_world_server({"server": {"shutdown_grace_ms": 0}})
    clients = []
    for _ in range(3):
        clients.append(await connect(ns.port))
    body = plain_body(["T1"], 1)
    await _answered(
        ns,
        clients[0].ascii_json_request(RequestCode.REGISTER_BROKER, _register_ext("b", body), body),
    )

    def broken(conn_id: Any) -> None:
        raise RuntimeError("a departure that cannot be applied")

    monkeypatch.setattr(ns.server.registry, "on_channel_close", broken)
    await WorldDeferred(the_world(), ns.server.stop(grace_ms=0))
    await until(lambda: all(c.lost.called for c in clients))
    assert not any(c.connected for c in clients)
    assert ns.server.counters["shutdown_errors"] == 0  # the hub contained it per connection
    assert not ns.server.hub.connections
