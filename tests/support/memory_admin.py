"""``namesrv-admin`` run in the deterministic world (``support.memory_world``).

The command is a blocking tool: it opens a socket, sends a request and waits in ``recv`` for
the answer. Here its socket is a connection of the world's network and its wall clock the
world's clock; everything above them (options, signing, frames, output) is the command itself.
It runs in the test's own thread, and each ``recv`` moves the world until bytes arrive, the
peer closes, or the command's timeout passes on the world's clock: what it sees is a function
of what the test did, as with every other part of the world.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from unittest import mock

from click.testing import CliRunner, Result
from twisted.internet import protocol
from twisted.python.failure import Failure

from namesrv.admin import wire as admin_wire
from namesrv.admin.cli import main
from support.memory_world import MemoryWorld, WorldNotSettled


class _Received(protocol.Protocol):
    """What one connection has received and not yet handed to ``recv``."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def dataReceived(self, data: bytes) -> None:
        self.data += data

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.closed = True


class _OneProtocol(protocol.ClientFactory):
    def __init__(self, proto: protocol.Protocol) -> None:
        self.proto = proto

    def buildProtocol(self, addr: Any) -> protocol.Protocol:
        return self.proto


class WorldSocket:
    """The part of a blocking socket the command uses (``sendall``, ``recv``, ``close``), over
    a connection of ``world``; ``timeout_s`` bounds each ``recv`` on the world's clock."""

    def __init__(self, world: MemoryWorld, host: str, port: int, timeout_s: float) -> None:
        self.world = world
        self.timeout_s = timeout_s
        self.received = _Received()
        world.reactor.connectTCP(host, port, _OneProtocol(self.received))
        world.settle()
        if self.received.transport is None:
            raise ConnectionRefusedError(f"nobody listens on {host}:{port}")

    def sendall(self, data: bytes) -> None:
        if self.received.closed:
            raise BrokenPipeError("the connection is closed")
        self.received.transport.write(data)  # type: ignore[union-attr]

    def recv(self, size: int) -> bytes:
        received = self.received
        try:
            self.world.run_until(lambda: bool(received.data) or received.closed, self.timeout_s)
        except WorldNotSettled:
            raise TimeoutError("timed out") from None
        chunk = bytes(received.data[:size])
        del received.data[:size]
        return chunk

    def close(self) -> None:
        if not self.received.closed:
            self.received.transport.loseConnection()  # type: ignore[union-attr]
        self.world.settle()


class WorldSockets:
    """The ``socket`` module as the command's wire sees it: connections made in ``world``."""

    def __init__(self, world: MemoryWorld) -> None:
        self.world = world

    def create_connection(
        self, address: tuple[str, int], timeout: float | None = None
    ) -> WorldSocket:
        host, port = address
        return WorldSocket(self.world, host, port, timeout if timeout is not None else 5.0)


def namesrv_admin(world: MemoryWorld, args: Sequence[str]) -> Result:
    """``namesrv-admin ARGS`` against the name servers of ``world``: its result (exit code,
    stdout, stderr)."""
    with (
        mock.patch.object(admin_wire, "socket", WorldSockets(world)),
        mock.patch.object(admin_wire, "_wall_ms", world.now_ms),
    ):
        return CliRunner().invoke(main, list(args), prog_name="namesrv-admin")
