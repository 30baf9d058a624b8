"""Answers listing the whole registry are sent from one shared body as the output drains.

First on an in-memory transport that buffers like Twisted's TCP one (:class:`SendBuffer`), so
the test decides when the peer reads; then as the attack: connections on loopback that ask for
the topic list and never read, next to an honest client.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from support.loopback_wait import until
from support.register_bodies import plain_body, register
from support.send_buffer import SendBuffer
from support.server_fixtures import isolated_config
from support.wire_client import connect
from twisted.internet import reactor, task

from namesrv.config import KIB, MIB
from namesrv.net.connection import NamesrvConnection
from namesrv.server import NameServer
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, decode_frame, encode_command

BOUND = 64 * KIB
ALL = RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER


def long_names(count: int, start: int = 0) -> list[str]:
    """Topic names of 126 characters: a long list from few topics."""
    return [f"{'L' * 120}{n:06d}" for n in range(start, start + count)]


@pytest.fixture
def clock() -> task.Clock:
    return task.Clock()


@pytest.fixture
def server(clock: task.Clock) -> NameServer:
    config = isolated_config(
        {
            "pressure": {"enabled": False},
            "server": {"output_buffer_bytes": BOUND, "wait_for_service_ms": 0},
        }
    )
    ns = NameServer(config, clock, clock=clock, epoch="e1")
    registrar = NamesrvConnection(ns.hub, 99, ns.config.server)
    registrar.makeConnection(SendBuffer())
    registrar.dataReceived(encode_command(register(plain_body(long_names(5_000), 1))))
    clock.advance(0)  # the register's slices
    assert ns.registry.topic_count == 5_000
    return ns


def request(code: int, opaque: int, ext: dict[str, str] | None = None) -> bytes:
    return encode_command(RemotingCommand.request(code, ext or {}, opaque=opaque))


class Reader:
    """The peer: decodes the answers out of what it reads, a frame possibly over many reads."""

    def __init__(self) -> None:
        self._decoder = FrameDecoder(1 << 26)

    def read(self, out: SendBuffer) -> list[RemotingCommand]:
        return [decode_frame(f, 1 << 20) for f in self._decoder.feed_raw(out.take())]


def test_a_peer_that_does_not_read_holds_the_bound_and_a_slice_never_the_whole_list(server, clock):
    conns = []
    for conn_id in (1, 2):
        out = SendBuffer()
        conn = NamesrvConnection(server.hub, conn_id, server.config.server)
        conn.makeConnection(out)
        read = request(ALL, 1) + request(RequestCode.GET_ROUTEINFO_BY_TOPIC, 2, {"topic": "x"})
        conn.dataReceived(read + request(ALL, 3))
        conns.append((conn, out))
    body = server.processor.s.listings.topics("all").body
    assert len(body) > 4 * (2 * BOUND)
    for conn, out in conns:
        assert out.peak <= 2 * BOUND
        assert conn.output_blocked and out.producerState == "paused"  # not read meanwhile
        assert conn.kept_requests == 2  # the read's requests after the listing wait
    stats = server.stats()
    assert stats["listing_builds"] == 1
    assert stats["shared_output_bytes"] == len(body) + 2 * BOUND  # the body once

    for conn, out in conns:
        peer, got = Reader(), []
        while True:
            got += peer.read(out)
            if out.producerState != "paused" and not out.value():
                break  # read again, and nothing more was written
            clock.advance(0)
        assert out.peak <= 2 * BOUND
        assert [a.opaque for a in got] == [1, 2, 3]  # in order, each whole
        assert got[1].code == ResponseCode.TOPIC_NOT_EXIST
        assert bytes(got[0].body) == bytes(got[2].body) == body
        assert not conn.output_blocked
    assert bodies.decode_topic_list(body) == long_names(5_000)
    assert server.stats()["shared_output_bytes"] == 0
    assert server.stats()["listing_builds"] == 1


def test_a_connection_closed_while_sent_a_listing_releases_it(server, clock):
    out = SendBuffer()
    conn = NamesrvConnection(server.hub, 1, server.config.server)
    conn.makeConnection(out)
    conn.dataReceived(request(ALL, 1) + request(ALL, 2))
    assert server.hub.shared_output > 0
    conn.close(abort=True)
    assert server.hub.shared_output == 0
    assert server.stats()["kept_requests_dropped"] == 1


def attack_config(hogs_admitted: int, body: int) -> dict[str, Any]:
    return {
        "server": {
            "output_buffer_bytes": BOUND,
            "max_shared_output_bytes": body + hogs_admitted * BOUND,
        }
    }


@pytest_twisted.ensureDeferred
async def test_connections_that_never_read_the_topic_list_hold_a_bounded_share(make_server):
    """The attack: a topic list larger than what the kernel buffers for a peer (about 4 MB on
    loopback) asked for by connections that never read. Each holds at most its output bound;
    the body is held once; past ``server.max_shared_output_bytes`` large answers are SYSTEM_BUSY
    until the hogs go; route lookups are served throughout."""
    names = [n for b in range(4) for n in long_names(12_000, b * 12_000)]
    body_size = len(bodies.encode_topic_list(names))
    assert body_size > 5 * MIB
    ns = make_server(attack_config(4, body_size))
    server = ns.server
    broker = await connect(ns.port)
    for b in range(4):
        answer = broker.request(
            register(
                plain_body(names[b * 12_000 : (b + 1) * 12_000], 1),
                name=f"b{b}",
                addr=f"10.0.0.{b}:1",
            )
        )
        while not answer.called:
            ns.clock.advance(0)
            await task.deferLater(reactor, 0, lambda: None)
    assert server.registry.topic_count == len(names)

    hogs = [await connect(ns.port, f"127.0.0.{2 + n % 3}") for n in range(10)]
    for hog in hogs:
        hog.transport.pauseProducing()  # type: ignore[union-attr]  # never reads
        hog.transport.write(request(ALL, 1))  # type: ignore[union-attr]
    await until(lambda: server.stats().get("shared_answers_refused", 0) == 6, timeout=20)
    assert server.hub.shared_output == body_size + 4 * BOUND
    assert server.stats()["listing_builds"] == 1
    for conn in server.connections.values():
        assert conn.unsent_bytes <= 2 * BOUND

    honest = await connect(ns.port, "127.0.0.9")
    lookup = await honest.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": names[0]})
    assert lookup.code == ResponseCode.SUCCESS
    busy = await honest.call(ALL)
    assert busy.code == ResponseCode.SYSTEM_BUSY and "max_shared_output_bytes" in busy.remark
    for hog in hogs:
        hog.transport.abortConnection()  # type: ignore[union-attr]
    await until(lambda: server.hub.shared_output == 0, timeout=20)
    full = await honest.call(ALL)
    assert full.code == ResponseCode.SUCCESS
    assert bodies.decode_topic_list(full.body) == sorted(names)
    assert server.stats()["listing_builds"] == 1
