"""Access control binds a live broker address to its broker: another broker key cannot take it
over, and the binding ends when the broker leaves. The server and the test's connections share
the deterministic world (``support.memory_world``): one virtual clock, TCP in memory."""

from __future__ import annotations

import pytest
import pytest_twisted
from support.acl_signing import independent_sign
from support.fake_broker import register_request, topic_configs, unregister_request
from support.memory_world import connect, the_world, until
from support.register_bodies import plain_body, register, topic_names

from namesrv.requests.acl import (
    AccessClass,
    AccessControl,
    AclAccount,
    AclConfig,
    AclDenied,
    sign_ext_fields,
)
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.push_events import BrokerChangeKind

ADDR_A = "10.0.0.1:10911"
ADDR_B = "10.0.0.2:10911"
ACL = {
    "enabled": True,
    "accounts": [
        {"access_key": "brokers-a", "secret_key": "secret-a", "brokers": ["broker-a"]},
        {"access_key": "brokers-b", "secret_key": "secret-b", "brokers": ["broker-b"]},
    ],
}
EXPIRY = {"broker_expiry_ms": 10_000, "scan_interval_ms": 1_000}


@pytest.fixture
def ns(make_world_server):
    return make_world_server({"acl": ACL, "registry": EXPIRY})


def as_a(cmd: RemotingCommand) -> RemotingCommand:
    return independent_sign(cmd, "brokers-a", "secret-a")


def as_b(cmd: RemotingCommand) -> RemotingCommand:
    return independent_sign(cmd, "brokers-b", "secret-b")


def register_b_at(addr: str, cluster: str = "DefaultCluster") -> RemotingCommand:
    return as_b(
        register_request(
            topic_configs("TB"), broker_name="broker-b", broker_addr=addr, cluster=cluster
        )
    )


def route(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def heartbeat(addr: str, name: str | None) -> RemotingCommand:
    ext = {"clusterName": "DefaultCluster", "brokerAddr": addr}
    if name is not None:
        ext["brokerName"] = name
    return RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, ext)


async def registered_a(ns):
    broker_a = await connect(ns.port)
    resp = await broker_a.request(as_a(register_request(topic_configs("T1", "T2"))))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return broker_a


@pytest_twisted.ensureDeferred
async def test_another_broker_key_cannot_take_over_or_unregister_a_live_address(ns):
    broker_a = await registered_a(ns)
    intruder = await connect(ns.port)
    resp = await intruder.request(route("T1"))
    before = resp.body

    resp = await intruder.request(register_b_at(ADDR_A))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert ADDR_A in resp.remark and "'broker-a'" in resp.remark
    resp = await intruder.request(route("T1"))
    assert resp.body == before
    assert bodies.decode_route(resp.body).broker_datas[0].broker_addrs == {0: ADDR_A}
    resp = await intruder.request(route("TB"))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST

    # The follow-up unregister (and heartbeats, named or not) for that address: refused.
    follow_ups = (
        unregister_request(broker_name="broker-b", broker_addr=ADDR_A),
        heartbeat(ADDR_A, "broker-b"),
        heartbeat(ADDR_A, None),
    )
    for request in follow_ups:
        resp = await intruder.request(as_b(request))
        assert resp.code == ResponseCode.NO_PERMISSION, request.code
        assert ADDR_A in resp.remark and "'broker-a'" in resp.remark
    resp = await intruder.request(route("T1"))
    assert resp.body == before
    assert ns.server.registry.broker_count == 1

    # Another cluster at the same address is the same address.
    resp = await intruder.request(register_b_at(ADDR_A, cluster="OtherCluster"))
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await intruder.request(route("T1"))
    assert resp.body == before

    # broker-a itself re-registers as before.
    resp = await broker_a.request(as_a(register_request(topic_configs("T1", "T2"))))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    stats = ns.server.stats()
    assert stats["rejected.acl_addr_taken"] == 4
    assert stats["rejected.acl_broker_taken"] == 1  # the nameless heartbeat
    assert ns.server.acl.holder_of(ADDR_A) == ("DefaultCluster", "broker-a", 0)


@pytest_twisted.ensureDeferred
async def test_brokers_with_their_own_addresses_are_unaffected(ns):
    await registered_a(ns)
    broker_b = await connect(ns.port)
    resp = await broker_b.request(register_b_at(ADDR_B))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await broker_b.request(as_b(heartbeat(ADDR_B, "broker-b")))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await broker_b.request(route("T1"))
    assert bodies.decode_route(resp.body).broker_datas[0].broker_addrs == {0: ADDR_A}
    resp = await broker_b.request(route("TB"))
    assert bodies.decode_route(resp.body).broker_datas[0].broker_addrs == {0: ADDR_B}
    resp = await broker_b.request(
        as_b(unregister_request(broker_name="broker-b", broker_addr=ADDR_B))
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert ns.server.acl.holder_of(ADDR_B) is None
    assert ns.server.registry.broker_count == 1
    assert "rejected.acl_addr_taken" not in ns.server.stats()


@pytest_twisted.ensureDeferred
async def test_the_address_is_free_once_its_broker_unregisters(ns):
    broker_a = await registered_a(ns)
    resp = await broker_a.request(as_a(unregister_request()))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert ns.server.acl.holder_of(ADDR_A) is None
    broker_b = await connect(ns.port)
    resp = await broker_b.request(register_b_at(ADDR_A))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await broker_b.request(route("TB"))
    assert bodies.decode_route(resp.body).broker_datas[0].broker_addrs == {0: ADDR_A}
    assert ns.server.acl.holder_of(ADDR_A) == ("DefaultCluster", "broker-b", 0)
    # Now broker-a is the stranger at its old address.
    resp = await broker_a.request(as_a(register_request(topic_configs("T1"))))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "'broker-b'" in resp.remark


@pytest_twisted.ensureDeferred
async def test_the_address_is_free_once_its_broker_expires(ns):
    await registered_a(ns)
    broker_b = await connect(ns.port)
    the_world().advance(5)  # within the expiry: still bound
    resp = await broker_b.request(register_b_at(ADDR_A))
    assert resp.code == ResponseCode.NO_PERMISSION
    the_world().advance(6)  # past broker_expiry_ms at the next scan
    assert ns.server.stats()["brokers_expired"] == 1
    resp = await broker_b.request(register_b_at(ADDR_A))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await broker_b.request(route("TB"))
    assert bodies.decode_route(resp.body).broker_datas[0].broker_addrs == {0: ADDR_A}


@pytest_twisted.ensureDeferred
async def test_the_address_is_free_once_its_brokers_connection_closes(ns):
    broker_a = await registered_a(ns)
    broker_b = await connect(ns.port)
    resp = await broker_b.request(register_b_at(ADDR_A))
    assert resp.code == ResponseCode.NO_PERMISSION
    broker_a.transport.loseConnection()
    await until(lambda: ns.server.acl.holder_of(ADDR_A) is None)
    resp = await broker_b.request(register_b_at(ADDR_A))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


@pytest_twisted.ensureDeferred
async def test_an_address_its_broker_moved_away_from_is_free_while_the_new_one_is_bound(ns):
    broker_a = await registered_a(ns)
    moved = register_request(topic_configs("T1", "T2"), broker_addr="10.0.0.9:10911")
    resp = await broker_a.request(as_a(moved))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert ns.server.acl.holder_of(ADDR_A) is None
    assert ns.server.acl.holder_of("10.0.0.9:10911") == ("DefaultCluster", "broker-a", 0)
    broker_b = await connect(ns.port)
    resp = await broker_b.request(register_b_at("10.0.0.9:10911"))
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await broker_b.request(register_b_at(ADDR_A))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    # A slave of broker-a switched to another id at its address keeps the address.
    resp = await broker_a.request(
        as_a(register_request(topic_configs("T1"), broker_addr=ADDR_B, broker_id=1))
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await broker_a.request(
        as_a(register_request(topic_configs("T1"), broker_addr=ADDR_B, broker_id=2))
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert ns.server.acl.holder_of(ADDR_B) == ("DefaultCluster", "broker-a", 2)
    resp = await broker_b.request(register_b_at(ADDR_B))
    assert resp.code == ResponseCode.NO_PERMISSION


@pytest_twisted.ensureDeferred
async def test_a_takeover_checked_while_the_holders_large_register_was_pending_is_refused(ns):
    turns = the_world().reactor
    broker_a = await connect(ns.port)
    broker_b = await connect(ns.port)
    large = as_a(register(plain_body(topic_names(10_000), 1)))
    first = broker_a.request(large)
    while not ns.server.pending_registers:
        assert turns.read_round()  # reads only: no turn of the register has run
    assert ns.server.acl.holder_of(ADDR_A) is None  # nothing applied yet: the check passes
    second = broker_b.request(register_b_at(ADDR_A))
    # Checked (no holder yet) and queued behind broker-a's register of the same address.
    while ns.server.pending_registers < 2:
        assert turns.read_round()
    assert ns.server.acl.holder_of(ADDR_A) is None
    resp = await first
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await second
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "'broker-a'" in resp.remark
    assert ns.server.acl.holder_of(ADDR_A) == ("DefaultCluster", "broker-a", 0)
    resp = await broker_b.request(route("TB"))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST


def signed(name: str, addr: str, cluster: str = "C") -> dict[str, str]:
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster}
    return sign_ext_fields(ext, b"", "k", "s")


def test_address_bindings_are_bounded_and_released_only_by_their_holder():
    account = AclAccount(access_key="k", secret_key="s", brokers=["*"])
    control = AccessControl(AclConfig(enabled=True, max_bound_brokers=1, accounts=[account]))
    code, broker = RequestCode.REGISTER_BROKER, AccessClass.BROKER
    arrived, departed = BrokerChangeKind.ARRIVED, BrokerChangeKind.DEPARTED
    control.broker_changed(arrived, "C", "b1", ((0, "h1:1"),))
    control.broker_changed(arrived, "C", "b2", ((0, "h2:1"),))  # past the bound: not bound
    assert control.holder_of("h1:1") == ("C", "b1", 0)
    assert control.holder_of("h2:1") is None
    with pytest.raises(AclDenied, match=r"h1:1 is live under broker 'b1'"):
        control.check(broker, code, "REGISTER_BROKER", signed("b1x", "h1:1"), b"")
    with pytest.raises(AclDenied, match=r"max_bound_brokers=1 live broker addresses"):
        control.check_address(code, "REGISTER_BROKER", "C", "b2", "h2:1")
    # A departure of another broker from that address leaves the binding alone.
    control.broker_changed(departed, "C", "b2", ((0, "h1:1"),))
    assert control.holder_of("h1:1") == ("C", "b1", 0)
    control.broker_changed(departed, "C", "b1", ((1, "h1:1"),))
    assert control.holder_of("h1:1") is None
    assert control.rejections == {"addr_taken": 1, "bound": 1}
    # A heartbeat without a broker name: only from a key that may act for the holder.
    stranger = AclAccount(access_key="x", secret_key="t", brokers=["b9"])
    control = AccessControl(AclConfig(enabled=True, accounts=[account, stranger]))
    control.broker_changed(arrived, "C", "b1", ((0, "h1:1"),))
    beat = {"clusterName": "C", "brokerAddr": "h1:1"}
    heartbeat, beat_code = AccessClass.BROKER, RequestCode.BROKER_HEARTBEAT
    signed_k = sign_ext_fields(beat, b"", "k", "s")
    assert control.check(heartbeat, beat_code, "BROKER_HEARTBEAT", signed_k, b"") == "k"
    with pytest.raises(AclDenied, match=r"h1:1 is live under broker 'b1'"):
        control.check(
            heartbeat, beat_code, "BROKER_HEARTBEAT", sign_ext_fields(beat, b"", "x", "t"), b""
        )


def test_a_broker_moving_one_id_from_address_to_address_holds_one_binding():
    account = AclAccount(access_key="k", secret_key="s", brokers=["*"])
    control = AccessControl(AclConfig(enabled=True, max_bound_brokers=2, accounts=[account]))
    for n in range(5):
        control.broker_changed(BrokerChangeKind.ARRIVED, "C", "b1", ((0, f"h{n}:1"),))
    assert [control.holder_of(f"h{n}:1") for n in range(5)] == [None] * 4 + [("C", "b1", 0)]
    control.broker_changed(BrokerChangeKind.ARRIVED, "C", "b2", ((0, "other:1"),))
    assert control.holder_of("other:1") == ("C", "b2", 0)


def test_acl_off_binds_no_address():
    control = AccessControl(AclConfig())
    control.broker_changed(BrokerChangeKind.ARRIVED, "C", "b1", ((0, "h1:1"),))
    assert control.holder_of("h1:1") is None
    assert control.check(AccessClass.BROKER, RequestCode.REGISTER_BROKER, "R", {}, b"") is None
