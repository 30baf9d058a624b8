"""A fake broker on loopback (127.0.0.1, port 0) for the producer's detector tests."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, reactor
from twisted.internet.protocol import Factory, Protocol

from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command


class FakeBroker(Factory):
    """Answers probes with ``answer`` (a response code), or stays silent when it is None."""

    def __init__(self, answer: int | None = ResponseCode.SUCCESS) -> None:
        self.answer = answer
        self.conns: list[Protocol] = []
        self.opened = 0
        self.probes: list[RemotingCommand] = []
        self.port: Any = reactor.listenTCP(0, self, interface="127.0.0.1")  # type: ignore[attr-defined]
        self.addr = f"127.0.0.1:{self.port.getHost().port}"

    def buildProtocol(self, addr: Any) -> Protocol:
        broker = self

        class Conn(Protocol):
            def connectionMade(self) -> None:
                broker.opened += 1
                broker.conns.append(self)
                self.decoder = FrameDecoder(1 << 20)

            def connectionLost(self, reason: Any = None) -> None:
                broker.conns.remove(self)

            def dataReceived(self, data: bytes) -> None:
                for cmd in self.decoder.feed(data):
                    broker.probes.append(cmd)
                    if broker.answer is not None:
                        resp = cmd.make_response(broker.answer, None)
                        self.transport.write(encode_command(resp))

        return Conn()

    def send_go_away(self, body: bytes) -> None:
        frame = encode_command(RemotingCommand.request(RequestCode.GO_AWAY, body=body, oneway=True))
        for conn in self.conns:
            conn.transport.write(frame)

    def drop_connections(self) -> None:
        for conn in list(self.conns):
            conn.transport.loseConnection()

    def close(self) -> defer.Deferred[Any]:
        self.drop_connections()
        return defer.maybeDeferred(self.port.stopListening)
