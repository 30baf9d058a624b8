"""Answers held while the reactor hands out a poll's ready sockets, written in one burst after.

The connection runs on an in-memory transport; a stand-in for the reactor says whether it is
dispatching, so each test decides where a poll's handling ends (``_write_held``).
"""

from __future__ import annotations

import logging

import pytest
from twisted.internet import task
from twisted.internet.testing import StringTransport

from namesrv.config import from_mapping
from namesrv.server import NameServer, NamesrvConnection
from protocol.codes import RequestCode
from protocol.frame import FrameDecoder, RemotingCommand, decode_frame, encode_command


class DispatchingReactor:
    """What the server reads of the lean reactor: whether a poll is being handled."""

    dispatching = False


@pytest.fixture
def server() -> NameServer:
    config = from_mapping({"pressure": {"enabled": False}})
    ns = NameServer(config, clock=task.Clock(), epoch="e1")
    ns._dispatching_reactor = DispatchingReactor()
    return ns


def connection(server: NameServer, conn_id: int) -> tuple[NamesrvConnection, StringTransport]:
    transport = StringTransport()
    conn = NamesrvConnection(server, conn_id)
    conn.makeConnection(transport)
    return conn, transport


def lookups(*topics: str, first_opaque: int = 1) -> bytes:
    return b"".join(
        encode_command(
            RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t}, opaque=first_opaque + i
            )
        )
        for i, t in enumerate(topics)
    )


def opaques(written: bytes) -> list[int]:
    frames = FrameDecoder(1 << 20).feed_raw(written)
    return [decode_frame(f, 1 << 20).opaque for f in frames]


def test_answers_of_a_poll_are_held_until_every_ready_socket_is_handled(server):
    a, a_out = connection(server, 1)
    b, b_out = connection(server, 2)
    server._dispatching_reactor.dispatching = True
    a.dataReceived(lookups("T1", "T2"))
    b.dataReceived(lookups("T3", first_opaque=10))
    a.dataReceived(lookups("T4", first_opaque=3))  # a second read of the same poll
    assert a_out.value() == b"" and b_out.value() == b""
    assert a.unsent_bytes > 0 and b.unsent_bytes > 0  # held output counts against the bound
    server._dispatching_reactor.dispatching = False
    server._write_held()
    assert opaques(a_out.value()) == [1, 2, 3]
    assert opaques(b_out.value()) == [10]
    assert a.unsent_bytes == 0 and not server._held_output
    server._write_held()  # nothing held: nothing written twice
    assert opaques(a_out.value()) == [1, 2, 3]


def test_output_outside_a_poll_is_written_at_once(server):
    conn, out = connection(server, 1)
    conn.dataReceived(lookups("T1"))  # a timer's turn, or a reactor that does not dispatch
    assert opaques(out.value()) == [1]
    assert not server._held_output


def test_a_graceful_close_writes_held_output_first_and_an_abort_drops_it(server):
    kept, kept_out = connection(server, 1)
    dropped, dropped_out = connection(server, 2)
    server._dispatching_reactor.dispatching = True
    kept.dataReceived(lookups("T1", "T2"))
    dropped.dataReceived(lookups("T3"))
    kept.close(abort=False)
    dropped.close(abort=True)
    assert opaques(kept_out.value()) == [1, 2] and kept_out.disconnecting
    server._dispatching_reactor.dispatching = False
    server._write_held()
    assert opaques(kept_out.value()) == [1, 2]  # not again after the close
    assert dropped_out.value() == b""


def test_one_connection_failing_to_write_keeps_nobody_elses_output(server, caplog, monkeypatch):
    broken, _ = connection(server, 1)
    fine, fine_out = connection(server, 2)
    server._dispatching_reactor.dispatching = True
    broken.dataReceived(lookups("T1"))
    fine.dataReceived(lookups("T2", first_opaque=2))

    def fail(data: bytes) -> None:
        raise RuntimeError("transport gone wrong")

    monkeypatch.setattr(broken, "_write_now", fail)
    server._dispatching_reactor.dispatching = False
    with caplog.at_level(logging.ERROR, logger="namesrv.server"):
        server._write_held()
    assert opaques(fine_out.value()) == [2]
    assert "held output of connection 1" in caplog.text
