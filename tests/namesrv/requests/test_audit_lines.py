"""The operator's audit trail over the wire: one INFO line on ``namesrv.audit`` per broker
register, unregister, expiry and closed connection, topic delete or unlisting, write-perm
change, KV write and config change, each naming the peer (and the access key with ACL on);
none for a heartbeat; a peer's strings escaped; a flood paced to a bounded number of lines and
a count. The server and its peers live in the deterministic world (``support.memory_world``)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import pytest_twisted
from support.acl_signing import ACL, independent_sign
from support.fake_broker import register_request, topic_configs, unregister_request
from support.memory_world import connect, kept_in_use, until

from namesrv.ops.audit_trail import AUDIT_BURST, AUDIT_LOGGER, AUDIT_PERIOD_S
from protocol import headers, register_body
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.route_model import DataVersion

ESCAPES = "x\n2026-01-01 00:00:00,000 INFO namesrv.audit: FORGED\x1b[31m"


@pytest.fixture
def audit(caplog: pytest.LogCaptureFixture) -> Any:
    """The audit lines logged so far (their messages), in order."""
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    return lambda: [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]


def peer_of(client: Any) -> str:
    """The client's address as the server sees it: what a line names as its peer."""
    host = client.transport.getHost()
    return f"{host.host}:{host.port}"


def kv_put(namespace: str, key: str, value: str) -> RemotingCommand:
    ext = {"namespace": namespace, "key": key, "value": value}
    return RemotingCommand.request(RequestCode.PUT_KV_CONFIG, ext)


def kv_delete(namespace: str, key: str) -> RemotingCommand:
    ext = {"namespace": namespace, "key": key}
    return RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, ext)


def bare_register(name: str, addr: str, broker_id: int = 0) -> RemotingCommand:
    """A register with no body (no topics): the cheapest a flooding peer can send."""
    header = headers.RegisterBrokerRequestHeader(
        broker_name=name,
        broker_addr=addr,
        cluster_name="DefaultCluster",
        ha_server_addr=addr,
        broker_id=broker_id,
        heartbeat_timeout_millis=None,
        compressed=False,
        body_crc32=0,
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire())


async def all_succeed(client: Any, requests: list[RemotingCommand]) -> Any:
    """Send every request at once (pipelined), then wait for every answer: SUCCESS each."""
    sent = [client.request(r) for r in requests]
    answers = [await answer for answer in sent]
    assert {a.code for a in answers} == {ResponseCode.SUCCESS}, answers[0].remark


@pytest_twisted.ensureDeferred
async def test_a_brokers_life_logs_its_register_once_and_its_expiry(make_world_server, audit):
    ns = make_world_server()
    broker = await connect(ns.port)
    peer = peer_of(broker)
    register = register_request(topic_configs("T1", "T2"))
    await all_succeed(broker, [register])
    # Heartbeats: the same register again, a version-only one, BROKER_HEARTBEAT and
    # QUERY_DATA_VERSION: the broker is known, so none of them is an event.
    again = register_request(topic_configs("T1", "T2"))
    moved = register_request(topic_configs("T1", "T2"), data_version=DataVersion(0, 2, 2))
    beat = RemotingCommand.request(
        RequestCode.BROKER_HEARTBEAT,
        {"clusterName": "DefaultCluster", "brokerAddr": "10.0.0.1:10911", "brokerName": "broker-a"},
    )
    query = RemotingCommand.request(
        RequestCode.QUERY_DATA_VERSION,
        {
            "clusterName": "DefaultCluster",
            "brokerAddr": "10.0.0.1:10911",
            "brokerName": "broker-a",
            "brokerId": "0",
        },
        json.dumps(register_body.data_version_doc(DataVersion(0, 2, 2))).encode(),
    )
    await all_succeed(broker, [again, moved, again, beat, query])
    assert audit() == [
        "broker registered: cluster=DefaultCluster broker=broker-a id=0 addr=10.0.0.1:10911 "
        f"routes_changed=2 peer={peer}"
    ]
    # Silent, its connection in use: it leaves by expiry.
    await kept_in_use(ns.server.config.registry.broker_expiry_ms / 1000 + 10, broker)
    assert ns.server.registry.broker_count == 0
    assert audit()[1:] == [
        "broker expired: cluster=DefaultCluster broker=broker-a id=0 addr=10.0.0.1:10911 "
        f"routes_changed=2 last_address=yes peer={peer}"
    ]


@pytest_twisted.ensureDeferred
async def test_an_id_registered_at_a_new_address_names_the_one_it_replaced(
    make_world_server, audit
):
    ns = make_world_server()
    broker = await connect(ns.port)
    slave = dict(broker_name="broker-a", broker_id=1)
    await all_succeed(broker, [register_request({}, broker_addr="10.0.0.2:10911", **slave)])
    await all_succeed(broker, [register_request({}, broker_addr="10.0.0.3:10911", **slave)])
    lines = audit()
    assert len(lines) == 2
    assert "id=1 addr=10.0.0.2:10911" in lines[0] and "replacing" not in lines[0]
    assert "id=1 addr=10.0.0.3:10911 routes_changed=0 replacing=10.0.0.2:10911" in lines[1]


@pytest_twisted.ensureDeferred
async def test_unregister_and_a_closed_connection_are_each_one_line_naming_who(
    make_world_server, audit
):
    ns = make_world_server()
    broker = await connect(ns.port)
    admin = await connect(ns.port)
    await all_succeed(broker, [register_request(topic_configs("T1"))])
    b_request = register_request(
        topic_configs("T2"), broker_name="broker-b", broker_addr="10.0.0.2:10911"
    )
    await all_succeed(broker, [b_request])
    # Another connection unregisters broker-a: the line names that connection.
    await all_succeed(admin, [unregister_request()])
    broker_peer = peer_of(broker)
    broker.transport.loseConnection()
    await until(lambda: broker.lost.called)
    await admin.call(RequestCode.GET_BROKER_CLUSTER_INFO)  # the server has seen the close
    lines = audit()
    assert lines[2] == (
        "broker unregistered: cluster=DefaultCluster broker=broker-a id=0 addr=10.0.0.1:10911 "
        f"routes_changed=1 last_address=yes peer={peer_of(admin)}"
    )
    assert lines[3] == (
        "broker connection closed: cluster=DefaultCluster broker=broker-b id=0 "
        f"addr=10.0.0.2:10911 routes_changed=1 last_address=yes peer={broker_peer}"
    )
    assert len(lines) == 4


@pytest_twisted.ensureDeferred
async def test_admin_writes_each_log_what_they_changed(make_world_server, audit):
    ns = make_world_server()
    broker = await connect(ns.port)
    ops = await connect(ns.port)
    await all_succeed(broker, [register_request(topic_configs("T1", "T2"))])
    config = RemotingCommand.request(
        RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=true\n"
    )
    await all_succeed(
        ops,
        [
            RemotingCommand.request(
                RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
            ),
            RemotingCommand.request(
                RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
            ),
            RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T1"}),
            RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Nope"}),
            kv_put("ns1", "k1", "v1"),
            kv_put("ns1", "k1", "v1"),
            kv_delete("ns1", "k1"),
            kv_delete("ns1", "k1"),
            config,
            config,
        ],
    )
    by = f"peer={peer_of(ops)}"
    assert audit()[1:] == [
        f"write perm wiped: broker=broker-a topics=2 {by}",
        f"write perm added: broker=broker-a topics=2 {by}",
        f"topic deleted: topic=T1 cluster=* brokers=broker-a {by}",
        f"topic deleted: topic=Nope cluster=* brokers=none {by}",
        f"kv put: namespace=ns1 key=k1 value=v1 {by}",
        f"kv put: namespace=ns1 key=k1 value=v1 unchanged=yes {by}",
        f"kv deleted: namespace=ns1 key=k1 {by}",
        f"kv deleted: namespace=ns1 key=k1 absent=yes {by}",
        f"config changed: orderMessageEnable=true {by}",
        f"config changed: orderMessageEnable=true unchanged=yes {by}",
    ]


@pytest_twisted.ensureDeferred
async def test_topics_a_live_master_stops_listing_are_logged_as_dropped(make_world_server, audit):
    ns = make_world_server({"registry": {"delete_topic_with_broker_registration": True}})
    broker = await connect(ns.port)
    await all_succeed(broker, [register_request(topic_configs("T1", "T2", "T3"))])
    later = register_request(topic_configs("T1"), data_version=DataVersion(0, 2, 2))
    await all_succeed(broker, [later])
    assert audit()[1:] == [
        "topics dropped: broker=broker-a addr=10.0.0.1:10911 no longer lists 2 topics: T2,T3 "
        f"peer={peer_of(broker)}"
    ]


@pytest_twisted.ensureDeferred
async def test_a_peers_names_keys_and_values_are_escaped_in_every_line(make_world_server, audit):
    ns = make_world_server()
    client = await connect(ns.port)
    hostile = register_request(
        {}, cluster=ESCAPES, broker_name=ESCAPES, broker_addr="10.0.0.9:10911"
    )
    await all_succeed(
        client,
        [
            hostile,
            RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": ESCAPES}),
            RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": ESCAPES}),
            kv_put(ESCAPES, ESCAPES, ESCAPES),
            kv_delete(ESCAPES, ESCAPES),
            unregister_request(cluster=ESCAPES, broker_name=ESCAPES, broker_addr="10.0.0.9:10911"),
        ],
    )
    lines = audit()
    assert len(lines) == 6
    for line in lines:
        assert "\n" not in line and "\x1b" not in line, line
        assert "x\\n2026-01-01 00:00:00,000 INFO namesrv.audit: FORGED\\x1b[31m" in line, line
    assert lines[3].count("FORGED") == 3  # namespace, key and value


@pytest_twisted.ensureDeferred
async def test_a_peer_registering_ten_thousand_fake_brokers_gets_a_burst_of_lines_and_a_count(
    make_world_server, audit
):
    ns = make_world_server()
    flood = await connect(ns.port)
    fakes = [bare_register(f"fake-{i}", f"10.1.{i // 250}.{i % 250}:10911") for i in range(10_000)]
    await all_succeed(flood, fakes)
    assert ns.server.registry.broker_count == 10_000
    # Another host registering meanwhile is not crowded out.
    other = await connect(ns.port, source="127.0.0.2")
    await all_succeed(other, [register_request(topic_configs("T1"))])
    lines = audit()
    assert len(lines) == AUDIT_BURST + 1
    assert "broker=broker-a" in lines[-1] and "peer=127.0.0.2:" in lines[-1]
    # The pace releases: the count is told though no line of that kind follows.
    ns.clock.advance(AUDIT_PERIOD_S + 1)
    assert audit()[AUDIT_BURST + 1 :] == [
        "broker registered from 127.0.0.1: 9980 more lines like this in the previous 10 s "
        "not logged"
    ]
    # Its connection closes: 10,000 departures, again a burst and a count.
    flood.transport.loseConnection()
    await until(lambda: flood.lost.called)
    await other.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert ns.server.registry.broker_count == 1
    closed = [line for line in audit() if line.startswith("broker connection closed")]
    assert len(closed) == AUDIT_BURST
    ns.clock.advance(AUDIT_PERIOD_S + 1)
    assert audit()[-1] == (
        "broker connection closed from 127.0.0.1: 9980 more lines like this in the previous "
        "10 s not logged"
    )
    assert ns.server.stats()["audit_lines_suppressed"] == 2 * 9_980


@pytest_twisted.ensureDeferred
async def test_ten_thousand_kv_puts_give_a_burst_of_lines_and_a_count(make_world_server, audit):
    ns = make_world_server()
    client = await connect(ns.port)
    await all_succeed(client, [kv_put("flood", f"key-{i}", "v") for i in range(10_000)])
    assert len(audit()) == AUDIT_BURST
    ns.clock.advance(AUDIT_PERIOD_S + 1)
    assert audit()[AUDIT_BURST:] == [
        "kv put from 127.0.0.1: 9980 more lines like this in the previous 10 s not logged"
    ]


@pytest_twisted.ensureDeferred
async def test_with_signing_on_each_line_names_the_access_key(make_world_server, audit):
    ns = make_world_server({"acl": ACL})
    broker = await connect(ns.port)
    ops = await connect(ns.port)
    signed = independent_sign(register_request(topic_configs("T1")), "broker-key", "broker-secret")
    await all_succeed(broker, [signed])
    await all_succeed(ops, [independent_sign(kv_put("ns1", "k1", "v1"), "ops", "ops-secret")])
    await kept_in_use(ns.server.config.registry.broker_expiry_ms / 1000 + 10, broker)
    assert audit() == [
        "broker registered: cluster=DefaultCluster broker=broker-a id=0 addr=10.0.0.1:10911 "
        f"routes_changed=1 peer={peer_of(broker)} key=broker-key",
        f"kv put: namespace=ns1 key=k1 value=v1 peer={peer_of(ops)} key=ops",
        "broker expired: cluster=DefaultCluster broker=broker-a id=0 addr=10.0.0.1:10911 "
        f"routes_changed=1 last_address=yes peer={peer_of(broker)} key=broker-key",
    ]
