"""The config and KV doors played as an attacker: bodies refused before they cost, listings
encoded once per change, the KV table bounded by what it occupies, and a run-time switch that
moves many routes applied a slice per turn. Against the real server in the deterministic world
(``support.memory_world``), whose turns a test may take one at a time."""

from __future__ import annotations

from typing import Any

import pytest_twisted
from support.fake_broker import register_request, topic_configs
from support.memory_world import connect, the_world

import namesrv.requests.handlers.server_config as server_config
from namesrv.requests.handlers.server_config import (
    MAX_KEYS_NAMED,
    MAX_UPDATE_BODY_BYTES,
    MAX_UPDATE_KEYS,
)
from namesrv.routes.route_bodies import ORDER_TOPIC_CONFIG_NAMESPACE
from protocol import bodies, peer_text
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand

REMARK_BOUND = 2_048
"""What a refusal's remark may hold: a few named keys, never the body."""


def update_body(body: bytes) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)


def spy_lookups(monkeypatch: Any) -> list[str]:
    """The config keys the handler looks up: its work per key."""
    looked: list[str] = []
    real = server_config.resolve_key

    def counting(key: str) -> Any:
        looked.append(key)
        return real(key)

    monkeypatch.setattr(server_config, "resolve_key", counting)
    return looked


@pytest_twisted.ensureDeferred
async def test_a_config_body_naming_200000_unknown_keys_is_refused_unread_with_a_short_remark(
    make_world_server, monkeypatch
):
    ns = make_world_server()
    looked = spy_lookups(monkeypatch)
    peer = await connect(ns.port)
    body = b"".join(b"unknown.key.%d=1\n" % i for i in range(200_000))
    resp = await peer.request(update_body(body))
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert f"over {MAX_UPDATE_BODY_BYTES}" in resp.remark
    assert len(resp.remark) < REMARK_BOUND
    assert looked == []
    # Within the byte bound but past the key count: refused before any key is looked up.
    many = b"".join(b"k%d=1\n" % i for i in range(MAX_UPDATE_KEYS + 1))
    assert len(many) <= MAX_UPDATE_BODY_BYTES
    resp = await peer.request(update_body(many))
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert f"over {MAX_UPDATE_KEYS}" in resp.remark
    assert looked == []
    # The server goes on serving: a good update still lands.
    resp = await peer.request(update_body(b"orderMessageEnable=true\n"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert ns.server.config.registry.order_message_enable is True


@pytest_twisted.ensureDeferred
async def test_a_remark_names_a_few_refused_keys_cut_short_and_counts_the_rest(
    make_world_server, monkeypatch
):
    ns = make_world_server()
    looked = spy_lookups(monkeypatch)
    peer = await connect(ns.port)
    long_keys = [f"k{i}" + "x" * 200 for i in range(MAX_UPDATE_KEYS)]
    body = "".join(f"{key}=1\n" for key in long_keys).encode()
    assert len(body) <= MAX_UPDATE_BODY_BYTES
    resp = await peer.request(update_body(body))
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert len(resp.remark) < REMARK_BOUND
    assert f"and {MAX_UPDATE_KEYS - MAX_KEYS_NAMED} more" in resp.remark
    assert "k0xxx" in resp.remark and long_keys[0] not in resp.remark
    assert len(looked) == MAX_UPDATE_KEYS
    assert ns.server.config.registry.order_message_enable is False


@pytest_twisted.ensureDeferred
async def test_a_namespace_listing_is_encoded_once_per_change_in_upstreams_form(make_world_server):
    ns = make_world_server({"registry": {"max_kv_config_bytes": 64 * 1024 * 1024}})
    kv = ns.server.kv
    table = {f"{i:x}": str(i % 10) for i in range(100_000)}
    for key, value in table.items():
        kv.put("big", key, value)
    peer = await connect(ns.port)
    for _ in range(3):
        resp = await peer.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "big"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert bodies.decode_kv_table(resp.body) == table
    assert resp.body == peer_text.dumps({"table": table})  # the bytes upstream clients read
    assert ns.server.stats()["kv_listing_builds"] == 1
    resp = await peer.call(
        RequestCode.PUT_KV_CONFIG, {"namespace": "big", "key": "new", "value": "v"}
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    for _ in range(2):
        resp = await peer.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "big"})
    assert bodies.decode_kv_table(resp.body) == {**table, "new": "v"}
    assert ns.server.stats()["kv_listing_builds"] == 2


@pytest_twisted.ensureDeferred
async def test_tiny_kv_entries_are_refused_at_the_bound_counted_with_their_overhead(
    make_world_server,
):
    bound = 256 * 1024
    ns = make_world_server({"registry": {"max_kv_config_bytes": bound}})
    peer = await connect(ns.port)
    stored = 0
    for i in range(10_000):
        resp = await peer.call(
            RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": f"{i:x}", "value": "v"}
        )
        if resp.code != ResponseCode.SUCCESS:
            break
        stored += 1
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert f"registry.max_kv_config_bytes={bound}" in resp.remark
    # Text alone (about 5 bytes an entry) would have let 50,000 in; memory lets a few thousand.
    assert 1_000 < stored < 2_000
    assert ns.server.stats()["kv_config_bytes"] <= bound
    resp = await peer.call(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "0"})
    assert resp.code == ResponseCode.SUCCESS


@pytest_twisted.ensureDeferred
async def test_toggling_order_messages_over_a_full_order_namespace_moves_routes_a_slice_per_turn(
    make_world_server,
):
    slice_topics = 200
    topics = [f"T{i}" for i in range(2_000)]
    ns = make_world_server({"registry": {"register_slice_topics": slice_topics}})
    server = ns.server
    broker = await connect(ns.port)
    # The register itself is applied a slice per turn: awaiting it runs them.
    registered = await broker.request(register_request(topic_configs(*topics)))
    assert registered.code == ResponseCode.SUCCESS, registered.remark
    for topic in topics:
        server.kv.put(ORDER_TOPIC_CONFIG_NAMESPACE, topic, "broker-a:4")
    reported: list[int] = []
    real_mark = server.detector.mark

    def mark(moved: Any, cause: Any) -> None:
        reported.append(len(moved))
        real_mark(moved, cause)

    server.detector.mark = mark  # type: ignore[method-assign]
    client = await connect(ns.port)
    turns = the_world().reactor
    slices = server.counters["register_slices"]
    answer = client.request(update_body(b"orderMessageEnable=true\n"))
    turns.read_round()  # the server reads the update and answers it
    turns.read_round()  # the answer reaches the client: no slice has run
    resp = answer.result
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert reported == [] and server.pending_registers == 1  # nothing moved in the answer's turn
    # A lookup between slices is answered at once.
    turns.step()  # one turn of the clock: the first slice
    assert 0 < sum(reported) <= slice_topics
    lookup = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1999"})
    turns.read_round()
    turns.read_round()
    assert lookup.result.code == ResponseCode.SUCCESS
    assert server.pending_registers == 1 and sum(reported) <= slice_topics
    while server.pending_registers:
        assert turns.step()  # runs each turn the slices schedule, one slice per turn
    assert max(reported) <= slice_topics
    assert sum(reported) == len(topics)
    assert server.counters["register_slices"] - slices >= len(topics) // slice_topics
    resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1999"})
    assert bodies.decode_route(resp.body).order_topic_conf == "broker-a:4"
