"""The baseline: a bare Twisted server that answers every frame with fixed bytes from memory.

It splits the stream into frames by their length prefix and writes the pre-recorded response
for each one, doing no decoding at all: the floor of what any Twisted server must spend (for a
large frame: gathering its pieces and joining them once). The loop is inline on purpose
(``bare_fanout.py`` has its twin): a shared helper would add a call per request to the very
floor being measured.
Usage: python bench/bare_server.py PORT RESPONSE_FILE [--lean]

``--lean`` runs it on the name server's own reactor (``namesrv.net.lean_reactor``) instead of
Twisted's default: the floor of that reactor, with Twisted's queued writes still.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

if "--lean" in sys.argv:  # before anything imports the default reactor
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from twisted.internet.main import installReactor

    from namesrv.net.lean_reactor import LeanEPollReactor

    installReactor(LeanEPollReactor())

from twisted.internet import protocol, reactor

LARGE = 1 << 16
"""A frame longer than this is gathered piece by piece and joined once (a 16 MiB register would
otherwise be copied whole on every read), as any server must do at least."""


class Bare(protocol.Protocol):
    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.buf = b""
        self.pieces: list[bytes] = []
        self.wanted = 0  # the bytes a large frame's pieces add up to once whole

    def dataReceived(self, data: bytes) -> None:
        if self.wanted:
            self.pieces.append(data)
            self.wanted -= len(data)
            if self.wanted > 0:
                return
            self.wanted = 0
            data = b"".join(self.pieces)
            self.pieces = []
        buf = self.buf + data
        frames = 0
        offset = 0
        while len(buf) - offset >= 4:
            length = struct.unpack_from(">I", buf, offset)[0]
            if len(buf) - offset < 4 + length:
                break
            offset += 4 + length
            frames += 1
        self.buf = buf[offset:]
        if len(self.buf) >= 4:
            rest = 4 + struct.unpack_from(">I", self.buf)[0] - len(self.buf)
            if rest > LARGE:
                self.pieces = [self.buf]
                self.wanted = rest
                self.buf = b""
        if frames:
            self.transport.write(self.answer * frames)


class BareFactory(protocol.Factory):
    def __init__(self, answer: bytes) -> None:
        self.answer = answer

    def buildProtocol(self, addr: object) -> Bare:
        return Bare(self.answer)


def main() -> None:
    port = int(sys.argv[1])
    with open(sys.argv[2], "rb") as fh:
        answer = fh.read()
    reactor.listenTCP(port, BareFactory(answer), interface="127.0.0.1")  # type: ignore[attr-defined]
    print("ready", flush=True)
    reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
