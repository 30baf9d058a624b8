"""The sandbox's control port: one command a line in, one JSON line out.

It listens on loopback by default (``--control``), so ``namesrv-sandbox stop broker-b`` from
another terminal drives a sandbox running in the background. A line longer than
``MAX_LINE_BYTES`` closes its connection, and at most ``MAX_CONNECTIONS`` are open at once.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any

from twisted.internet import defer
from twisted.internet.protocol import Factory
from twisted.protocols.basic import LineOnlyReceiver

MAX_LINE_BYTES = 4096
MAX_CONNECTIONS = 32
DEFAULT_CONTROL = "127.0.0.1:9870"

Handler = Callable[[str], Coroutine[Any, Any, dict[str, Any]]]


class ControlLine(LineOnlyReceiver):
    delimiter = b"\n"
    MAX_LENGTH = MAX_LINE_BYTES

    def __init__(self, factory: ControlFactory) -> None:
        self.control = factory

    def connectionMade(self) -> None:
        if len(self.control.open) >= MAX_CONNECTIONS:
            self._close()
            return
        self.control.open.add(self)

    def connectionLost(self, reason: Any = None) -> None:
        self.control.open.discard(self)

    def lineReceived(self, line: bytes) -> None:
        text = line.decode("utf-8", errors="replace").strip()
        d: defer.Deferred[dict[str, Any]] = defer.Deferred.fromCoroutine(self.control.handler(text))
        d.addErrback(lambda failure: {"error": str(failure.value)})
        d.addCallback(self._answer)

    def _answer(self, doc: dict[str, Any]) -> None:
        self.sendLine(json.dumps(doc).encode())

    def lineLengthExceeded(self, line: bytes) -> Any:
        self._close()

    def _close(self) -> None:
        transport: Any = self.transport
        transport.loseConnection()


class ControlFactory(Factory):
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.open: set[ControlLine] = set()

    def buildProtocol(self, addr: Any) -> ControlLine:
        return ControlLine(self)


class ControlUnreachable(Exception):
    """No sandbox answered at the control address."""


def send_command(host: str, port: int, line: str, wait_s: float, timeout_s: float = 30.0) -> Any:
    """The sandbox's answer to ``line``; connects for up to ``wait_s`` seconds, so a command
    right after starting a sandbox in the background waits for it to be ready."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
            break
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise ControlUnreachable(f"no sandbox answers at {host}:{port}: {exc}") from exc
            time.sleep(0.2)
    with sock:
        sock.sendall(line.encode() + b"\n")
        data = b""
        try:
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except TimeoutError as exc:
            raise ControlUnreachable(f"the sandbox at {host}:{port} did not answer") from exc
    if not data:
        raise ControlUnreachable(f"the sandbox at {host}:{port} closed without answering")
    return json.loads(data)
