"""The client's remoting protocol: opaque matching, timeouts, loss, bounds. The connection and
its peer live in the deterministic world (``support.memory_world``): one virtual clock, TCP in
memory; a frame or answer awaited has arrived once the world is quiet, or the test fails."""

from __future__ import annotations

import struct
from typing import Any, TypeVar

import pytest
import pytest_twisted
from support.memory_world import MemoryWorld, WorldDeferred, the_world
from twisted.internet import defer, protocol

from client_push.errors import ConnectionLostError, RequestTimeoutError
from client_push.runtime.twisted_loop import TwistedRuntime
from client_push.wire.remoting import ConnectionBounds, RemotingConnection
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command

T = TypeVar("T")


class Peer(protocol.Protocol):
    """The server side: records requests; answers them only when told to."""

    def __init__(self, factory: PeerFactory) -> None:
        self.factory = factory
        self.decoder = FrameDecoder(1 << 20)
        self.received: list[RemotingCommand] = []

    def connectionMade(self) -> None:
        self.factory.peers.append(self)
        if not self.factory.connected.called:
            self.factory.connected.callback(self)

    def dataReceived(self, data: bytes) -> None:
        for cmd in self.decoder.feed(data):
            self.received.append(cmd)
            waiters, self.factory.waiters = self.factory.waiters, []
            for w in waiters:
                w.callback(cmd)

    def answer(self, request: RemotingCommand, code: int = 0, body: bytes = b"") -> None:
        self.transport.write(encode_command(request.make_response(code, body=body)))  # type: ignore[union-attr]


class PeerFactory(protocol.Factory):
    def __init__(self, world: MemoryWorld) -> None:
        self.world = world
        self.peers: list[Peer] = []
        self.connected: defer.Deferred[Peer] = defer.Deferred()
        self.waiters: list[defer.Deferred[RemotingCommand]] = []

    def buildProtocol(self, addr: object) -> Peer:
        return Peer(self)

    def next_frame(self) -> WorldDeferred[RemotingCommand]:
        """The next frame the peer reads: awaited, it has arrived once the world is quiet."""
        d: defer.Deferred[RemotingCommand] = defer.Deferred()
        self.waiters.append(d)
        return WorldDeferred(self.world, d)


@pytest.fixture
def link(memory_world: MemoryWorld) -> Any:
    factory = PeerFactory(memory_world)
    port = memory_world.reactor.listenTCP(0, factory, interface="127.0.0.1")
    clock = memory_world.reactor
    handled: list[RemotingCommand] = []

    def on_request(proto: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand | None:
        handled.append(cmd)
        if cmd.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED:
            return cmd.make_response(ResponseCode.SUCCESS)
        return None

    runtime = TwistedRuntime(memory_world.reactor, clock)
    bounds = ConnectionBounds(max_frame_size=4096)
    client = RemotingConnection(runtime, bounds, on_request, label="test")
    addr = f"127.0.0.1:{port.getHost().port}"  # type: ignore[attr-defined]
    memory_world.run(client.open(addr, 3000), within=0)
    peer = memory_world.wait(factory.connected, within=0)
    yield client, peer, factory, clock, handled
    client.close()
    memory_world.wait(port.stopListening())


def settled(d: defer.Deferred[T]) -> WorldDeferred[T]:
    """``d`` of the one world: awaited, it has fired once the world is quiet."""
    return WorldDeferred(the_world(), d)


def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


@pytest_twisted.ensureDeferred
async def test_responses_are_matched_to_requests_by_opaque_in_any_order(link):
    client, peer, factory, _clock, _ = link
    first = client.request(route_request("A"), 3000)
    second = client.request(route_request("B"), 3000)
    await factory.next_frame()
    if len(peer.received) < 2:
        await factory.next_frame()
    req_a, req_b = peer.received
    assert req_a.opaque != req_b.opaque
    peer.answer(req_b, body=b"b")
    peer.answer(req_a, body=b"a")
    assert (await settled(first)).body == b"a"
    assert (await settled(second)).body == b"b"
    assert client.pending == 0


@pytest_twisted.ensureDeferred
async def test_a_request_without_answer_fails_after_its_timeout_on_the_clock(link):
    client, _peer, factory, clock, _ = link
    d = client.request(route_request("A"), 3000)
    await factory.next_frame()
    clock.advance(2.999)
    assert not d.called
    clock.advance(0.001)  # the timeout's own time, to the millisecond
    with pytest.raises(RequestTimeoutError, match="3000 ms"):
        await settled(d)
    assert client.pending == 0


@pytest_twisted.ensureDeferred
async def test_a_late_response_after_timeout_is_dropped_and_counted(link):
    client, peer, factory, clock, _ = link
    d = client.request(route_request("A"), 100)
    request = await factory.next_frame()
    clock.advance(0.1)
    with pytest.raises(RequestTimeoutError):
        await settled(d)
    peer.answer(request)
    follow = client.request(route_request("B"), 3000)
    peer.answer(await factory.next_frame())
    await settled(follow)
    assert client.counters["late_responses"] == 1


@pytest_twisted.ensureDeferred
async def test_every_pending_request_fails_when_the_connection_is_lost(link):
    client, peer, factory, _clock, _ = link
    pending = [client.request(route_request(t), 3000) for t in "ABC"]
    await factory.next_frame()
    peer.transport.loseConnection()
    for d in pending:
        with pytest.raises(ConnectionLostError):
            await settled(d)
    await settled(client.lost)
    with pytest.raises(ConnectionLostError):
        await settled(client.request(route_request("D"), 3000))


@pytest_twisted.ensureDeferred
async def test_server_requests_go_to_the_handler_and_unknown_ones_are_refused(link):
    _client, peer, factory, _clock, handled = link
    notify = RemotingCommand.request(RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, opaque=7)
    unknown = RemotingCommand.request(999, opaque=8)
    peer.transport.write(encode_command(notify) + encode_command(unknown))
    first = await factory.next_frame()
    second = peer.received[1] if len(peer.received) > 1 else await factory.next_frame()
    assert [c.code for c in handled] == [RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, 999]
    assert (first.opaque, first.code, first.is_response) == (7, ResponseCode.SUCCESS, True)
    assert (second.opaque, second.code) == (8, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


@pytest_twisted.ensureDeferred
async def test_oneway_server_requests_get_no_response(link):
    _client, peer, factory, _clock, handled = link
    oneway = RemotingCommand.request(RequestCode.GO_AWAY, oneway=True, opaque=3)
    probe = RemotingCommand.request(RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, opaque=4)
    peer.transport.write(encode_command(oneway) + encode_command(probe))
    answer = await factory.next_frame()
    assert answer.opaque == 4
    assert len(handled) == 2 and len(peer.received) == 1


@pytest_twisted.ensureDeferred
async def test_a_frame_over_the_size_limit_closes_the_connection(link):
    client, peer, _factory, _clock, _ = link
    pending = client.request(route_request("A"), 3000)
    peer.transport.write(struct.pack(">I", 1 << 20) + b"\x00" * 16)
    await settled(client.lost)
    assert client.counters["frames_refused"] == 1
    with pytest.raises(ConnectionLostError):
        await settled(pending)
