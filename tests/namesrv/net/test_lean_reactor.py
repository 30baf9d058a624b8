"""The reactor ``namesrv`` runs on: ready sockets go straight to their handlers."""

from __future__ import annotations

import logging
import select
import socket

import pytest

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
