"""A small remoting peer over the protocol package: requests matched to responses by opaque.
The demo's broker stand-ins and its slow subscriber speak through it."""

from __future__ import annotations

import itertools
from typing import Any

from twisted.internet import defer, protocol
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol

from protocol.frame import FrameDecoder, RemotingCommand, encode_command

MAX_FRAME = 16 * 1024 * 1024


class Peer(protocol.Protocol):
    """One connection to the name server; server-initiated requests (NOTIFY, GoAway) are
    counted and otherwise ignored."""

    def __init__(self) -> None:
        self._decoder = FrameDecoder(MAX_FRAME)
        self._opaques = itertools.count(1)
        self._pending: dict[int, defer.Deferred[RemotingCommand]] = {}
        self.pushed = 0
        self.connected = True

    def dataReceived(self, data: bytes) -> None:
        for cmd in self._decoder.feed(data):
            if not cmd.is_response:
                self.pushed += 1
                continue
            waiter = self._pending.pop(cmd.opaque, None)
            if waiter is not None:
                waiter.callback(cmd)

    def connectionLost(self, reason: Any = None) -> None:
        self.connected = False
        pending, self._pending = self._pending, {}
        for d in pending.values():
            d.errback(ConnectionError("connection to the name server lost"))

    @property
    def _t(self) -> Any:
        return self.transport

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def request(self, cmd: RemotingCommand) -> defer.Deferred[RemotingCommand]:
        cmd.opaque = next(self._opaques)
        d: defer.Deferred[RemotingCommand] = defer.Deferred()
        self._pending[cmd.opaque] = d
        self._t.write(encode_command(cmd))
        return d

    def call(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> defer.Deferred[RemotingCommand]:
        return self.request(RemotingCommand.request(code, ext or {}, body))

    def write_raw(self, data: bytes) -> None:
        """Frames already encoded; answers to them are dropped (no opaque is waited on)."""
        self._t.write(data)

    def pause_reading(self) -> None:
        self._t.pauseProducing()

    def resume_reading(self) -> None:
        self._t.resumeProducing()

    def close(self) -> None:
        if self.connected:
            self._t.loseConnection()


async def connect(reactor: Any, port: int) -> Peer:
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port)
    return await connectProtocol(endpoint, Peer())
