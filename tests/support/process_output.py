"""A child process's whole output, for tests that run a command on the reactor."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, protocol


class Collect(protocol.ProcessProtocol):
    """Keeps stdout and stderr; ``ended`` fires with the exit code."""

    def __init__(self) -> None:
        self.out = b""
        self.err = b""
        self.ended: defer.Deferred[int] = defer.Deferred()

    def outReceived(self, data: bytes) -> None:
        self.out += data

    def errReceived(self, data: bytes) -> None:
        self.err += data

    def processEnded(self, reason: Any) -> None:
        self.ended.callback(reason.value.exitCode)
