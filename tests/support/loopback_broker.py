"""A fake broker on loopback (127.0.0.1, port 0) for the producer's detector tests: the broker
stand-in without a name server, answering every request with one fixed code."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, reactor

from namesrv_sandbox.standin import BrokerStandIn, _ClientConn
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand


class FakeBroker(BrokerStandIn):
    """Answers probes with ``answer`` (a response code), or stays silent when it is None."""

    def __init__(self, answer: int | None = ResponseCode.SUCCESS, network: Any = None) -> None:
        """``network``: the reactor it listens on (default the real one; a world's in
        memory)."""
        super().__init__("fake", {}, reactor=network if network is not None else reactor)
        self.answer = answer
        self.probes: list[RemotingCommand] = []
        self.accept()

    @property
    def conns(self) -> list[_ClientConn]:
        return list(self._conns)

    @property
    def opened(self) -> int:
        return self.counters["connections_accepted"]

    def _request(self, conn: _ClientConn, cmd: RemotingCommand) -> None:
        self.probes.append(cmd)
        if self.answer is not None:
            conn.write(cmd.make_response(self.answer, None))

    def send_go_away(self, body: bytes) -> None:
        frame = RemotingCommand.request(RequestCode.GO_AWAY, body=body, oneway=True)
        for conn in self.conns:
            conn.write(frame)

    def drop_connections(self) -> None:
        for conn in self.conns:
            conn.transport.loseConnection()  # type: ignore[union-attr]

    def close(self) -> defer.Deferred[Any]:
        self.drop_connections()
        listening, self._listening = self._listening, None
        return defer.maybeDeferred(listening.stopListening) if listening else defer.succeed(None)
