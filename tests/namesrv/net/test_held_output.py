"""Answers held while the reactor hands out a poll's ready sockets, written in one burst after.

Most tests run a connection on an in-memory transport with a stand-in for the reactor that
says whether it is dispatching, so each test decides where a poll's handling ends
(the hub's ``write_held``); the last floods a real server on loopback (the suite runs on the lean
reactor, see conftest.py).
"""

from __future__ import annotations

import logging
import socket

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs
from support.server_fixtures import isolated_config
from support.tls_certs import self_signed
from support.wire_client import WireClient, connect, connect_tls
from twisted.internet import defer, reactor, task
from twisted.internet.testing import StringTransport

from namesrv.net.connection import NamesrvConnection
from namesrv.net.transport import READ_SIZE
from namesrv.server import NameServer
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, decode_frame, encode_command


class DispatchingReactor:
    """What the server reads of the lean reactor: whether a poll is being handled."""

    dispatching = False


@pytest.fixture
def server() -> NameServer:
    config = isolated_config({"pressure": {"enabled": False}})
    ns = NameServer(config, clock=task.Clock(), epoch="e1")
    ns.hub.hold_output_while_dispatching(DispatchingReactor())
    return ns


def connection(server: NameServer, conn_id: int) -> tuple[NamesrvConnection, StringTransport]:
    transport = StringTransport()
    conn = NamesrvConnection(server.hub, conn_id, server.config.server)
    conn.makeConnection(transport)
    return conn, transport


def lookups(*topics: str, first_opaque: int = 1) -> bytes:
    return b"".join(encode_command(lookup(t, first_opaque + i)) for i, t in enumerate(topics))


def opaques(written: bytes) -> list[int]:
    frames = FrameDecoder(1 << 20).feed_raw(written)
    return [decode_frame(f, 1 << 20).opaque for f in frames]


def test_answers_of_a_poll_are_held_until_every_ready_socket_is_handled(server):
    a, a_out = connection(server, 1)
    b, b_out = connection(server, 2)
    server.hub.dispatching_reactor.dispatching = True
    a.dataReceived(lookups("T1", "T2"))
    b.dataReceived(lookups("T3", first_opaque=10))
    a.dataReceived(lookups("T4", first_opaque=3))  # a second read of the same poll
    assert a_out.value() == b"" and b_out.value() == b""
    assert a.unsent_bytes > 0 and b.unsent_bytes > 0  # held output counts against the bound
    server.hub.dispatching_reactor.dispatching = False
    server.hub.write_held()
    assert opaques(a_out.value()) == [1, 2, 3]
    assert opaques(b_out.value()) == [10]
    assert a.unsent_bytes == 0 and server.hub.holding == 0
    server.hub.write_held()  # nothing held: nothing written twice
    assert opaques(a_out.value()) == [1, 2, 3]


def test_output_outside_a_poll_is_written_at_once(server):
    conn, out = connection(server, 1)
    conn.dataReceived(lookups("T1"))  # a timer's turn, or a reactor that does not dispatch
    assert opaques(out.value()) == [1]
    assert server.hub.holding == 0


def test_a_graceful_close_writes_held_output_first_and_an_abort_drops_it(server):
    kept, kept_out = connection(server, 1)
    dropped, dropped_out = connection(server, 2)
    server.hub.dispatching_reactor.dispatching = True
    kept.dataReceived(lookups("T1", "T2"))
    dropped.dataReceived(lookups("T3"))
    kept.close(abort=False)
    dropped.close(abort=True)
    assert opaques(kept_out.value()) == [1, 2] and kept_out.disconnecting
    server.hub.dispatching_reactor.dispatching = False
    server.hub.write_held()
    assert opaques(kept_out.value()) == [1, 2]  # not again after the close
    assert dropped_out.value() == b""


def test_one_connection_failing_to_write_keeps_nobody_elses_output(server, caplog, monkeypatch):
    broken, _ = connection(server, 1)
    fine, fine_out = connection(server, 2)
    server.hub.dispatching_reactor.dispatching = True
    broken.dataReceived(lookups("T1"))
    fine.dataReceived(lookups("T2", first_opaque=2))

    def fail(data: bytes) -> None:
        raise RuntimeError("transport gone wrong")

    monkeypatch.setattr(broken.transport, "write", fail)
    server.hub.dispatching_reactor.dispatching = False
    with caplog.at_level(logging.ERROR, logger="namesrv.net.hub"):
        server.hub.write_held()
    assert opaques(fine_out.value()) == [2]
    assert "held output of connection 1" in caplog.text


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
@pytest_twisted.inlineCallbacks
def test_a_client_flooding_lookups_without_reading_is_bounded_and_loses_no_answer(
    make_server, tmp_path, tls
):
    """An attacker's pipeline: thousands of lookups written, nothing read. Its answers (held
    per poll, then queued) stop the server reading it at the output bound, past it by one
    answer at most; everyone else is served meanwhile; once it reads, every answer arrives,
    in order. Over TLS too (a permissive port: the brokers and the other client are plain)."""
    bound = 64 * 1024
    server_cfg: dict[str, object] = {"output_buffer_bytes": bound}
    if tls:
        cert, key = self_signed(tmp_path)
        server_cfg.update(tls="permissive", tls_cert_file=cert, tls_key_file=key)
    ns = make_server({"server": server_cfg})
    topic = "Flooded"
    for i in range(16):  # large answers: the flood outgrows every buffer quickly
        broker = yield connect(ns.port)
        resp = yield broker.request(
            register_request(
                topic_configs(topic), broker_name=f"broker-{i:02d}", broker_addr=f"10.0.0.{i}:1"
            )
        )
        assert resp.code == ResponseCode.SUCCESS
    flooder = yield (connect_tls(ns.port) if tls else connect(ns.port))
    yield flooder.request(lookup(topic))  # connected (and, over TLS, the handshake done)
    other = yield connect(ns.port)
    answer = yield other.request(lookup(topic))
    # One answer, and over TLS the records' overhead on a read's worth of answers.
    answer_bytes = len(encode_command(answer)) + (512 if tls else 64)
    flood_port = flooder.transport.getHost().port
    (flood_conn,) = [c for c in ns.server.connections.values() if c.peer.endswith(f":{flood_port}")]
    # A small kernel send buffer on the server's side, so what the client does not read piles
    # up in ours. (Not a small receive window on the client's: reopening one from zero waits
    # for the kernel's backed-off window probes.)
    flood_conn.transport.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    flooder.transport.pauseProducing()
    count = 3000
    request = encode_command(lookup(topic))
    flooder.transport.write(b"".join(encode_command(lookup(topic, i)) for i in range(1, count + 1)))

    peak = 0
    blocked_at = None
    for turn in range(5000):
        yield round_trip(other)  # everyone else is answered throughout
        peak = max(peak, flood_conn.unsent_bytes)
        if flood_conn.output_blocked and blocked_at is None:
            blocked_at = turn
        if blocked_at is not None and turn >= blocked_at + 20:
            break
    assert blocked_at is not None, "the server never stopped reading the flood"
    # At most the bound plus the one answer that crossed it (not the rest of its read's).
    assert peak <= bound + answer_bytes
    assert READ_SIZE // len(request) * answer_bytes > 4 * bound  # what a whole read would add

    answers = []
    done: defer.Deferred[None] = defer.Deferred()

    def collect(data: bytes) -> None:
        for cmd in flooder.decoder.feed(data):
            answers.append(cmd.opaque)
        if len(answers) == count and not done.called:
            done.callback(None)

    flooder.dataReceived = collect  # type: ignore[method-assign]
    flood_conn.transport.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    flooder.transport.resumeProducing()
    yield done.addTimeout(30, reactor)
    assert answers == list(range(1, count + 1))


def lookup(topic: str, opaque: int = 0) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=opaque
    )


def round_trip(client: WireClient) -> defer.Deferred[RemotingCommand]:
    return client.request(lookup("Flooded"))
