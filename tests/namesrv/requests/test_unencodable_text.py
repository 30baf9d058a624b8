"""A peer spells text no UTF-8 holds (a lone UTF-16 surrogate, JSON's ``\\ud800``).

Such text is refused where it is decoded, before anything is applied: the request is answered
INVALID_PARAMETER and changes nothing, and the answers, ticks and journal records that would
carry the name later go on working. Stopping the server completes whatever a connection holds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted
from support.register_bodies import plain_body
from support.wire_client import connect
from twisted.internet import defer, reactor, task

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


@defer.inlineCallbacks
def _answered(ns: Any, d: defer.Deferred[Any]) -> Any:
    for _ in range(10_000):
        if d.called:
            break
        ns.clock.advance(0)
        yield task.deferLater(reactor, 0, lambda: None)
    return (yield d)


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
@pytest_twisted.inlineCallbacks
def test_a_register_naming_a_lone_surrogate_in_a_header_is_refused_and_changes_nothing(
    make_server, tmp_path, field
):
    ns = make_server({"journal": {"directory": str(tmp_path)}})
    broker = yield connect(ns.port)
    body = plain_body(["T1"], 1)
    ext = _register_ext("broker-a", body)
    ext[field] = f"x{LONE}y"
    resp = yield _answered(ns, broker.ascii_json_request(RequestCode.REGISTER_BROKER, ext, body))
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert "surrogate" in resp.remark
    assert ns.server.registry.broker_count == 0
    assert not ns.server.registry.route_exists("T1")
    _everyone_served(ns)
    lookup = yield broker.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert lookup.code == ResponseCode.SUCCESS
    assert not any(r["event"] == "broker_event" for r in _journal(tmp_path))
    # The connection goes on: the same register spelled correctly is applied and answered.
    good = yield _answered(
        ns, broker.ascii_json_request(RequestCode.REGISTER_BROKER, _register_ext("b", body), body)
    )
    assert good.code == ResponseCode.SUCCESS
    assert ns.server.registry.route_exists("T1")


@pytest.mark.parametrize("where", ["topic name", "attribute value"])
@pytest_twisted.inlineCallbacks
def test_a_register_body_holding_a_lone_surrogate_is_refused_and_changes_nothing(
    make_server, tmp_path, where
):
    ns = make_server({"journal": {"directory": str(tmp_path)}})
    broker = yield connect(ns.port)
    doc = json.loads(plain_body(["T1", "T2"], 1))
    table = doc["topicConfigSerializeWrapper"]["topicConfigTable"]
    if where == "topic name":
        table[f"T{LONE}"] = dict(table["T2"], topicName=f"T{LONE}")
    else:
        table["T2"]["attributes"] = {"+k": f"v{LONE}"}
    body = json.dumps(doc).encode("ascii")
    assert b"\\ud800" in body
    ext = _register_ext("broker-a", body)
    resp = yield _answered(ns, broker.ascii_json_request(RequestCode.REGISTER_BROKER, ext, body))
    assert resp.code == ResponseCode.INVALID_PARAMETER, resp.remark
    assert "surrogate" in resp.remark
    assert ns.server.registry.broker_count == 0
    assert ns.server.registry.topic_count == 0
    _everyone_served(ns)


@pytest_twisted.inlineCallbacks
def test_kv_and_lookup_requests_naming_a_lone_surrogate_are_refused(make_server):
    ns = make_server()
    client = yield connect(ns.port)
    put = yield client.ascii_json_request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": f"k{LONE}", "value": "v"}
    )
    assert put.code == ResponseCode.INVALID_PARAMETER
    lookup = yield client.ascii_json_request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"T{LONE}"}
    )
    assert lookup.code == ResponseCode.INVALID_PARAMETER
    got = yield client.call(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert got.code == ResponseCode.QUERY_NOT_FOUND


@pytest_twisted.inlineCallbacks
def test_a_binary_header_holding_an_encoded_surrogate_is_refused(make_server):
    ns = make_server()
    client = yield connect(ns.port)
    cmd = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T-placeholder"}, b""
    )
    cmd.serialize_type = SerializeType.ROCKETMQ
    cmd.opaque = 77
    frame = encode_command(cmd).replace(b"T-placeholder", b"T-\xed\xa0\x80-xxxxxxx")
    d: defer.Deferred[Any] = defer.Deferred()
    client._pending[77] = d
    client.transport.write(frame)
    resp = yield d
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert "UTF-8" in (resp.remark or "")


@pytest_twisted.inlineCallbacks
def test_stopping_completes_when_releasing_a_connection_raises(make_server, monkeypatch):
    ns = make_server({"server": {"shutdown_grace_ms": 0}})
    clients = []
    for _ in range(3):
        clients.append((yield connect(ns.port)))
    body = plain_body(["T1"], 1)
    yield _answered(
        ns,
        clients[0].ascii_json_request(RequestCode.REGISTER_BROKER, _register_ext("b", body), body),
    )

    def broken(conn_id: Any) -> None:
        raise RuntimeError("a departure that cannot be applied")

    monkeypatch.setattr(ns.server.registry, "on_channel_close", broken)
    yield ns.server.stop(grace_ms=0)
    yield defer.DeferredList([c.lost for c in clients])
    assert not any(c.connected for c in clients)
    assert ns.server.counters["shutdown_errors"] == 0  # the hub contained it per connection
    assert not ns.server.hub.connections
