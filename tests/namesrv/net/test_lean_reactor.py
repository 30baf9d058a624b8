"""The reactor ``namesrv`` runs on: ready sockets go straight to their handlers."""

from __future__ import annotations

import logging
import select
import socket
from typing import Any

import pytest
from twisted.internet import error, main

from namesrv.net.lean_reactor import LeanEPollReactor

if not hasattr(select, "epoll"):
    pytest.skip("epoll is Linux only", allow_module_level=True)


class Reader:
    """The least a reader needs to be polled: a descriptor and what to do when it is ready."""

    def __init__(self, sock: socket.socket, fail: bool) -> None:
        self.sock = sock
        self.fail = fail
        self.read: list[bytes] = []
        self.lost = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def logPrefix(self) -> str:
        return "reader"

    def doRead(self) -> None:
        if self.fail:
            raise RuntimeError("read failed")
        self.read.append(self.sock.recv(16))

    def connectionLost(self, reason: object) -> None:
        self.lost += 1
        if self.fail:
            raise RuntimeError("and so did its clean-up")


def test_ready_sockets_reach_their_handlers_and_one_failing_whole_spares_the_others(caplog):
    reactor = LeanEPollReactor()
    pairs = [socket.socketpair() for _ in range(3)]
    readers = [Reader(ours, fail=(i == 0)) for i, (ours, _) in enumerate(pairs)]
    try:
        for reader in readers:
            reactor.addReader(reader)
        for _, theirs in pairs:
            theirs.send(b"ping")
        with caplog.at_level(logging.ERROR, logger="namesrv.net.lean_reactor"):
            reactor.doPoll(0)
        assert [r.read for r in readers] == [[], [b"ping"], [b"ping"]]
        # The failing reader was dropped (Twisted's own handling), and what escaped that too
        # was logged instead of ending the loop.
        assert readers[0].lost == 1 and readers[0] not in reactor.getReaders()
        assert "error reading a ready socket" in caplog.text
        assert "error handling a ready socket" in caplog.text
        for _, theirs in pairs[1:]:
            theirs.send(b"again")
        reactor.doPoll(0)
        assert [r.read for r in readers[1:]] == [[b"ping", b"again"]] * 2
    finally:
        for reader in readers[1:]:
            reactor.removeReader(reader)
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
        reactor._poller.close()


def test_after_dispatch_hooks_run_once_every_ready_socket_of_the_poll_is_handled(caplog):
    reactor = LeanEPollReactor()
    pairs = [socket.socketpair() for _ in range(2)]
    seen: list[tuple[str, object]] = []

    class Noting(Reader):
        def doRead(self) -> None:
            super().doRead()
            seen.append(("read", reactor.dispatching))

    readers = [Noting(ours, fail=False) for ours, _ in pairs]

    def hook() -> None:
        seen.append(("hook", reactor.dispatching))

    def broken_hook() -> None:
        raise RuntimeError("hook failed")

    try:
        for reader in readers:
            reactor.addReader(reader)
        reactor.after_dispatch(broken_hook)
        reactor.after_dispatch(hook)
        for _, theirs in pairs:
            theirs.send(b"ping")
        with caplog.at_level(logging.ERROR, logger="namesrv.net.lean_reactor"):
            reactor.doPoll(0)
        # Both reads first, with the reactor saying it dispatches; then the hooks, once, and
        # a failing hook keeps neither the next hook nor the loop from running.
        assert seen == [("read", True), ("read", True), ("hook", False)]
        assert "after-dispatch hook" in caplog.text
        reactor.remove_after_dispatch(hook)
        reactor.remove_after_dispatch(hook)  # removing twice is harmless
        reactor.doPoll(0)  # nothing ready: no reads, and the removed hook does not run
        assert seen == [("read", True), ("read", True), ("hook", False)]
    finally:
        for reader in readers:
            reactor.removeReader(reader)
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
        reactor._poller.close()


class Connection(Reader):
    """A reader that reads as a TCP connection does: a reason to disconnect when the peer is
    gone (Twisted's ``CONNECTION_DONE``), nothing otherwise."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock, fail=False)
        self.reasons: list[type] = []

    def doRead(self) -> object:
        data = self.sock.recv(16)
        if not data:
            return main.CONNECTION_DONE
        self.read.append(data)
        return None

    def connectionLost(self, reason: Any) -> None:
        super().connectionLost(reason)
        self.reasons.append(type(reason.value))


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of a loopback TCP connection: a peer's close shows as input alone (a socket
    pair's shows as a hang-up too, which takes the reactor's generic path)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    ours.setblocking(False)
    return ours, theirs


def test_a_read_that_finds_the_peer_gone_disconnects_that_socket_only():
    reactor = LeanEPollReactor()
    pairs = [tcp_pair() for _ in range(2)]
    conns = [Connection(ours) for ours, _ in pairs]
    try:
        for conn in conns:
            reactor.addReader(conn)
        pairs[0][1].close()  # the peer of the first is gone: its read gets nothing
        pairs[1][1].send(b"ping")
        reactor.doPoll(0)
        assert conns[0].reasons == [error.ConnectionDone] and conns[0].lost == 1
        assert conns[0] not in reactor.getReaders()
        assert conns[1].read == [b"ping"] and conns[1].lost == 0
        assert conns[1] in reactor.getReaders()
    finally:
        reactor.removeReader(conns[1])
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
        reactor._poller.close()
