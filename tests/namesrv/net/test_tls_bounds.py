"""TLS connections under every bound a plaintext one is, written as the attacks:
silent connections from one host, handshakes that never start or never finish.

Sockets are loopback; the server's timers (idle, frame and handshake timeouts) run on a fake
clock, advanced a second at a time as the housekeeping runs.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
import pytest_twisted
from support.loopback_wait import server_side, until
from support.tls_certs import client_hello, self_signed
from support.wire_client import WireClient, connect, connect_tls

from client_push.routes.client import RouteEvent
from protocol.codes import RequestCode, ResponseCode

MODES = ["disabled", "permissive", "enforcing"]
TLS_MODES = ["permissive", "enforcing"]


def server_with(make_server: Any, tmp_path: Any, mode: str, **server: Any) -> Any:
    cert, key = self_signed(tmp_path)
    tls = {"tls": mode, "tls_cert_file": cert, "tls_key_file": key} if mode != "disabled" else {}
    return make_server({"server": {**tls, **server}})


def advance(ns: Any, seconds: int) -> None:
    for _ in range(seconds):
        ns.clock.advance(1)


def none_closing(ns: Any, clients: list[WireClient]) -> bool:
    """The server holds every one of ``clients`` open and has decided to close none.

    Its timeouts run on the fake clock and decide as it moves, so right after an advance this
    is exact; no wait can show it better."""
    conns = [server_side(ns.server, c) for c in clients]
    return all(conn is not None and not conn.closing for conn in conns)


async def closed_at(ns: Any, clients: list[WireClient], second: int) -> None:
    """Advance the clock to ``second``: ``clients`` stay open until then, and close at it."""
    await until(lambda: all(server_side(ns.server, c) is not None for c in clients))  # accepted
    advance(ns, second - 1)
    assert none_closing(ns, clients)
    advance(ns, 1)
    await until(lambda: not any(c.connected for c in clients))


@pytest.mark.parametrize("mode", MODES)
@pytest_twisted.ensureDeferred
async def test_silent_connections_from_one_host_are_cut_to_the_host_bound_then_closed_idle(
    make_server, tmp_path, mode
):
    ns = server_with(make_server, tmp_path, mode, max_connections_per_host=5, idle_timeout_ms=3_000)
    silent = [await connect(ns.port) for _ in range(20)]
    # Refused when TCP accepts them, with no byte sent and no clock moved.
    await until(lambda: sum(c.connected for c in silent) == 5)
    stats = ns.server.stats()
    assert stats["connections"] == 5
    assert stats["connections_refused.max_connections_per_host"] == 15
    await closed_at(ns, [c for c in silent if c.connected], 3)
    stats = ns.server.stats()
    assert stats["idle_closes"] == 5
    assert stats["connections"] == 0
    assert stats.get("tls_handshake_timeouts", 0) == 0


@pytest.mark.parametrize("mode", TLS_MODES)
@pytest_twisted.ensureDeferred
async def test_a_handshake_stalled_inside_its_client_hello_is_closed_at_the_handshake_timeout(
    make_server, tmp_path, mode
):
    ns = server_with(make_server, tmp_path, mode, tls_handshake_timeout_ms=10_000)
    hello = client_hello()
    stalled = await connect(ns.port)
    stalled.transport.write(hello[: len(hello) // 2])
    await until(lambda: ns.server.stats().get("tls.handshake") == 1)
    await closed_at(ns, [stalled], 10)
    stats = ns.server.stats()
    assert stats["tls_handshake_timeouts"] == 1
    assert stats["connections"] == 0
    assert stats.get("idle_closes", 0) == 0


@pytest_twisted.ensureDeferred
async def test_enforcing_closes_a_connection_that_never_starts_its_handshake(make_server, tmp_path):
    ns = server_with(make_server, tmp_path, "enforcing", tls_handshake_timeout_ms=5_000)
    silent = await connect(ns.port)
    await closed_at(ns, [silent], 5)
    assert ns.server.stats()["tls_handshake_timeouts"] == 1


@pytest_twisted.ensureDeferred
async def test_permissive_holds_silent_and_plaintext_connections_to_the_idle_timeout_only(
    make_server, tmp_path
):
    ns = server_with(
        make_server, tmp_path, "permissive", tls_handshake_timeout_ms=2_000, idle_timeout_ms=6_000
    )
    silent = await connect(ns.port)
    plain = await connect(ns.port)
    assert (await plain.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS
    await until(lambda: server_side(ns.server, silent) is not None)  # accepted
    advance(ns, 5)  # past the handshake timeout: neither is a TLS connection
    assert none_closing(ns, [silent, plain])
    assert (await plain.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS
    advance(ns, 1)
    await until(lambda: not silent.connected)
    assert plain.connected  # its request at 5 s keeps it to 11 s
    stats = ns.server.stats()
    assert stats["idle_closes"] == 1
    assert stats.get("tls_handshake_timeouts", 0) == 0


@pytest.mark.parametrize("mode", TLS_MODES)
@pytest_twisted.ensureDeferred
async def test_a_finished_handshake_is_not_timed_out_and_frames_are_still_timed(
    make_server, tmp_path, mode
):
    ns = server_with(
        make_server, tmp_path, mode, tls_handshake_timeout_ms=2_000, frame_timeout_ms=5_000
    )
    client = await connect_tls(ns.port)
    assert (await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS
    advance(ns, 3)  # past the handshake timeout
    assert none_closing(ns, [client])
    assert (await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS
    client.transport.write(struct.pack(">II", 100, 20) + b'{"code":')  # a frame begun
    await until(lambda: ns.server.stats()["buffered_input_bytes"] > 0)
    advance(ns, 5)
    await until(lambda: not client.connected)
    stats = ns.server.stats()
    assert stats["frame_timeouts"] == 1
    assert stats.get("tls_handshake_timeouts", 0) == 0


@pytest.mark.parametrize("mode", TLS_MODES)
@pytest_twisted.ensureDeferred
async def test_tls_connections_count_against_the_host_bound_from_accept(
    make_server, tmp_path, mode
):
    ns = server_with(make_server, tmp_path, mode, max_connections_per_host=2)
    first = await connect_tls(ns.port)
    assert (await first.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS
    silent = await connect(ns.port)
    await until(lambda: ns.server.stats()["connections"] == 2)
    refused = await connect(ns.port)
    await until(lambda: not refused.connected)
    assert ns.server.stats()["connections_refused.max_connections_per_host"] == 1
    assert first.connected and silent.connected


@pytest.mark.parametrize("mode", TLS_MODES)
@pytest_twisted.ensureDeferred
async def test_a_tls_route_client_is_served_and_stays_past_the_handshake_timeout(
    cluster, tmp_path, mode
):
    cert, key = self_signed(tmp_path)
    server, port = cluster.start_server(
        server={
            "tls": mode,
            "tls_cert_file": cert,
            "tls_key_file": key,
            "tls_handshake_timeout_ms": 2_000,
        }
    )
    if mode == "permissive":  # a plaintext broker beside the TLS client
        await cluster.broker(port, "T")
    client = cluster.client(port, tls=True)
    events: list[RouteEvent] = []
    client.add_listener("T", events.append)
    await until(lambda: len(events) == 1 and client.push_active)
    for _ in range(5):
        cluster.tick()
    # Timeouts decide as the clock moves: none of the server's connections is closing.
    assert not any(conn.closing for conn in server.connections.values())
    assert client.push_active
    stats = server.stats()
    assert stats["tls.handshake"] == 1
    assert stats.get("tls_handshake_timeouts", 0) == 0
    assert stats["connections"] == (2 if mode == "permissive" else 1)
