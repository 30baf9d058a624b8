"""Strong signatures bound to their server, and one key unable to cost another anything, tried
as an attacker would: a request captured at one name server sent to another with the same
accounts; a key without rights, and then a key with them, flooding lookups stamped ahead of the
clock before the admin's own requests. Servers and connections share the deterministic world
(``support.memory_world``), whose clock the servers judge stamps by and the test signs by."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import pytest_twisted
from support.acl_signing import independent_sign, independent_strong_sign, resent
from support.memory_world import connect, now_ms

from namesrv.config import ConfigError, from_mapping
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand

ACCOUNTS = [
    {"access_key": "ops", "secret_key": "ops-secret", "admin": True, "signature": "strong"},
    {"access_key": "nobody", "secret_key": "nobody-secret", "read": False, "signature": "strong"},
    {"access_key": "reader", "secret_key": "reader-secret", "signature": "strong"},
]
SECRETS = {a["access_key"]: a["secret_key"] for a in ACCOUNTS}
SHARE = 100
"""Nonces one key holds: the attacks below send several times that."""


def acl(identity: str, **extra: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "server_identity": identity,
        "authenticate_reads": True,
        "replay_cache_max_entries": SHARE * len(ACCOUNTS),
        "replay_cache_max_entries_per_key": SHARE,
        "accounts": ACCOUNTS,
        **extra,
    }


_nonces = itertools.count()


def signed(cmd: RemotingCommand, key: str, server: str, ahead_ms: int = 0) -> RemotingCommand:
    stamp = now_ms() + ahead_ms
    nonce = f"attack-nonce-{next(_nonces):010d}"
    return independent_strong_sign(cmd, key, SECRETS[key], stamp, nonce, server)


def put_kv(value: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": value}
    )


def get_kv() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"})


def lookup() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})


async def kv_value(port: int, server: str) -> Any:
    peer = await connect(port)
    resp = await peer.request(signed(get_kv(), "ops", server))
    return resp.ext_fields.get("value") if resp.code == ResponseCode.SUCCESS else None


@pytest_twisted.ensureDeferred
async def test_a_put_kv_captured_at_one_name_server_is_refused_by_another_with_the_same_accounts(
    make_wall_server,
):
    a = make_wall_server({"acl": acl("ns-a.prod")})
    b = make_wall_server({"acl": acl("ns-b.prod")})
    admin = await connect(a.port)
    captured = signed(put_kv("from-admin"), "ops", "ns-a.prod")
    resp = await admin.request(captured)
    assert resp.code == ResponseCode.SUCCESS, resp.remark

    attacker = await connect(b.port)
    resp = await attacker.request(resent(captured))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "signed for name server 'ns-a.prod'; this one is 'ns-b.prod'" in resp.remark
    assert b.server.stats()["rejected.acl_wrong_server"] == 1
    value = await kv_value(b.port, "ns-b.prod")
    assert value is None  # B's KV config is untouched
    assert len(b.server.acl.replays) == 1  # only the check's own read left a nonce at B


@pytest_twisted.ensureDeferred
async def test_a_cluster_identity_makes_a_request_good_once_at_each_member_never_twice(
    make_wall_server,
):
    # What members sharing one identity share: the accounts and the identity, not the nonces.
    a = make_wall_server({"acl": acl("cluster.prod")})
    b = make_wall_server({"acl": acl("cluster.prod")})
    captured = signed(put_kv("v1"), "ops", "cluster.prod")
    for running in (a, b):
        peer = await connect(running.port)
        resp = await peer.request(resent(captured))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        resp = await peer.request(resent(captured))
        assert resp.code == ResponseCode.NO_PERMISSION and "a replayed request" in resp.remark


async def flood(port: int, key: str, identity: str, count: int) -> Any:
    """``count`` pipelined lookups signed by ``key`` and stamped 28 s ahead, each a millisecond
    after the one before (as a signer's clock moves: the clock here stands still while they are
    sent); their codes."""
    attacker = await connect(port)
    sent = [
        attacker.request(signed(lookup(), key, identity, ahead_ms=28_000 + n)) for n in range(count)
    ]
    return [(await answer).code for answer in sent]


@pytest_twisted.ensureDeferred
async def test_a_key_without_rights_flooding_future_stamps_stores_nothing_and_locks_no_one_out(
    make_wall_server,
):
    ns = make_wall_server({"acl": acl("ns-a.prod")})
    codes = await flood(ns.port, "nobody", "ns-a.prod", SHARE * 5)
    assert set(codes) == {ResponseCode.NO_PERMISSION}
    assert ns.server.stats()["rejected.acl_denied"] == SHARE * 5
    assert len(ns.server.acl.replays) == 0  # refused before its nonce was remembered

    admin = await connect(ns.port)
    resp = await admin.request(signed(put_kv("fresh"), "ops", "ns-a.prod"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert "rejected.acl_stale" not in ns.server.stats()


@pytest_twisted.ensureDeferred
async def test_a_key_with_rights_flooding_future_stamps_moves_only_its_own_floor(make_wall_server):
    ns = make_wall_server({"acl": acl("ns-a.prod")})
    codes = await flood(ns.port, "reader", "ns-a.prod", SHARE * 5)
    served = [c for c in codes if c != ResponseCode.NO_PERMISSION]  # T has no route: answered
    assert len(served) >= SHARE  # its lookups are served ...
    replays = ns.server.acl.replays
    assert replays.held_by("reader") == SHARE and len(replays) == SHARE  # ... within its share
    assert replays.floor_of("reader") > now_ms() + 20_000

    admin = await connect(ns.port)
    for value in ("fresh-1", "fresh-2", "fresh-3"):
        resp = await admin.request(signed(put_kv(value), "ops", "ns-a.prod"))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert replays.floor_of("ops") == ns.server.acl.started_ms - 1  # the start, unmoved
    # The flooding key pays for its own stamps: its fresh requests are now stale.
    reader = await connect(ns.port)
    resp = await reader.request(signed(lookup(), "reader", "ns-a.prod"))
    assert resp.code == ResponseCode.NO_PERMISSION and "forgotten" in resp.remark


@pytest_twisted.ensureDeferred
async def test_a_server_without_an_identity_takes_upstream_signatures_and_refuses_strong_ones(
    make_wall_server,
):
    either = {"access_key": "ops", "secret_key": "ops-secret", "admin": True}
    ns = make_wall_server({"acl": {"enabled": True, "accounts": [either]}})
    peer = await connect(ns.port)
    resp = await peer.request(signed(put_kv("strong"), "ops", "anything"))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "this name server has no acl.server_identity" in resp.remark
    resp = await peer.request(independent_sign(put_kv("upstream"), "ops", "ops-secret"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


@pytest.mark.parametrize(
    ("acl_config", "message"),
    [
        (
            {"accounts": ACCOUNTS[:1]},
            "acl.server_identity must be set: account 'ops' takes only the strong",
        ),
        ({"accounts": ACCOUNTS[:1], "server_identity": "ns 1"}, "acl.server_identity must be"),
        (
            {"accounts": ACCOUNTS, "server_identity": "ns", "replay_cache_max_entries": 2},
            "must give each of the 3 accounts taking the strong form at least one entry",
        ),
        (
            {"accounts": ACCOUNTS, "server_identity": "ns", "replay_cache_max_entries_per_key": 0},
            "acl.replay_cache_max_entries_per_key must be positive",
        ),
    ],
)
def test_identity_and_replay_bounds_out_of_shape_are_refused_at_start_up(acl_config, message):
    with pytest.raises(ConfigError, match=message):
        from_mapping({"acl": {"enabled": True, **acl_config}})
