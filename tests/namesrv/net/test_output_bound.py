"""Answers stop at the output bound within a read; the read's other requests wait, in order.

A connection on an in-memory transport that keeps what it is written as unsent until the test
lets the peer take it (:class:`SendBuffer`), pausing and resuming its producer as Twisted's
TCP transport does, with a ``task.Clock`` for the reactor's next turn.
"""

from __future__ import annotations

import pytest
from support.fake_broker import register_request, topic_configs
from support.send_buffer import SendBuffer
from support.server_fixtures import isolated_config
from twisted.internet import task

from namesrv.net.connection import NamesrvConnection
from namesrv.server import NameServer
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, decode_frame, encode_command

BOUND = 64 * 1024
TOPIC = "Wide"


class DispatchingReactor:
    dispatching = False


@pytest.fixture
def clock() -> task.Clock:
    return task.Clock()


def sixteen_brokers(clock: task.Clock, **server: int) -> NameServer:
    """A server whose output bound is ``BOUND`` (``server`` sets more), where 16 brokers serve
    ``TOPIC``: each lookup's answer is some kilobytes."""
    config = isolated_config(
        {
            "pressure": {"enabled": False},
            "server": {"output_buffer_bytes": BOUND, "wait_for_service_ms": 0, **server},
        }
    )
    ns = NameServer(config, clock, clock=clock, epoch="e1")
    registrar, _ = connection(ns, 99)
    for i in range(16):
        request = register_request(
            topic_configs(TOPIC), broker_name=f"broker-{i:02d}", broker_addr=f"10.0.0.{i}:1"
        )
        registrar.dataReceived(encode_command(request))
        clock.advance(0)
    assert ns.registry.broker_count == 16
    return ns


@pytest.fixture
def server(clock: task.Clock) -> NameServer:
    return sixteen_brokers(clock)


def connection(server: NameServer, conn_id: int) -> tuple[NamesrvConnection, SendBuffer]:
    transport = SendBuffer()
    conn = NamesrvConnection(server.hub, conn_id, server.config.server)
    conn.makeConnection(transport)
    return conn, transport


def lookup(opaque: int, topic: str = TOPIC) -> bytes:
    return encode_command(
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=opaque)
    )


def answers(written: bytes) -> list[RemotingCommand]:
    return [decode_frame(f, 1 << 20) for f in FrameDecoder(1 << 24).feed_raw(written)]


def answer_size(server: NameServer) -> int:
    probe, out = connection(server, 98)
    probe.dataReceived(lookup(1))
    size = len(out.take())
    server.hub.connection_lost(probe)
    return size


def test_a_read_stops_answering_at_the_bound_and_answers_the_rest_in_order_once_drained(
    server, clock, monkeypatch
):
    size = answer_size(server)
    crossing = BOUND // size + 1  # the answer that takes the output past the bound
    puts: list[tuple[str, str, str]] = []
    put = server.kv.put

    def counted_put(namespace: str, key: str, value: str) -> None:
        puts.append((namespace, key, value))
        put(namespace, key, value)

    monkeypatch.setattr(server.kv, "put", counted_put)
    conn, out = connection(server, 1)

    def kv(code: RequestCode, opaque: int, oneway: bool = False, **fields: str) -> bytes:
        return encode_command(
            RemotingCommand.request(
                code, {"namespace": "n", **fields}, opaque=opaque, oneway=oneway
            )
        )

    n = crossing + 20
    read = b"".join(lookup(i) for i in range(1, n + 1))
    read += kv(RequestCode.PUT_KV_CONFIG, n + 1, oneway=True, key="k", value="v1")
    read += kv(RequestCode.GET_KV_CONFIG, n + 2, key="k")
    read += kv(RequestCode.PUT_KV_CONFIG, n + 3, oneway=True, key="k", value="v2")
    read += kv(RequestCode.GET_KV_CONFIG, n + 4, key="k")
    conn.dataReceived(read)

    assert [a.opaque for a in answers(out.value())] == list(range(1, crossing + 1))
    assert out.peak <= BOUND + size  # one answer past the bound, not the whole read's
    assert conn.output_blocked and out.producerState == "paused"  # no more reading
    assert puts == []  # the oneway requests after the crossing wait with the rest
    clock.advance(0)
    assert len(answers(out.value())) == crossing  # nothing more until the output drains

    got = answers(out.take())
    while out.producerState == "paused":
        clock.advance(0)
        more = answers(out.take())
        assert more, "a connection with kept requests was left stuck"
        got += more
    assert [a.opaque for a in got] == [*range(1, n + 1), n + 2, n + 4]
    assert [a.ext_fields.get("value") for a in got[-2:]] == ["v1", "v2"]
    assert puts == [("n", "k", "v1"), ("n", "k", "v2")]  # each oneway handled once, in order
    assert not conn.output_blocked and conn.kept_requests == 0
    assert out.peak <= BOUND + size


def test_held_output_crossing_the_bound_goes_on_after_the_poll_is_written(server, clock):
    """Held answers are not in the transport yet: it cannot see the crossing, and the kernel
    may take them all. Writing the poll's output must lead on to the kept requests."""
    size = answer_size(server)
    crossing = BOUND // size + 1
    poll = DispatchingReactor()
    server.hub.hold_output_while_dispatching(poll)
    conn, out = connection(server, 1)
    poll.dispatching = True
    conn.dataReceived(b"".join(lookup(i) for i in range(1, crossing + 6)))
    assert out.value() == b"" and conn.unsent_bytes <= BOUND + size
    poll.dispatching = False
    server.hub.write_held()
    got = answers(out.take())  # the peer takes everything: the transport never resumes us
    assert [a.opaque for a in got] == list(range(1, crossing + 1))
    clock.advance(0)
    got += answers(out.take())
    assert [a.opaque for a in got] == list(range(1, crossing + 6))
    assert not conn.output_blocked and out.producerState == "producing"


def test_a_connection_closed_with_kept_requests_leaves_them_unanswered(server, clock):
    size = answer_size(server)
    crossing = BOUND // size + 1
    conn, out = connection(server, 1)
    conn.dataReceived(b"".join(lookup(i) for i in range(1, crossing + 11)) + lookup(0)[:7])
    assert conn.kept_requests == 10 and server.buffered_input > 0  # a partial frame too
    conn.close(abort=False)
    conn.connectionLost(None)
    clock.advance(0)
    assert [a.opaque for a in answers(out.value())] == list(range(1, crossing + 1))
    assert server.counters["kept_requests_dropped"] == 10
    assert conn.kept_requests == 0 and conn.kept_input == 0
    assert server.buffered_input == 0 and conn.conn_id not in server.connections
    assert not clock.getDelayedCalls()


def test_a_connection_closed_while_its_kept_requests_wait_for_their_turn(server, clock):
    size = answer_size(server)
    conn, out = connection(server, 1)
    conn.dataReceived(b"".join(lookup(i) for i in range(1, BOUND // size + 5)))
    out.take()  # drained: the kept requests are due on the next turn
    conn.transport.abortConnection()
    conn.connectionLost(None)
    clock.advance(0)
    assert out.value() == b"" and server.counters["kept_requests_dropped"] == 3
    assert not clock.getDelayedCalls()


def test_others_are_answered_while_a_connection_waits_with_kept_requests(server, clock):
    size = answer_size(server)
    flooder, flood_out = connection(server, 1)
    other, other_out = connection(server, 2)
    crossing = BOUND // size + 1
    flooder.dataReceived(b"".join(lookup(i) for i in range(1, crossing + 50)))
    assert flooder.output_blocked
    for i in range(5):
        other.dataReceived(lookup(100 + i) + lookup(200 + i, topic="Unknown"))
        clock.advance(0)
    got = answers(other_out.value())
    assert [a.opaque for a in got] == [o for i in range(5) for o in (100 + i, 200 + i)]
    assert got[1].code == ResponseCode.TOPIC_NOT_EXIST
    assert len(answers(flood_out.value())) == crossing  # it waits for its peer to read
    assert flooder.output_blocked and flood_out.producerState == "paused"


def test_kept_requests_count_in_the_buffered_input_bound_until_answered(server, clock):
    conn, out = connection(server, 1)
    conn.dataReceived(b"".join(lookup(i) for i in range(1, 201)))
    answered = len(answers(out.value()))
    assert conn.kept_requests == 200 - answered > 0
    kept = sum(len(lookup(i)) - 4 for i in range(answered + 1, 201))  # without length prefix
    assert conn.kept_input == kept and server.buffered_input == kept
    while conn.kept_requests or out.value():
        out.take()
        clock.advance(0)
    assert conn.kept_input == 0 and server.buffered_input == 0


def test_a_connection_whose_kept_requests_pass_the_input_bound_is_shed(clock):
    """Kept frames are input the server holds: a peer that sends far more than it reads
    cannot park them outside ``server.max_buffered_input_bytes``."""
    # Less than one read: 64 KiB held at most.
    ns = sixteen_brokers(clock, max_frame_size=65536, max_buffered_input_bytes=2 * 65536)
    polite, polite_out = connection(ns, 2)
    flooder, _ = connection(ns, 1)
    flooder.dataReceived(b"".join(lookup(i) for i in range(1, 3001)))  # ~300 KB of requests
    assert ns.counters["input_bound_closes"] == 1 and flooder.closing
    assert ns.counters["kept_requests_dropped"] > 0
    assert ns.buffered_input == 0 and flooder.kept_input == 0
    polite.dataReceived(lookup(7))
    assert [c.opaque for c in answers(polite_out.value())] == [7]
