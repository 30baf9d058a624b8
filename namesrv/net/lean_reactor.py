"""The epoll reactor without Twisted's per-event logging context.

Twisted's epoll reactor hands every ready socket to its handler through ``log.callWithLogger``,
which asks the socket for its log prefix and pushes a context dict for Twisted's legacy
logging. This server logs through the standard library, so that context is never read, yet
it costs a large share of the CPU per event at high request rates. Here each ready socket goes
straight to the reactor's own read/write handler, which already turns a failing read or write
into a closed connection; anything that still escapes it is logged and the loop goes on. A
socket with input ready and nothing else (almost every event) is read right here, with the
same outcome as through that handler and one call fewer.

It also tells its users when it is handing out ready sockets (``dispatching``) and runs their
``after_dispatch`` hooks once all of a poll's ready sockets are handled: the connections hold
the answers of a poll's reads until then and write them in one burst (see
``namesrv.net.hub.ConnectionHub``).
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from typing import Any

from twisted.internet import epollreactor

log = logging.getLogger(__name__)

_INPUT_ONLY = epollreactor.EPOLLIN
"""The event of almost every ready socket: data (or the peer's close) to read, no error."""


class LeanEPollReactor(epollreactor.EPollReactor):
    def __init__(self) -> None:
        super().__init__()
        self.dispatching = False
        """True while the ready sockets of one poll are being handled."""
        self._after_dispatch: list[Callable[[], object]] = []

    def after_dispatch(self, hook: Callable[[], object]) -> None:
        """Run ``hook`` after the ready sockets of every poll are handled, until removed."""
        self._after_dispatch.append(hook)

    def remove_after_dispatch(self, hook: Callable[[], object]) -> None:
        if hook in self._after_dispatch:
            self._after_dispatch.remove(hook)

    def doPoll(self, timeout: float | None) -> None:
        try:
            ready = self._poller.poll(-1 if timeout is None else timeout, len(self._selectables))
        except OSError as exc:
            if exc.errno == errno.EINTR:
                return
            raise
        handle = self._doReadOrWrite
        selectables = self._selectables
        self.dispatching = True
        try:
            for fd, event in ready:
                selectable = selectables.get(fd)
                if selectable is None:  # closed by an earlier handler of this poll
                    continue
                if event == _INPUT_ONLY and selectable.fileno() != -1:
                    self._read(selectable, fd)  # the usual event: what the generic path does
                    continue
                try:
                    handle(selectable, fd, event)
                except Exception:
                    log.exception("error handling a ready socket (fd %d)", fd)
        finally:
            self.dispatching = False
        for hook in tuple(self._after_dispatch):
            try:
                hook()
            except Exception:
                log.exception("error in an after-dispatch hook")

    doIteration = doPoll

    def _read(self, selectable: Any, fd: int) -> None:
        """Input and nothing else is ready on ``selectable``: read it, and disconnect it when
        the read says so or fails, as Twisted's generic dispatch would (a read that returns
        a reason was a read; one that raised was not, for the half-close rule)."""
        try:
            why = selectable.doRead()
            in_read = True
        except Exception as exc:
            log.exception("error reading a ready socket (fd %d)", fd)
            why, in_read = exc, False
        if why:
            try:
                self._disconnectSelectable(selectable, why, in_read)
            except Exception:
                log.exception("error handling a ready socket (fd %d)", fd)


def install() -> bool:
    """Install it as the global reactor; False (nothing done) when a reactor is already
    installed or epoll is missing (not Linux)."""
    import sys

    if "twisted.internet.reactor" in sys.modules:
        return False
    try:
        reactor = LeanEPollReactor()
    except (AttributeError, OSError):  # no select.epoll
        return False
    from twisted.internet.main import installReactor

    installReactor(reactor)
    return True
