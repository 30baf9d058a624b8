"""TCP in memory on a virtual clock: the reactor of ``support.memory_world``.

``MemoryReactor`` is a ``task.Clock`` that also listens and connects (``listenTCP``,
``connectTCP``) the way Twisted's TCP does, with connections that live in memory. Nothing moves
by itself: ``MemoryReactor.step`` runs one timer that is due, else hands one read's worth of
bytes to each peer that reads; the world calls it until nothing is left. A connection keeps
what TCP promises and what the code under test relies on:

- bytes arrive in order, at most ``READ_BYTES`` per read, only while the reader reads (a
  transport's ``pauseProducing`` stops its reads, ``resumeProducing`` starts them again);
- a streaming producer registered on a transport is paused when more than ``bufferSize`` bytes
  wait to go out and resumed once they are all gone, as Twisted's ``FileDescriptor`` does;
- ``loseConnection`` closes once what is written has been read; ``abortConnection`` drops it
  and both ends hear a non-clean loss; either way the losses are reported by a later step,
  never inside the call that closed;
- a connect to a port nobody listens on is refused at the next step.

There is no latency and no loss: the order of events is the order of the steps, so a run is a
function of what the test did.
"""

from __future__ import annotations

import itertools
from typing import Any

from twisted.internet import defer, error, task
from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import IConsumer, IPushProducer, ITCPTransport
from twisted.python.failure import Failure
from zope.interface import implementer

READ_BYTES = 64 * 1024
"""Bytes one read hands to a protocol at most (a socket read's usual size)."""

SEND_BUFFER_BYTES = 64 * 1024
"""A transport's default ``bufferSize``, Twisted's."""

FIRST_LISTEN_PORT = 20_000
FIRST_CLIENT_PORT = 40_000

ANY_HOST = ("", "0.0.0.0")


class NotSettledError(AssertionError):
    """The world did not reach the state asked for within its bound."""


@implementer(ITCPTransport, IConsumer, IPushProducer)
class MemoryTransport:
    """One end of a connection in memory: what a protocol sees as its TCP transport (declared
    as Twisted's TCP transport is, so that a wrapper around it, ``ProtocolWrapper`` say, offers
    what it offers)."""

    def __init__(self, network: MemoryReactor, protocol: Any, host: IPv4Address, peer: IPv4Address):
        self.network = network
        self.protocol = protocol
        self.host = host
        self.peer_address = peer
        self.other: MemoryTransport | None = None
        self.outgoing = bytearray()
        self.bufferSize = SEND_BUFFER_BYTES
        self.reading = True
        self.producer: Any = None
        self.streaming = False
        self.producer_paused = False
        self.connected = True
        self.disconnecting = False
        self.disconnected = False
        self._loss: Failure | None = None
        """Set when this end is closed and its protocol not yet told."""

    # -- ITransport ----------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.disconnected or self._loss is not None:
            return
        self.outgoing += data
        if (
            self.producer is not None
            and self.streaming
            and not self.producer_paused
            and len(self.outgoing) > self.bufferSize
        ):
            self.producer_paused = True
            self.producer.pauseProducing()

    def writeSequence(self, data: list[bytes]) -> None:
        self.write(b"".join(data))

    def loseConnection(self) -> None:
        if not self.disconnected:
            self.disconnecting = True
            self.reading = False

    def abortConnection(self) -> None:
        if self.disconnected or self._loss is not None:
            return
        self.outgoing.clear()
        self._end(Failure(error.ConnectionAborted()))
        other = self.other
        if other is not None and not other.disconnected and other._loss is None:
            other.outgoing.clear()
            other._end(Failure(error.ConnectionLost("the peer aborted the connection")))

    def getPeer(self) -> IPv4Address:
        return self.peer_address

    def getHost(self) -> IPv4Address:
        return self.host

    # -- IConsumer: the protocol's producer, paused while the send buffer is full --------------

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        if self.producer is not None:
            raise RuntimeError("a producer is already registered")
        self.producer = producer
        self.streaming = streaming
        self.producer_paused = False
        if not streaming:
            producer.resumeProducing()

    def unregisterProducer(self) -> None:
        self.producer = None

    # -- IPushProducer: this end's reads -------------------------------------------------------

    def pauseProducing(self) -> None:
        self.reading = False

    def resumeProducing(self) -> None:
        if not self.disconnecting:
            self.reading = True

    def stopProducing(self) -> None:
        self.loseConnection()

    # -- ITCPTransport's options, accepted and without effect in memory ------------------------

    def setTcpNoDelay(self, enabled: bool) -> None:
        pass

    def setTcpKeepAlive(self, enabled: bool) -> None:
        pass

    def getTcpNoDelay(self) -> bool:
        return True

    def getTcpKeepAlive(self) -> bool:
        return False

    def logPrefix(self) -> str:
        return "memory"

    # -- the network's side --------------------------------------------------------------------

    def _end(self, why: Failure) -> None:
        self.connected = False
        self.disconnecting = True
        self.reading = False
        self._loss = why

    def _deliver(self) -> bool:
        """Hand one read of what this end wrote to the peer; close what is due. Whether
        anything happened."""
        if self.disconnected:
            return False
        if self._loss is not None:
            self.disconnected = True
            why, self._loss = self._loss, None
            if self.producer is not None:
                self.producer.stopProducing()
                self.producer = None
            self.protocol.connectionLost(why)
            return True
        other = self.other
        if other is None:
            return False
        if self.outgoing and other.reading and not other.disconnected and other._loss is None:
            chunk = bytes(self.outgoing[:READ_BYTES])
            del self.outgoing[:READ_BYTES]
            drained = not self.outgoing
            other.protocol.dataReceived(chunk)
            # As Twisted's FileDescriptor: a streaming producer paused by a full buffer is
            # resumed once it is empty, a pull producer is asked for more.
            resume = not self.streaming or self.producer_paused
            if drained and self.producer is not None and resume:
                self.producer_paused = False
                self.producer.resumeProducing()
            return True
        if self.disconnecting and not self.outgoing:
            self._end(Failure(error.ConnectionDone()))
            if not other.disconnected and other._loss is None:
                other.outgoing.clear()
                other._end(Failure(error.ConnectionDone()))
            return True
        return False


class MemoryPort:
    """A listening port in memory (``IListeningPort``)."""

    def __init__(self, network: MemoryReactor, port: int, factory: Any, interface: str) -> None:
        self.network = network
        self.port = port
        self.factory = factory
        self.interface = interface
        self.connected = False

    def startListening(self) -> None:
        self.factory.doStart()
        self.connected = True

    def stopListening(self) -> defer.Deferred[None]:
        if self.connected:
            self.connected = False
            self.network.ports.pop(self.port, None)
            self.factory.doStop()
        return defer.succeed(None)

    loseConnection = stopListening

    def getHost(self) -> IPv4Address:
        return IPv4Address("TCP", self.interface or "0.0.0.0", self.port)


class MemoryConnector:
    """A connect under way (``IConnector``): completed or refused at the next step."""

    def __init__(self, network: MemoryReactor, host: str, port: int, factory: Any, source: str):
        self.network = network
        self.destination = IPv4Address("TCP", host, port)
        self.factory = factory
        self.source = source
        self.transport: MemoryTransport | None = None
        self._pending = True

    def getDestination(self) -> IPv4Address:
        return self.destination

    def stopConnecting(self) -> None:
        if self._pending:
            self._pending = False
            self.factory.clientConnectionFailed(self, Failure(error.UserError()))
            self.factory.doStop()

    def disconnect(self) -> None:
        if self._pending:
            self.stopConnecting()
        elif self.transport is not None:
            self.transport.loseConnection()

    def connect(self) -> None:
        self.factory.doStart()
        self.factory.startedConnecting(self)
        self.network.callLater(0, self._complete)

    def _complete(self) -> None:
        if not self._pending:
            return
        self._pending = False
        self.transport = self.network.accept(self)
        if self.transport is None:
            refused = Failure(error.ConnectionRefusedError(f"{self.destination.port}"))
            self.factory.clientConnectionFailed(self, refused)
            self.factory.doStop()


class MemoryReactor(task.Clock):
    """The one clock and the network of a world: timers, listening ports and connections."""

    def __init__(self) -> None:
        super().__init__()
        self.ports: dict[int, MemoryPort] = {}
        self.transports: list[MemoryTransport] = []
        self._listen_ports = itertools.count(FIRST_LISTEN_PORT)
        self._client_ports = itertools.count(FIRST_CLIENT_PORT)

    # -- IReactorTCP ---------------------------------------------------------------------------

    def listenTCP(
        self, port: int, factory: Any, backlog: int = 50, interface: str = ""
    ) -> MemoryPort:
        if port == 0:
            port = next(p for p in self._listen_ports if p not in self.ports)
        if port in self.ports:
            raise error.CannotListenError(interface, port, OSError("address already in use"))
        listening = MemoryPort(self, port, factory, interface)
        listening.startListening()
        self.ports[port] = listening
        return listening

    def connectTCP(
        self,
        host: str,
        port: int,
        factory: Any,
        timeout: float = 30,
        bindAddress: tuple[str, int] | None = None,
    ) -> MemoryConnector:
        source = bindAddress[0] if bindAddress and bindAddress[0] else "127.0.0.1"
        connector = MemoryConnector(self, host, port, factory, source)
        connector.connect()
        return connector

    def accept(self, connector: MemoryConnector) -> MemoryTransport | None:
        """The client end of a new connection to what ``connector`` names, or None when
        nobody listens there or the server's factory declines."""
        dest = connector.destination
        listening = self.ports.get(dest.port)
        if listening is None or listening.interface not in (*ANY_HOST, dest.host):
            return None
        client_addr = IPv4Address("TCP", connector.source, next(self._client_ports))
        server_addr = IPv4Address("TCP", dest.host, dest.port)
        server_protocol = listening.factory.buildProtocol(client_addr)
        if server_protocol is None:
            return None
        client_protocol = connector.factory.buildProtocol(server_addr)
        server_end = MemoryTransport(self, server_protocol, server_addr, client_addr)
        client_end = MemoryTransport(self, client_protocol, client_addr, server_addr)
        server_end.other, client_end.other = client_end, server_end
        self.transports += [server_end, client_end]
        server_protocol.makeConnection(server_end)
        client_protocol.makeConnection(client_end)
        return client_end

    # -- stepping ------------------------------------------------------------------------------

    def next_due(self) -> float | None:
        """When the earliest armed timer is due; None when none is armed."""
        self._sortCalls()
        return self.calls[0].getTime() if self.calls else None

    def move_to(self, when: float) -> None:
        """Set the clock to ``when`` without running anything (``step`` runs what is due)."""
        if when < self.rightNow:
            raise ValueError(f"the clock does not go back ({when} < {self.rightNow})")
        self.rightNow = when

    def step(self) -> bool:
        """Run one timer that is due now, else one round of reads and closes; whether there
        was anything to do."""
        self._sortCalls()
        if self.calls and self.calls[0].getTime() <= self.rightNow:
            call = self.calls.pop(0)
            call.called = 1
            call.func(*call.args, **call.kw)
            return True
        return self.read_round()

    def read_round(self) -> bool:
        """One round of reads and closes, running no timer (what a real reactor does between
        two turns of a job that reschedules itself at once); whether anything moved."""
        moved = False
        for transport in list(self.transports):
            moved = transport._deliver() or moved
        if moved:
            self.transports = [t for t in self.transports if not t.disconnected]
        return moved

    def settle(self, max_steps: int) -> None:
        """Step until nothing is left to do now; fails after ``max_steps`` steps."""
        for _ in range(max_steps):
            if not self.step():
                return
        raise NotSettledError(f"still busy after {max_steps} steps: {self.describe()}")

    def advance(self, amount: float, max_steps: int = 200_000) -> None:
        """Move the clock by ``amount``, each timer run at its own time and the world settled
        after it (unlike ``task.Clock.advance``, which runs every due timer in one batch)."""
        target = self.rightNow + amount
        self.settle(max_steps)
        while (due := self.next_due()) is not None and due <= target:
            self.move_to(max(due, self.rightNow))
            self.settle(max_steps)
        self.move_to(target)
        self.settle(max_steps)

    def describe(self) -> str:
        """What is still going on, for a failure's message."""
        waiting = sum(len(t.outgoing) for t in self.transports)
        return (
            f"t={self.rightNow:.3f}s, {len(self.calls)} timers armed (next at "
            f"{self.next_due()}), {len(self.transports)} connection ends open, "
            f"{waiting} bytes unread"
        )
