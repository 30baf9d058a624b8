"""Strong-signed requests replayed across a restart and across clock steps, as an attacker who
captured their bytes would: each was accepted once and is never accepted again by that server.
Servers and connections share the deterministic world (``support.memory_world``), whose clock
the servers judge stamps by and the test signs by."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from support.acl_signing import independent_strong_sign, resent
from support.memory_world import (
    WALL_START_S,
    MemoryWorld,
    WorldDeferred,
    connect,
    now_ms,
    the_world,
)

from namesrv.config import IN_MEMORY, check_paths, from_mapping, replay_record_file
from namesrv.requests.acl import AccessControl, AclDenied
from namesrv.requests.commands import AccessClass
from namesrv.requests.replay_record import ReplayRecord
from namesrv.server import NameServer
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand

IDENTITY = "ns-a.prod"
SKEW_MS = 120_000
ACL = {
    "enabled": True,
    "server_identity": IDENTITY,
    "signature_skew_ms": SKEW_MS,
    "accounts": [
        {"access_key": "ops", "secret_key": "ops-secret", "admin": True, "signature": "strong"}
    ],
}
_nonces = itertools.count()


def signed(cmd: RemotingCommand, stamp_ms: int) -> RemotingCommand:
    nonce = f"restart-nonce-{next(_nonces):010d}"
    return independent_strong_sign(cmd, "ops", "ops-secret", stamp_ms, nonce, IDENTITY)


def put_kv(value: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k", "value": value}
    )


def wipe() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b"})


async def send(port: int, cmd: RemotingCommand) -> Any:
    peer = await connect(port)
    resp = await peer.request(resent(cmd))
    return resp


@pytest_twisted.ensureDeferred
async def test_requests_captured_before_a_restart_are_refused_after_it_even_stamped_ahead(
    make_wall_server, tmp_path
):
    """A client clock running 60 s ahead stamps requests the restarted server's clock has not
    reached: only the replay record refuses them."""
    files = {
        "acl": {**ACL, "replay_record_path": str(tmp_path / "replay.json")},
        "registry": {"kv_config_path": str(tmp_path / "kv.json")},
    }
    first = make_wall_server(files)
    ahead = now_ms() + 60_000
    captured = [signed(put_kv("old"), ahead), signed(wipe(), ahead + 1)]
    for cmd in captured:
        assert (await send(first.port, cmd)).code == ResponseCode.SUCCESS
    assert (await send(first.port, signed(put_kv("new"), ahead + 2))).code == ResponseCode.SUCCESS
    await WorldDeferred(the_world(), first.server.stop(grace_ms=0))

    second = make_wall_server(files)  # within the skew window: the stamps alone would pass
    assert second.server.kv.get("NS", "k") == "new"
    for cmd in captured:
        resp = await send(second.port, cmd)
        assert resp.code == ResponseCode.NO_PERMISSION
        assert "earlier run of this server" in resp.remark
    assert second.server.kv.get("NS", "k") == "new"  # the value did not revert
    assert second.server.stats()["rejected.acl_stale"] == 2
    # The key's fresh requests are served.
    resp = await send(second.port, signed(put_kv("newer"), ahead + 3))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def start_at_defaults(world: MemoryWorld, raw: dict[str, Any]) -> tuple[NameServer, int]:
    """A server in ``world`` on ``raw`` and the defaults of every state file, prepared as
    ``python -m namesrv`` prepares it; the home directory is the test's."""
    config = from_mapping(
        {
            **raw,
            "server": {"listen": "127.0.0.1:0", "shutdown_grace_ms": 0, "wait_for_service_ms": 0},
        }
    )
    check_paths(config)
    return world.serve(config, epoch="e1")


@pytest_twisted.ensureDeferred
async def test_at_the_defaults_requests_captured_before_a_restart_are_refused_after_it(
    memory_world, tmp_path, monkeypatch
):
    """No state-file setting at all: the record sits beside the default kvConfig.json, so a
    request stamped ahead of the restarted server's clock is refused and its effect stays gone."""
    monkeypatch.setenv("HOME", str(tmp_path))
    record = tmp_path / "namesrv" / "aclReplayRecord.json"
    memory_world.start_at(WALL_START_S)
    first, port = start_at_defaults(memory_world, {"acl": ACL})
    try:
        ahead = now_ms() + 60_000
        captured = [signed(put_kv("old"), ahead), signed(wipe(), ahead + 1)]
        for cmd in captured:
            assert (await send(port, cmd)).code == ResponseCode.SUCCESS
        resp = await send(port, signed(put_kv("new"), ahead + 2))
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await WorldDeferred(memory_world, first.stop(grace_ms=0))
    assert Path(replay_record_file(first.config) or "") == record
    assert json.loads(record.read_text()) == {"highestAcceptedMs": {"ops": ahead + 2}}

    # Within the window: the stamps alone would pass.
    second, port = start_at_defaults(memory_world, {"acl": ACL})
    try:
        assert second.kv.get("NS", "k") == "new"
        for cmd in captured:
            resp = await send(port, cmd)
            assert resp.code == ResponseCode.NO_PERMISSION
            assert "earlier run of this server" in resp.remark
        assert second.kv.get("NS", "k") == "new"
        assert second.stats()["rejected.acl_stale"] == 2
        resp = await send(port, signed(put_kv("newer"), ahead + 3))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await WorldDeferred(memory_world, second.stop(grace_ms=0))


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"acl": ACL}, "{home}/namesrv/aclReplayRecord.json"),
        (
            {"acl": ACL, "registry": {"kv_config_path": "{home}/state/kv.json"}},
            "{home}/state/aclReplayRecord.json",
        ),
        (
            {"acl": ACL, "registry": {"kv_config_path": IN_MEMORY}},
            "{home}/namesrv/aclReplayRecord.json",
        ),
        ({"acl": {**ACL, "replay_record_path": "{home}/r.json"}}, "{home}/r.json"),
        ({"acl": {**ACL, "replay_record_path": "~/r.json"}}, "{home}/r.json"),
        ({"acl": {**ACL, "replay_record_path": IN_MEMORY}}, None),
        ({"acl": {**ACL, "replay_record_path": ""}}, None),
        ({"acl": {**ACL, "enabled": False}}, None),
        (
            {"acl": {**ACL, "accounts": [{**ACL["accounts"][0], "signature": "upstream"}]}},
            None,
        ),
    ],
)
def test_the_replay_record_sits_beside_the_kv_file_unless_opted_out_or_unneeded(
    tmp_path, monkeypatch, raw, where
):
    monkeypatch.setenv("HOME", str(tmp_path))
    filled = json.loads(json.dumps(raw).replace("{home}", str(tmp_path)))
    expected = where.replace("{home}", str(tmp_path)) if where is not None else None
    assert replay_record_file(from_mapping(filled)) == expected


@pytest_twisted.ensureDeferred
async def test_without_a_record_requests_stamped_before_the_restart_are_refused_after_it(
    make_wall_server,
):
    first = make_wall_server({"acl": ACL})
    captured = signed(put_kv("old"), now_ms())
    assert (await send(first.port, captured)).code == ResponseCode.SUCCESS
    await WorldDeferred(the_world(), first.server.stop(grace_ms=0))
    stamp = int(captured.ext_fields["SignTimestamp"])
    the_world().advance(0.002)  # the restart happens at a later millisecond
    assert now_ms() > stamp + 1
    second = make_wall_server({"acl": ACL})
    assert second.server.acl.started_ms > stamp
    resp = await send(second.port, captured)
    assert resp.code == ResponseCode.NO_PERMISSION and "start" in resp.remark
    assert second.server.kv.get("NS", "k") is None


def check(acl: AccessControl, cmd: RemotingCommand) -> str | None:
    return acl.check(AccessClass.ADMIN, cmd.code, str(cmd.code), cmd.ext_fields, cmd.body)


def refused(acl: AccessControl, cmd: RemotingCommand) -> str:
    try:
        check(acl, cmd)
    except AclDenied as denied:
        return denied.kind
    return "accepted"


def test_a_clock_stepped_forward_then_back_does_not_let_a_forgotten_nonce_back_in():
    wall = [1_700_000_000_000]
    acl = AccessControl(from_mapping({"acl": ACL}).acl, wall_clock_ms=lambda: wall[0])
    wall[0] += 1_000
    captured = signed(put_kv("v"), wall[0])
    assert check(acl, captured) == "ops"
    wall[0] += SKEW_MS + 1  # the clock steps forward: the nonce leaves the window, forgotten
    assert refused(acl, resent(captured)) == "stale"
    wall[0] -= SKEW_MS  # ... and back: the stamp is in the window again
    assert refused(acl, resent(captured)) == "stale"
    assert check(acl, signed(put_kv("w"), wall[0] + 5)) == "ops"


def test_a_restart_onto_a_clock_stepped_back_refuses_what_the_last_run_accepted(tmp_path):
    path = str(tmp_path / "replay.json")
    config = from_mapping({"acl": ACL}).acl
    wall = [1_700_000_000_000]
    record = ReplayRecord(path)
    acl = AccessControl(config, wall_clock_ms=lambda: wall[0], record=record)
    wall[0] += 1_000
    captured = signed(put_kv("v"), wall[0] + 30_000)
    assert check(acl, captured) == "ops"
    assert record.close(10)

    wall[0] -= 60_000  # the restarted server's clock is a minute behind the first one's
    again = AccessControl(config, wall_clock_ms=lambda: wall[0], record=ReplayRecord(path))
    assert refused(again, resent(captured)) == "stale"
    assert again.replays.floor_of("ops") == int(captured.ext_fields["SignTimestamp"])
    # What the key signs past the recorded stamp is accepted.
    assert check(again, signed(put_kv("w"), wall[0] + 95_000)) == "ops"
