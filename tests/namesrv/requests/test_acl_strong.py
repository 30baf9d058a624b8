"""Strong signatures, tried as an attacker would: captured requests sent again under another
code, as they were, and after their window; per-account forms; the namesrv-admin command.

The server, the test's connections and the command share the deterministic world
(``support.memory_world``): the server judges stamps by the world's clock and the test signs by
it, so the window is tried to the millisecond on either side."""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted
from click.testing import Result
from support.acl_signing import (
    SERVER_IDENTITY,
    STRONG_ACL,
    independent_sign,
    independent_strong_sign,
    recoded,
    resent,
)
from support.fake_broker import register_request, topic_configs
from support.memory_admin import namesrv_admin
from support.memory_world import connect, now_ms, the_world

from namesrv.admin import wire as admin_wire
from namesrv.config import ConfigError, from_mapping
from namesrv.requests.acl import AccessClass, AccessControl, AclDenied
from protocol import bodies, signing
from protocol.codes import Perm, RequestCode, ResponseCode
from protocol.frame import RemotingCommand, encode_command

SKEW_MS = STRONG_ACL["signature_skew_ms"]


@pytest.fixture
def ns(make_wall_server):
    return make_wall_server({"acl": STRONG_ACL})


_nonces = iter(range(10**6))


def nonce() -> str:
    return f"test-nonce-{next(_nonces):08d}"


def strong(cmd: RemotingCommand, key: str = "ops", secret: str = "ops-secret", **kw: Any):
    stamp = kw["timestamp_ms"] if "timestamp_ms" in kw else now_ms()
    return independent_strong_sign(cmd, key, secret, stamp, kw.get("nonce", nonce()))


def route(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def add_perm(broker: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": broker})


def wipe(broker: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker})


async def with_broker(port: int) -> Any:
    broker = await connect(port)
    resp = await broker.request(
        independent_sign(register_request(topic_configs("T", "U")), "broker-key", "broker-secret")
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return broker


async def route_body(peer: Any, topic: str) -> Any:
    resp = await peer.request(route(topic))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp.body


def writable(body: bytes) -> bool:
    return all(q.perm & Perm.WRITE for q in bodies.decode_route(body).queue_datas)


@pytest_twisted.ensureDeferred
async def test_a_captured_strong_lookup_sent_as_delete_topic_is_refused_and_changes_nothing(ns):
    await with_broker(ns.port)
    ops = await connect(ns.port)
    captured = strong(route("T"))
    resp = await ops.request(captured)
    assert resp.code == ResponseCode.SUCCESS, resp.remark

    stranger = await connect(ns.port)
    before = await route_body(stranger, "T")
    resp = await stranger.request(recoded(captured, RequestCode.DELETE_TOPIC_IN_NAMESRV))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "strong signature of DELETE_TOPIC_IN_NAMESRV" in resp.remark
    after = await route_body(stranger, "T")
    assert after == before
    assert ns.server.stats()["rejected.acl_bad_signature"] == 1


@pytest_twisted.ensureDeferred
async def test_signed_add_write_perm_fields_sent_as_wipe_are_refused_and_the_broker_stays_writable(
    ns,
):
    await with_broker(ns.port)
    ops = await connect(ns.port)
    captured = strong(add_perm("broker-a"))
    resp = await ops.request(captured)
    assert resp.code == ResponseCode.SUCCESS, resp.remark

    stranger = await connect(ns.port)
    resp = await stranger.request(recoded(captured, RequestCode.WIPE_WRITE_PERM_OF_BROKER))
    assert resp.code == ResponseCode.NO_PERMISSION
    body = await route_body(stranger, "T")
    assert writable(body)


@pytest_twisted.ensureDeferred
async def test_an_exact_replay_of_a_captured_wipe_is_refused_after_the_admin_restored_the_broker(
    ns,
):
    await with_broker(ns.port)
    ops = await connect(ns.port)
    captured = strong(wipe("broker-a"))
    resp = await ops.request(captured)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await ops.request(strong(add_perm("broker-a")))
    assert resp.code == ResponseCode.SUCCESS, resp.remark

    stranger = await connect(ns.port)
    for _ in range(3):
        resp = await stranger.request(resent(captured))
        assert resp.code == ResponseCode.NO_PERMISSION
        assert "a replayed request" in resp.remark
    body = await route_body(stranger, "T")
    assert writable(body)
    assert ns.server.stats()["rejected.acl_replayed"] == 3


@pytest_twisted.ensureDeferred
async def test_a_request_stamped_outside_the_skew_window_is_refused_and_changes_nothing(ns):
    await with_broker(ns.port)
    stranger = await connect(ns.port)
    # Captured long ago and never sent, or sent from a clock far ahead: both out of the window.
    for stamp in (now_ms() - SKEW_MS - 5_000, now_ms() + SKEW_MS + 5_000):
        resp = await stranger.request(
            strong(
                RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"}),
                timestamp_ms=stamp,
            )
        )
        assert resp.code == ResponseCode.NO_PERMISSION
        assert "outside acl.signature_skew_ms=60000" in resp.remark
    await route_body(stranger, "T")
    assert ns.server.stats()["rejected.acl_stale"] == 2


@pytest_twisted.ensureDeferred
async def test_the_skew_window_holds_to_the_millisecond_either_way_and_as_the_clock_moves(ns):
    world = the_world()
    await with_broker(ns.port)
    world.advance(2 * SKEW_MS / 1000)  # the server's start is out of the window's reach
    peer = await connect(ns.port)
    t0 = now_ms()

    async def code_of(stamp_ms: int) -> int:
        resp = await peer.request(strong(add_perm("broker-a"), timestamp_ms=stamp_ms))
        return resp.code

    assert await code_of(t0 - SKEW_MS) == ResponseCode.SUCCESS
    assert await code_of(t0 - SKEW_MS - 1) == ResponseCode.NO_PERMISSION
    assert await code_of(t0 + SKEW_MS) == ResponseCode.SUCCESS
    assert await code_of(t0 + SKEW_MS + 1) == ResponseCode.NO_PERMISSION
    # Signed now and sent a window later: at the edge still fresh, a millisecond older stale.
    edge = strong(add_perm("broker-a"), timestamp_ms=t0)
    older = strong(add_perm("broker-a"), timestamp_ms=t0 - 1)
    world.advance(SKEW_MS / 1000)
    assert now_ms() == t0 + SKEW_MS
    resp = await peer.request(edge)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await peer.request(older)
    assert resp.code == ResponseCode.NO_PERMISSION
    assert f"stamped {t0 - 1}, {-SKEW_MS - 1:+d} ms from this server's clock" in resp.remark
    assert ns.server.stats()["rejected.acl_stale"] == 3


def control(wall: list[int], **acl: Any) -> AccessControl:
    """Access control of a server started an hour before ``wall[0]``."""
    config = from_mapping({"acl": {**STRONG_ACL, **acl}}).acl
    now = wall[0]
    wall[0] -= 3_600_000
    made = AccessControl(config, wall_clock_ms=lambda: wall[0])
    wall[0] = now
    return made


def check(acl: AccessControl, cmd: RemotingCommand, klass: AccessClass = AccessClass.ADMIN):
    return acl.check(klass, cmd.code, str(cmd.code), cmd.ext_fields, cmd.body)


def test_a_replay_after_the_window_is_refused_once_the_nonce_has_been_forgotten():
    wall = [1_700_000_000_000]
    acl = control(wall)
    captured = strong(wipe("broker-a"), timestamp_ms=wall[0])
    assert check(acl, captured) == "ops"
    assert len(acl.replays) == 1
    wall[0] += SKEW_MS + 1
    with pytest.raises(AclDenied) as refused:
        check(acl, resent(captured))
    assert refused.value.kind == "stale"
    assert len(acl.replays) == 0  # the nonce's window ended: the stamp alone refuses it now


def test_a_full_replay_cache_drops_the_oldest_nonce_and_refuses_whatever_is_stamped_before_it():
    wall = [1_700_000_000_000]
    acl = control(wall, replay_cache_max_entries_per_key=2)
    first = strong(wipe("broker-a"), timestamp_ms=wall[0] - 10)
    check(acl, first)
    check(acl, strong(wipe("broker-a"), timestamp_ms=wall[0] - 5))
    check(acl, strong(wipe("broker-a"), timestamp_ms=wall[0]))
    assert len(acl.replays) == 2 and acl.replays.dropped == 1
    with pytest.raises(AclDenied) as refused:
        check(acl, resent(first))  # its nonce was dropped: its stamp is now below the floor
    assert refused.value.kind == "stale"
    assert check(acl, strong(wipe("broker-a"), timestamp_ms=wall[0] + 1)) == "ops"


@pytest_twisted.ensureDeferred
async def test_a_strong_account_refuses_upstream_signatures_even_correct_ones(ns):
    await with_broker(ns.port)
    peer = await connect(ns.port)
    resp = await peer.request(independent_sign(wipe("broker-a"), "ops", "ops-secret"))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "accepts only strong signatures" in resp.remark
    body = await route_body(peer, "T")
    assert writable(body)
    assert ns.server.stats()["rejected.acl_form_refused"] == 1


@pytest_twisted.ensureDeferred
async def test_an_either_account_takes_both_forms_and_strong_ones_only_once(ns):
    await with_broker(ns.port)
    peer = await connect(ns.port)
    resp = await peer.request(independent_sign(wipe("broker-a"), "ops-either", "either-secret"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    captured = strong(add_perm("broker-a"), "ops-either", "either-secret")
    resp = await peer.request(captured)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await peer.request(recoded(captured, RequestCode.WIPE_WRITE_PERM_OF_BROKER))
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await peer.request(resent(captured))
    assert resp.code == ResponseCode.NO_PERMISSION
    # Without its strong fields the strong signature does not pass for an upstream one.
    stripped = resent(captured)
    for field in (signing.SIGNATURE_FORM, signing.SIGN_TIMESTAMP, signing.SIGN_NONCE):
        del stripped.ext_fields[field]
    resp = await peer.request(recoded(stripped, RequestCode.WIPE_WRITE_PERM_OF_BROKER))
    assert resp.code == ResponseCode.NO_PERMISSION
    body = await route_body(peer, "T")
    assert writable(body)


@pytest_twisted.ensureDeferred
async def test_an_upstream_account_refuses_the_strong_form_and_takes_upstreams(ns):
    await with_broker(ns.port)
    peer = await connect(ns.port)
    resp = await peer.request(strong(wipe("broker-a"), "ops-upstream", "upstream-secret"))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "accepts only upstream's signature form" in resp.remark
    body = await route_body(peer, "T")
    assert writable(body)
    resp = await peer.request(independent_sign(wipe("broker-a"), "ops-upstream", "upstream-secret"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


@pytest_twisted.ensureDeferred
async def test_malformed_strong_fields_are_refused_with_a_remark_naming_the_field(ns):
    peer = await connect(ns.port)
    bad = strong(wipe("broker-a"))
    bad.ext_fields[signing.SIGN_NONCE] = "short"
    resp = await peer.request(bad)
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "SignNonce must be 16 to 64 characters" in resp.remark


def admin(port: int, *args: str) -> Result:
    return namesrv_admin(
        the_world(),
        [
            "--namesrv",
            f"127.0.0.1:{port}",
            "--access-key",
            "ops",
            "--secret-key",
            "ops-secret",
            "--server-identity",
            SERVER_IDENTITY,
            *args,
        ],
    )


@pytest_twisted.ensureDeferred
async def test_namesrv_admin_with_a_strong_only_account_works_and_its_upstream_form_is_refused(ns):
    await with_broker(ns.port)
    result = admin(ns.port, "wipe-write-perm", "broker-a")
    assert result.exit_code == 0, result.output
    result = admin(ns.port, "--json", "topic-route", "T")
    assert result.exit_code == 0, result.output
    assert all(not q["perm"] & Perm.WRITE for q in json.loads(result.stdout)["queueDatas"])
    result = admin(ns.port, "add-write-perm", "broker-a")
    assert result.exit_code == 0, result.output
    result = admin(ns.port, "--signature", "upstream", "wipe-write-perm", "broker-a")
    assert result.exit_code == 1
    assert "accepts only strong signatures" in result.stderr
    stranger = await connect(ns.port)
    body = await route_body(stranger, "T")
    assert writable(body)


def test_an_unknown_signature_form_in_the_config_is_refused():
    bad = {**STRONG_ACL, "accounts": [{"access_key": "a", "secret_key": "s", "signature": "weak"}]}
    with pytest.raises(ConfigError, match="signature must be one of upstream, strong, either"):
        from_mapping({"acl": bad})
    with pytest.raises(ConfigError, match=r"acl\.signature_skew_ms must be positive"):
        from_mapping({"acl": {**STRONG_ACL, "signature_skew_ms": 0}})


@pytest_twisted.ensureDeferred
async def test_the_lookup_namesrv_admin_sent_cannot_be_replayed_as_delete_topic_or_as_itself(
    ns, monkeypatch
):
    sent: list[RemotingCommand] = []

    def capture(cmd: RemotingCommand) -> bytes:
        sent.append(RemotingCommand.request(cmd.code, dict(cmd.ext_fields), cmd.body))
        return encode_command(cmd)

    monkeypatch.setattr(admin_wire, "encode_command", capture)
    await with_broker(ns.port)
    result = admin(ns.port, "topic-route", "T")
    assert result.exit_code == 0, result.output
    (captured,) = sent
    assert captured.ext_fields[signing.SIGNATURE_FORM] == signing.STRONG_V2

    stranger = await connect(ns.port)
    before = await route_body(stranger, "T")
    resp = await stranger.request(recoded(captured, RequestCode.DELETE_TOPIC_IN_NAMESRV))
    assert resp.code == ResponseCode.NO_PERMISSION
    resp = await stranger.request(resent(captured))
    assert resp.code == ResponseCode.NO_PERMISSION
    after = await route_body(stranger, "T")
    assert after == before
