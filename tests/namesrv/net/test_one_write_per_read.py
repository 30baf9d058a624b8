"""A read's answers leave in one write: pipelined lookups in one ``dataReceived`` are answered
with one ``transport.write``, in order, whether the route cache or a handler answers each, and
the reads of one poll (output held while the reactor dispatches) with one write after it."""

from __future__ import annotations

import pytest
from support.fake_broker import register_request, topic_configs
from support.server_fixtures import isolated_config
from twisted.internet import task
from twisted.internet.testing import StringTransport

from namesrv.net.connection import NamesrvConnection
from namesrv.net.transport import ConnectionFactory
from namesrv.server import NameServer
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, decode_frame, encode_command


class CountingTransport(StringTransport):
    """A transport in memory that counts the writes it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1
        super().write(data)


class Poll:
    dispatching = False


@pytest.fixture
def server() -> NameServer:
    clock = task.Clock()
    config = {"pressure": {"enabled": False}, "server": {"wait_for_service_ms": 0}}
    ns = NameServer(isolated_config(config), clock=clock, epoch="e1")
    broker, _ = connection(ns)
    broker.dataReceived(encode_command(register_request(topic_configs("Routed", "Other"))))
    clock.advance(0)  # the register's turns
    return ns


def connection(ns: NameServer) -> tuple[NamesrvConnection, CountingTransport]:
    """A connection as the port builds one, on a transport that counts its writes."""
    conn = ConnectionFactory(ns.hub, ns.config.server).buildProtocol(None)
    transport = CountingTransport()
    conn.makeConnection(transport)
    return conn, transport


def lookups(topic: str, opaques: range) -> bytes:
    return b"".join(
        encode_command(
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=o)
        )
        for o in opaques
    )


def answers(written: bytes) -> list[tuple[int, int]]:
    frames = FrameDecoder(1 << 20).feed_raw(written)
    return [(cmd.opaque, cmd.code) for cmd in (decode_frame(f, 1 << 20) for f in frames)]


def test_pipelined_lookups_answered_from_the_cache_leave_in_one_write(server):
    conn, out = connection(server)
    conn.dataReceived(lookups("Routed", range(1, 2)))  # the first answer fills the cache
    hits = server.route_responses.hits
    conn.dataReceived(lookups("Routed", range(2, 12)))
    assert server.route_responses.hits == hits + 10
    assert out.writes == 2
    assert answers(out.value()) == [(o, ResponseCode.SUCCESS) for o in range(1, 12)]


def test_a_read_mixing_cached_and_handled_lookups_leaves_in_one_write(server):
    conn, out = connection(server)
    conn.dataReceived(lookups("Routed", range(1, 2)))
    out.clear()
    out.writes = 0
    read = lookups("Routed", range(2, 4)) + lookups("Unknown", range(4, 5))
    conn.dataReceived(read + lookups("Other", range(5, 6)) + lookups("Routed", range(6, 7)))
    assert out.writes == 1
    assert answers(out.value()) == [
        (2, ResponseCode.SUCCESS),
        (3, ResponseCode.SUCCESS),
        (4, ResponseCode.TOPIC_NOT_EXIST),
        (5, ResponseCode.SUCCESS),
        (6, ResponseCode.SUCCESS),
    ]


def test_the_reads_of_one_poll_leave_in_one_write_after_it(server):
    poll = Poll()
    server.hub.hold_output_while_dispatching(poll)
    conn, out = connection(server)
    poll.dispatching = True
    conn.dataReceived(lookups("Routed", range(1, 6)))
    conn.dataReceived(lookups("Routed", range(6, 11)))
    assert out.writes == 0
    poll.dispatching = False
    server.hub.write_held()
    assert out.writes == 1
    assert answers(out.value()) == [(o, ResponseCode.SUCCESS) for o in range(1, 11)]
