"""One remoting connection on asyncio: requests matched to responses by opaque.

asyncio glue only; opaques and the answer to a server's request are the pure
``client_push.wire.request_table``'s. Every request's Future ends exactly once: with the
response, a ``RequestTimeoutError``, a ``ConnectionLostError``, or cancelled by its caller,
which takes its entry and its timer out of the table at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from client_push.aio.clock import Clock, TimerHandle
from client_push.errors import ConnectionLostError, RequestTimeoutError
from client_push.wire.request_table import RequestTable, answer_server_request
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, encode_command

log = logging.getLogger("client_push.wire.remoting")

RequestHandler = Callable[["RemotingConnection", RemotingCommand], "RemotingCommand | None"]
"""Handles a request the server initiated; returns the response to send (ignored for oneway)."""


class RemotingConnection(asyncio.Protocol):
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        max_frame_size: int,
        on_request: RequestHandler | None = None,
        *,
        label: str = "?",
    ) -> None:
        self._loop = loop
        self._clock = clock
        self._decoder = FrameDecoder(max_frame_size)
        self._on_request = on_request
        self._pending: RequestTable[tuple[asyncio.Future[RemotingCommand], TimerHandle]] = (
            RequestTable()
        )
        self._transport: asyncio.Transport | None = None
        self.label = label
        self.connected = False
        self.lost: asyncio.Future[None] = loop.create_future()
        """Done (with None) when the connection closes, for whatever reason."""
        self.counters: Counter[str] = Counter()

    @property
    def pending(self) -> int:
        """Requests sent and not yet answered, timed out, failed or cancelled."""
        return len(self._pending)

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self._transport = transport
        self.connected = True

    def data_received(self, data: bytes) -> None:
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            self.counters["frames_refused"] += 1
            log.warning("closing connection to %s: %s", self.label, exc.remark)
            self.abort()
            return
        for cmd in commands:
            if cmd.is_response:
                self._response(cmd)
            else:
                self._request(cmd)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connected = False
        why = str(exc) if exc is not None else "closed"
        for future, timer in self._pending.drain():
            timer.cancel()
            if not future.done():
                future.set_exception(ConnectionLostError(f"connection to {self.label} lost: {why}"))
        if not self.lost.done():
            self.lost.set_result(None)

    # -- requests ------------------------------------------------------------------------------

    def request(self, cmd: RemotingCommand, timeout_ms: int) -> asyncio.Future[RemotingCommand]:
        """Send ``cmd`` (its opaque is assigned here); the Future of the matching response."""
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        if not self.connected:
            future.set_exception(ConnectionLostError(f"not connected to {self.label}"))
            return future
        opaque = self._pending.allocate()
        cmd.opaque = opaque
        timer = self._clock.call_later(
            timeout_ms / 1000.0, partial(self._timed_out, opaque, cmd.code, timeout_ms)
        )
        self._pending.put(opaque, (future, timer))
        future.add_done_callback(partial(self._given_up, opaque))
        self._write(encode_command(cmd))
        self.counters["requests_sent"] += 1
        return future

    def oneway(self, cmd: RemotingCommand) -> None:
        if self.connected:
            self._write(encode_command(cmd))
            self.counters["oneway_sent"] += 1

    def close(self) -> None:
        if self._transport is not None and self.connected:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def _write(self, data: bytes) -> None:
        if self._transport is not None:
            self._transport.write(data)

    def _given_up(self, opaque: int, future: asyncio.Future[RemotingCommand]) -> None:
        """A cancelled request leaves nothing behind: its entry and timer go now; a late
        answer is then counted as one."""
        if not future.cancelled():
            return
        entry = self._pending.pop(opaque)
        if entry is not None:
            entry[1].cancel()
            self.counters["requests_cancelled"] += 1

    def _timed_out(self, opaque: int, code: int, timeout_ms: int) -> None:
        entry = self._pending.pop(opaque)
        if entry is None:
            return
        self.counters["requests_timed_out"] += 1
        future = entry[0]
        if not future.done():
            future.set_exception(
                RequestTimeoutError(
                    f"request code {code} to {self.label} got no response in {timeout_ms} ms"
                )
            )

    def _response(self, cmd: RemotingCommand) -> None:
        entry = self._pending.pop(cmd.opaque)
        if entry is None:
            # Timed out or given up already; the caller has its answer.
            self.counters["late_responses"] += 1
            log.debug("response with unknown opaque %d from %s dropped", cmd.opaque, self.label)
            return
        future, timer = entry
        timer.cancel()
        if not future.done():
            future.set_result(cmd)

    def _request(self, cmd: RemotingCommand) -> None:
        self.counters["requests_received"] += 1
        on_request = self._on_request
        handle = None if on_request is None else partial(on_request, self)
        response = answer_server_request(handle, cmd, self.label)
        if response is not None and self.connected:
            self._write(encode_command(response))

    def __repr__(self) -> str:
        state = "connected" if self.connected else "closed"
        return f"<RemotingConnection {self.label} {state} pending={self.pending}>"
