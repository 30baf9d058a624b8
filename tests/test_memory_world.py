"""The deterministic world's own rules (``support.memory_world``, ``support.memory_network``):
bounded settling, bytes in order and only while read, a full send buffer pausing its producer,
closes after the bytes written and aborts without them, refused connects, the same run
giving the same events, a transport that declares what Twisted's TCP transport does, and a
clock set to a wall-clock time only before any part starts."""

from __future__ import annotations

from typing import Any

import pytest
from support.memory_network import READ_BYTES, MemoryReactor
from support.memory_world import MemoryWorld, WorldNotSettled
from twisted.internet import protocol
from twisted.internet.interfaces import IConsumer, IPushProducer, ITCPTransport
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory


class Recorder(protocol.Protocol):
    """Records what it hears, stamped with the world's time."""

    def __init__(self, clock: MemoryReactor, log: list[Any], name: str) -> None:
        self.clock = clock
        self.log = log
        self.name = name
        self.received = bytearray()
        self.reason: Any = None

    def connectionMade(self) -> None:
        self.log.append((self.clock.seconds(), self.name, "made"))

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        self.log.append((self.clock.seconds(), self.name, len(data)))

    def connectionLost(self, reason: Any = None) -> None:
        self.reason = reason
        self.log.append((self.clock.seconds(), self.name, "lost", reason.type.__name__))


class OneFactory(protocol.ClientFactory):
    def __init__(self, proto: protocol.Protocol) -> None:
        self.proto = proto
        self.failed: Any = None

    def buildProtocol(self, addr: Any) -> protocol.Protocol:
        return self.proto

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:
        self.failed = reason


def pair(world: MemoryWorld, log: list[Any]) -> tuple[Recorder, Recorder]:
    """A server and a client protocol connected in ``world``."""
    reactor = world.reactor
    server = Recorder(reactor, log, "server")
    port = reactor.listenTCP(0, OneFactory(server), interface="127.0.0.1")
    client = Recorder(reactor, log, "client")
    reactor.connectTCP("127.0.0.1", port.getHost().port, OneFactory(client))
    world.settle()
    assert server.transport is not None and client.transport is not None
    return server, client


def test_settle_fails_loudly_when_the_parts_never_go_quiet() -> None:
    world = MemoryWorld(max_steps=1_000)

    def again() -> None:
        world.reactor.callLater(0, again)

    again()
    with pytest.raises(WorldNotSettled, match="still busy"):
        world.settle()


def test_run_until_fails_when_the_condition_does_not_hold_in_time() -> None:
    world = MemoryWorld()
    fired: list[float] = []
    world.reactor.callLater(5.0, lambda: fired.append(world.now()))
    with pytest.raises(WorldNotSettled, match="within 4"):
        world.run_until(lambda: bool(fired), within=4.0)
    assert world.run_until(lambda: bool(fired), within=5.0) == 5.0
    assert fired == [5.0]


def test_advance_runs_each_timer_at_its_own_time() -> None:
    world = MemoryWorld()
    seen: list[float] = []
    world.reactor.callLater(1.0, lambda: seen.append(world.now()))
    world.reactor.callLater(
        0.5, lambda: world.reactor.callLater(0.25, lambda: seen.append(world.now()))
    )
    world.advance(2.0)
    assert seen == [0.75, 1.0] and world.now() == 2.0


def test_bytes_arrive_in_order_in_reads_of_bounded_size_and_only_while_read() -> None:
    world = MemoryWorld()
    log: list[Any] = []
    server, client = pair(world, log)
    data = bytes(range(256)) * (3 * READ_BYTES // 256 + 1)
    server.transport.pauseProducing()  # type: ignore[union-attr]
    client.transport.write(data)  # type: ignore[union-attr]
    world.settle()
    assert server.received == b""
    server.transport.resumeProducing()  # type: ignore[union-attr]
    world.settle()
    assert server.received == data
    assert (
        max(entry[2] for entry in log if entry[1] == "server" and entry[2] != "made") == READ_BYTES
    )


class Pausable:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def pauseProducing(self) -> None:
        self.calls.append("pause")

    def resumeProducing(self) -> None:
        self.calls.append("resume")

    def stopProducing(self) -> None:
        self.calls.append("stop")


def test_a_full_send_buffer_pauses_its_producer_until_it_has_all_gone() -> None:
    world = MemoryWorld()
    server, client = pair(world, [])
    transport: Any = client.transport
    producer = Pausable()
    transport.registerProducer(producer, True)
    transport.bufferSize = 1000
    server.transport.pauseProducing()  # type: ignore[union-attr]
    transport.write(b"x" * 1001)
    assert producer.calls == ["pause"]
    world.settle()
    assert producer.calls == ["pause"]  # the peer does not read: still full
    server.transport.resumeProducing()  # type: ignore[union-attr]
    world.settle()
    assert producer.calls == ["pause", "resume"] and len(server.received) == 1001


def test_a_wrapped_transport_offers_a_producer_as_over_tcp_and_a_pull_one_is_asked_for_more():
    """``ProtocolWrapper`` offers what its transport declares; Twisted's HTTP channel, wrapped,
    registers with it only when it offers ``IPushProducer``."""
    world = MemoryWorld()
    server, _client = pair(world, [])
    transport: Any = server.transport
    for interface in (ITCPTransport, IConsumer, IPushProducer):
        assert interface.providedBy(transport), interface
    wrapper = ProtocolWrapper(WrappingFactory(protocol.Factory()), protocol.Protocol())
    wrapper.makeConnection(transport)
    assert IPushProducer.providedBy(wrapper)
    producer = Pausable()
    wrapper.registerProducer(producer, False)  # a pull producer: asked at once, then on drain
    assert producer.calls == ["resume"]
    transport.write(b"x")
    world.settle()
    assert producer.calls == ["resume", "resume"]


def test_the_clock_is_set_to_a_wall_clock_time_only_before_any_part_starts() -> None:
    world = MemoryWorld()
    world.start_at(1_700_000_000.0)
    assert world.now_ms() == 1_700_000_000_000
    world.advance(0.25)
    assert world.now_ms() == 1_700_000_000_250
    world.reactor.callLater(1, lambda: None)
    with pytest.raises(RuntimeError, match="before any part"):
        world.start_at(1_800_000_000.0)


def test_a_close_comes_after_the_bytes_written_and_an_abort_drops_them() -> None:
    world = MemoryWorld()
    server, client = pair(world, [])
    client.transport.write(b"last words")  # type: ignore[union-attr]
    client.transport.loseConnection()  # type: ignore[union-attr]
    assert server.reason is None  # reported by a later step, not inside the call
    world.settle()
    assert server.received == b"last words"
    assert server.reason.type.__name__ == client.reason.type.__name__ == "ConnectionDone"

    server, client = pair(world, [])
    client.transport.write(b"never read")  # type: ignore[union-attr]
    client.transport.abortConnection()  # type: ignore[union-attr]
    world.settle()
    assert server.received == b""
    assert client.reason.type.__name__ == "ConnectionAborted"
    assert server.reason.type.__name__ == "ConnectionLost"


def test_a_connect_to_a_port_nobody_listens_on_is_refused_at_the_next_step() -> None:
    world = MemoryWorld()
    factory = OneFactory(Recorder(world.reactor, [], "client"))
    world.reactor.connectTCP("127.0.0.1", 9, factory)
    assert factory.failed is None
    world.settle()
    assert factory.failed.type.__name__ == "ConnectionRefusedError"


def scenario() -> list[Any]:
    world = MemoryWorld()
    log: list[Any] = []
    server, client = pair(world, log)
    for i in range(5):
        world.reactor.callLater(0.1 * i, client.transport.write, b"c" * (i * 40_000))  # type: ignore[union-attr]
        world.reactor.callLater(0.05 * i, server.transport.write, b"s" * (i * 30_000))  # type: ignore[union-attr]
    world.reactor.callLater(0.3, server.transport.loseConnection)  # type: ignore[union-attr]
    world.advance(1.0)
    return log


def test_the_same_run_gives_the_same_events_at_the_same_times() -> None:
    first = scenario()
    assert first == scenario()
    assert first[-1][2] == "lost"
