"""The fan-out baseline: a bare Twisted server that writes one recorded frame to every connection.

Data connections get ``ACK_FILE``'s bytes once per complete frame they send (standing in for
a subscribe acknowledgement); any byte on the control port makes the server write
``FRAME_FILE``'s bytes to every data connection, then answer the controller with one byte.
No decoding, no bookkeeping: the floor of what a Twisted server spends per notified connection.

    python bench/bare_fanout.py DATA_PORT CONTROL_PORT FRAME_FILE ACK_FILE
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from twisted.internet import protocol, reactor


class Subscriber(protocol.Protocol):
    def __init__(self, factory: SubscriberFactory) -> None:
        self.factory = factory
        self.buf = b""

    def connectionMade(self) -> None:
        self.factory.conns.append(self)

    def dataReceived(self, data: bytes) -> None:
        buf = self.buf + data
        offset = 0
        while len(buf) - offset >= 4:
            length = struct.unpack_from(">I", buf, offset)[0]
            if len(buf) - offset < 4 + length:
                break
            offset += 4 + length
            self.transport.write(self.factory.ack)
        self.buf = buf[offset:]


class SubscriberFactory(protocol.Factory):
    def __init__(self, ack: bytes) -> None:
        self.ack = ack
        self.conns: list[Subscriber] = []

    def buildProtocol(self, addr: object) -> Subscriber:
        return Subscriber(self)


class Control(protocol.Protocol):
    def __init__(self, subscribers: SubscriberFactory, frame: bytes) -> None:
        self.subscribers = subscribers
        self.frame = frame

    def dataReceived(self, data: bytes) -> None:
        frame = self.frame
        for conn in self.subscribers.conns:
            conn.transport.write(frame)
        self.transport.write(b"k")


def main() -> None:
    data_port, control_port = int(sys.argv[1]), int(sys.argv[2])
    frame = Path(sys.argv[3]).read_bytes()
    ack = Path(sys.argv[4]).read_bytes()
    subscribers = SubscriberFactory(ack)
    control = protocol.Factory.forProtocol(lambda: Control(subscribers, frame))
    reactor.listenTCP(data_port, subscribers, backlog=4096, interface="127.0.0.1")
    reactor.listenTCP(control_port, control, interface="127.0.0.1")
    reactor.run()


if __name__ == "__main__":
    main()
