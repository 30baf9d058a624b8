"""Access control: unsigned writes refused, signed ones accepted, names bound; the server and the
test's connections share the deterministic world (``support.memory_world``)."""

from __future__ import annotations

import pytest
import pytest_twisted
from support.acl_signing import ACL, independent_sign
from support.fake_broker import register_request, topic_configs, unregister_request
from support.memory_world import connect

from namesrv.config import ConfigError, from_mapping
from namesrv.requests.acl import (
    AccessClass,
    AccessControl,
    AclAccount,
    AclConfig,
    AclDenied,
    compute_signature,
    sign_ext_fields,
)
from protocol import bodies
from protocol.codes import Perm, RequestCode, ResponseCode
from protocol.frame import RemotingCommand


@pytest.fixture
def ns(make_world_server):
    return make_world_server({"acl": ACL})


def route(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def wipe(broker: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker})


def delete_topic(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})


def put_kv(key: str, value: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": key, "value": value}
    )


@pytest_twisted.ensureDeferred
async def test_unsigned_writes_are_refused_and_change_nothing_signed_ones_are_accepted(ns):
    peer = await connect(ns.port)
    resp = await peer.request(register_request(topic_configs("T1", "T2")))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "signed" in resp.remark
    assert ns.server.registry.broker_count == 0

    resp = await peer.request(
        independent_sign(register_request(topic_configs("T1", "T2")), "broker-key", "broker-secret")
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    # Lookups stay open without a signature.
    resp = await peer.request(route("T1"))
    assert resp.code == ResponseCode.SUCCESS
    before = resp.body

    for unsigned in (wipe("broker-a"), delete_topic("T1"), put_kv("T1", "broker-a:4")):
        resp = await peer.request(unsigned)
        assert resp.code == ResponseCode.NO_PERMISSION, unsigned.code
        assert resp.remark
    resp = await peer.request(
        RemotingCommand.request(
            RequestCode.DELETE_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1"}
        )
    )
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await peer.request(unregister_request())
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await peer.request(route("T1"))
    assert resp.body == before
    assert ns.server.kv.get("ORDER_TOPIC_CONFIG", "T1") is None
    assert ns.server.registry.broker_count == 1

    # A broker key may not make admin writes; the admin key may.
    resp = await peer.request(independent_sign(wipe("broker-a"), "broker-key", "broker-secret"))
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await peer.request(independent_sign(wipe("broker-a"), "ops", "ops-secret"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await peer.request(route("T1"))
    assert all(q.perm & Perm.WRITE == 0 for q in bodies.decode_route(resp.body).queue_datas)
    resp = await peer.request(independent_sign(put_kv("T1", "broker-a:4"), "ops", "ops-secret"))
    assert resp.code == ResponseCode.SUCCESS
    assert ns.server.kv.get("ORDER_TOPIC_CONFIG", "T1") == "broker-a:4"
    resp = await peer.request(independent_sign(delete_topic("T2"), "ops", "ops-secret"))
    assert resp.code == ResponseCode.SUCCESS
    resp = await peer.request(route("T2"))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST

    stats = ns.server.stats()
    assert stats["rejected.acl_unsigned"] == 6
    assert stats["rejected.acl_denied"] == 1


@pytest_twisted.ensureDeferred
async def test_signed_register_cannot_take_over_a_broker_name_bound_to_another_key(ns):
    owner = await connect(ns.port)
    resp = await owner.request(
        independent_sign(register_request(topic_configs("T1")), "broker-key", "broker-secret")
    )
    assert resp.code == ResponseCode.SUCCESS
    intruder = await connect(ns.port)
    takeover = register_request(topic_configs("T1"), broker_addr="10.9.9.9:10911")
    resp = await intruder.request(independent_sign(takeover, "other-key", "other-secret"))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "another AccessKey" in resp.remark
    resp = await intruder.request(
        independent_sign(unregister_request(), "other-key", "other-secret")
    )
    assert resp.code == ResponseCode.NO_PERMISSION
    heartbeat = RemotingCommand.request(
        RequestCode.BROKER_HEARTBEAT,
        {"clusterName": "DefaultCluster", "brokerAddr": "10.0.0.1:10911"},
    )
    resp = await intruder.request(independent_sign(heartbeat, "other-key", "other-secret"))
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await intruder.request(route("T1"))
    route_data = bodies.decode_route(resp.body)
    assert route_data.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}
    # The owner itself may re-register and unregister.
    resp = await owner.request(
        independent_sign(register_request(topic_configs("T1")), "broker-key", "broker-secret")
    )
    assert resp.code == ResponseCode.SUCCESS
    assert ns.server.stats()["rejected.acl_broker_taken"] == 3


@pytest_twisted.ensureDeferred
async def test_wrong_signature_or_unknown_key_is_refused(ns):
    peer = await connect(ns.port)
    forged = independent_sign(register_request(topic_configs("T1")), "broker-key", "guess")
    resp = await peer.request(forged)
    assert resp.code == ResponseCode.NO_PERMISSION
    tampered = independent_sign(wipe("broker-a"), "ops", "ops-secret")
    tampered.ext_fields["brokerName"] = "broker-b"
    resp = await peer.request(tampered)
    assert resp.code == ResponseCode.NO_PERMISSION
    odd = independent_sign(wipe("broker-a"), "ops", "ops-secret")
    odd.ext_fields["Signature"] = "sïgnature"  # not even ASCII: refused, not an error
    resp = await peer.request(odd)
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await peer.request(independent_sign(wipe("x"), "nobody", "x"))
    assert resp.code == ResponseCode.NO_PERMISSION
    # A bad signature on an otherwise open lookup is refused too.
    resp = await peer.request(independent_sign(route("T1"), "ops", "nope"))
    assert resp.code == ResponseCode.NO_PERMISSION
    stats = ns.server.stats()
    assert stats["rejected.acl_bad_signature"] == 4
    assert stats["rejected.acl_unknown_key"] == 1


@pytest_twisted.ensureDeferred
async def test_authenticated_reads_need_a_key_with_read_permission(make_world_server):
    running = make_world_server({"acl": dict(ACL, authenticate_reads=True)})
    peer = await connect(running.port)
    resp = await peer.request(route("T1"))
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await peer.request(independent_sign(route("T1"), "ops", "ops-secret"))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST


def test_server_signer_matches_the_independent_one_with_token_and_body():
    cmd = RemotingCommand.request(
        RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "Tö", "b": "2", "a": "1"}, b"\x00body"
    )
    fields = sign_ext_fields(cmd.ext_fields, cmd.body, "ak", "sk", security_token="tok")
    mine = independent_sign(
        RemotingCommand.request(cmd.code, {**cmd.ext_fields, "SecurityToken": "tok"}, cmd.body),
        "ak",
        "sk",
    )
    assert fields == mine.ext_fields
    assert compute_signature(fields, cmd.body, "sk") == fields["Signature"]


def test_acl_off_lets_everything_through_and_config_is_checked():
    control = AccessControl(AclConfig())
    assert (
        control.check(AccessClass.ADMIN, RequestCode.WIPE_WRITE_PERM_OF_BROKER, "WIPE", {}, b"")
        is None
    )
    with pytest.raises(ConfigError, match="at least one"):
        from_mapping({"acl": {"enabled": True}})
    with pytest.raises(ConfigError, match="appears twice"):
        from_mapping(
            {
                "acl": {
                    "accounts": [
                        {"access_key": "a", "secret_key": "s"},
                        {"access_key": "a", "secret_key": "t"},
                    ]
                }
            }
        )
    with pytest.raises(ConfigError, match=r"unknown config key acl\.accounts"):
        from_mapping({"acl": {"accounts": [{"access_key": "a", "secret_key": "s", "x": 1}]}})


@pytest_twisted.ensureDeferred
async def test_namesrv_config_answer_does_not_reveal_secret_keys(ns):
    peer = await connect(ns.port)
    resp = await peer.request(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG))
    text = resp.body.decode()
    assert "acl.accounts=broker-key,other-key,ops" in text
    assert "secret" not in text


def test_bound_on_remembered_broker_names_refuses_new_names_only():
    account = AclAccount(access_key="k", secret_key="s", brokers=["*"])
    control = AccessControl(AclConfig(enabled=True, max_bound_brokers=1, accounts=[account]))

    def register(name: str) -> dict[str, str]:
        ext = {"brokerName": name, "brokerAddr": f"{name}:10911", "clusterName": "C"}
        return sign_ext_fields(ext, b"", "k", "s")

    code, broker = RequestCode.REGISTER_BROKER, AccessClass.BROKER
    first = register("b1")
    assert control.check(broker, code, "REGISTER_BROKER", first, b"") == "k"
    control.accepted(code, "k", first)
    assert control.owner_of("b1") == "k"
    again = register("b1")
    assert control.check(broker, code, "REGISTER_BROKER", again, b"") == "k"
    with pytest.raises(AclDenied, match=r"max_bound_brokers=1"):
        control.check(broker, code, "REGISTER_BROKER", register("b2"), b"")
    assert control.rejections == {"bound": 1}
