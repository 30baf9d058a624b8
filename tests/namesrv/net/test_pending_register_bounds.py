"""Registers served over several turns are input: bounded per connection and in total.

An attacker pipelines large registers on one connection, or on several: each becomes a pending
register holding its frame. Real loopback traffic; the server's register turns run on a fake
clock, so the test decides when pending registers are served (``clock.advance(0)``).
"""

from __future__ import annotations

from typing import Any

import pytest_twisted
from support.loopback_wait import until
from support.register_bodies import plain_body, register, topic_names
from support.wire_client import WireClient, connect
from twisted.internet import reactor, task

from namesrv.config import KIB, MIB
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import encode_command

SHARE = 128 * KIB
NAMES = topic_names(300)


def bounds(total: int = 2 * MIB, share: int = SHARE) -> dict[str, Any]:
    return {
        "server": {
            "max_frame_size": 1 * MIB,
            "max_buffered_input_bytes": total,
            "output_buffer_bytes": 64 * KIB,
            "max_input_bytes_per_connection": share,
        },
        "registry": {"register_read_slice_bytes": 4 * KIB},
    }


def registers(count: int, name: str = "broker-a") -> list[bytes]:
    """``count`` registers of one broker address, each a pending one (past the read slice)."""
    return [encode_command(register(plain_body(NAMES, v + 1), name=name)) for v in range(count)]


async def turn() -> None:
    await task.deferLater(reactor, 0, lambda: None)


@pytest_twisted.ensureDeferred
async def test_pipelined_registers_stop_being_read_at_the_connections_share(make_server):
    ns = make_server(bounds())
    server = ns.server
    requests = [register(plain_body(NAMES, v + 1)) for v in range(40)]
    broker = await connect(ns.port)
    answers = [broker.request(r) for r in requests]
    sizes = [len(encode_command(r)) - 4 for r in requests]  # held: all but the length
    held = next(n for n in range(1, 41) if sum(sizes[:n]) > SHARE)  # the one crossing it too
    await until(lambda: server.pending_registers >= held)
    # A round trip on another connection: whatever the broker's connection was going to read
    # in the meantime has been read.
    other = await connect(ns.port, "127.0.0.2")
    assert (await other.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS
    assert server.pending_registers == held
    conn = next(c for c in server.connections.values() if c.host == "127.0.0.1")
    assert conn.pending_input == sum(sizes[:held])
    # The gauge counts them, with at most the rest of one read kept and one frame arriving.
    assert conn.pending_input <= server.buffered_input <= conn.pending_input + 64 * KIB + sizes[0]
    assert not any(a.called for a in answers)

    peak = 0
    while not all(a.called for a in answers):
        ns.clock.advance(0)
        peak = max(peak, server.pending_registers)
        await turn()
    peak = max(peak, server.pending_registers)
    codes = [(await a).code for a in answers]
    assert codes == [ResponseCode.SUCCESS] * 40
    assert peak <= held
    assert server.registry.topic_count == len(NAMES)
    await until(lambda: server.buffered_input == 0)
    assert server.stats().get("input_bound_closes", 0) == 0


@pytest_twisted.ensureDeferred
async def test_a_closed_connections_registers_not_yet_applied_are_dropped(make_server):
    ns = make_server(bounds())
    server = ns.server
    broker = await connect(ns.port)
    for name in ("broker-a", "broker-b"):  # never answered: their connection is gone
        broker.request(register(plain_body(NAMES, 1), name=name)).addErrback(lambda _: None)
    await until(lambda: server.pending_registers == 2)
    assert server.buffered_input > 0
    broker.transport.loseConnection()  # type: ignore[union-attr]
    await until(lambda: not server.connections)
    assert server.pending_registers == 0
    assert server.buffered_input == 0
    ns.clock.advance(0)
    assert server.registry.broker_count == 0 and server.registry.topic_count == 0
    assert server.stats()["registers_dropped"] == 2


@pytest_twisted.ensureDeferred
async def test_registers_pending_on_many_connections_are_bounded_in_total(make_server):
    total = 1 * MIB
    ns = make_server(bounds(total=total, share=512 * KIB))
    server = ns.server
    frames = registers(15)
    attackers: list[WireClient] = []
    for host in range(2, 6):
        client = await connect(ns.port, f"127.0.0.{host}")
        attackers.append(client)
        client.transport.write(b"".join(frames))  # type: ignore[union-attr]
    peak = 0
    for _ in range(200):
        peak = max(peak, server.buffered_input)
        await turn()
    await until(lambda: sum(c.connected for c in attackers) < 4)
    stats = server.stats()
    assert stats["input_bound_closes"] >= 1
    assert peak <= total and server.buffered_input <= total
    # Nothing of a shed connection's registers is applied; the server serves others.
    bystander = await connect(ns.port, "127.0.0.9")
    assert (await bystander.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == 0
    for client in attackers:  # aborted: what the server did not read is never sent
        client.transport.abortConnection()  # type: ignore[union-attr]
    while len(server.connections) > 1:  # a connection not read learns of its close once
        ns.clock.advance(0)  # its registers are served and it is read again
        await turn()
    assert server.pending_registers == 0 and server.buffered_input == 0
    assert server.stats()["registers_dropped"] >= 1
