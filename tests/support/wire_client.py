"""A minimal remoting peer for tests: stands in for brokers and clients on loopback."""

from __future__ import annotations

import itertools
import json
import struct
from typing import Any

from twisted.internet import defer, protocol, reactor, ssl
from twisted.internet.endpoints import SSL4ClientEndpoint, TCP4ClientEndpoint, connectProtocol

from protocol.frame import FrameDecoder, RemotingCommand, encode_command


class WireClient(protocol.Protocol):
    """Sends requests, matches responses by opaque, and collects server-initiated requests."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder(64 * 1024 * 1024)
        self._opaques = itertools.count(1)
        self._pending: dict[int, defer.Deferred[RemotingCommand]] = {}
        self.pushed: list[RemotingCommand] = []
        self._push_waiters: list[tuple[int, defer.Deferred[list[RemotingCommand]]]] = []
        self.lost: defer.Deferred[None] = defer.Deferred()
        self.connected = True

    def dataReceived(self, data: bytes) -> None:
        for cmd in self.decoder.feed(data):
            if cmd.is_response:
                waiter = self._pending.pop(cmd.opaque, None)
                if waiter is not None:
                    waiter.callback(cmd)
            else:
                self.pushed.append(cmd)
                for count, d in list(self._push_waiters):
                    if len(self.pushed) >= count:
                        self._push_waiters.remove((count, d))
                        d.callback(list(self.pushed))

    def connectionLost(self, reason: Any = None) -> None:
        self.connected = False
        for d in self._pending.values():
            d.errback(ConnectionError("connection lost"))
        self._pending.clear()
        if not self.lost.called:
            self.lost.callback(None)

    def request(self, cmd: RemotingCommand) -> defer.Deferred[RemotingCommand]:
        cmd.opaque = next(self._opaques)
        d: defer.Deferred[RemotingCommand] = defer.Deferred()
        if not cmd.is_oneway:
            self._pending[cmd.opaque] = d
        self.transport.write(encode_command(cmd))  # type: ignore[union-attr]
        if cmd.is_oneway:
            d.callback(cmd)
        return d

    def ascii_json_request(
        self, code: int, ext: dict[str, str], body: bytes = b""
    ) -> defer.Deferred[RemotingCommand]:
        """A request whose JSON header is written with ``\\uXXXX`` escapes, as a peer may
        spell text this side's encoder would refuse (a lone surrogate)."""
        opaque = next(self._opaques)
        header = json.dumps(
            {
                "code": code,
                "extFields": ext,
                "flag": 0,
                "language": "JAVA",
                "opaque": opaque,
                "serializeTypeCurrentRPC": "JSON",
                "version": 0,
            }
        ).encode("ascii")
        d: defer.Deferred[RemotingCommand] = defer.Deferred()
        self._pending[opaque] = d
        prefix = struct.pack(">ii", 4 + len(header) + len(body), len(header))
        self.transport.write(prefix + header + body)  # type: ignore[union-attr]
        return d

    def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"", **kw: Any):
        return self.request(RemotingCommand.request(code, ext or {}, body, **kw))

    def wait_pushed(self, count: int = 1, timeout: float = 5.0) -> defer.Deferred[Any]:
        """Fires once ``count`` server-initiated frames have arrived (fails after ``timeout``)."""
        d: defer.Deferred[Any] = defer.Deferred()
        if len(self.pushed) >= count:
            d.callback(list(self.pushed))
            return d
        self._push_waiters.append((count, d))
        return d.addTimeout(timeout, reactor)


def connect(port: int, source: str | None = None) -> defer.Deferred[WireClient]:
    """A client of 127.0.0.1:``port``; ``source`` (e.g. ``127.0.0.2``) poses as another host."""
    bind = (source, 0) if source else None
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port, bindAddress=bind)
    return connectProtocol(endpoint, WireClient())


def connect_tls(port: int) -> defer.Deferred[WireClient]:
    """A client of 127.0.0.1:``port`` over TLS (the certificate is not checked, as upstream's
    test mode)."""
    endpoint = SSL4ClientEndpoint(reactor, "127.0.0.1", port, ssl.CertificateOptions())
    return connectProtocol(endpoint, WireClient())
