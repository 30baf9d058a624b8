"""One remoting connection from the client's side: requests matched to responses by opaque.

Written once over the runtime (``client_push.runtime.interface``): the loop's adapter feeds
it bytes and tells it when its transport's buffer is full. Every request's future ends exactly
once: with the response, a ``RequestTimeoutError``, a ``ConnectionLostError``, or cancelled by
its caller, which takes its entry and timer out of the table at once.

Bounded whatever the peer does: requests in flight are limited by count and by bytes, and one
past either limit fails at once (``RequestsInFlightError``); while the peer does not read
(the transport's buffer above its mark) nothing more is written to it, and what waits to go
out is part of those bytes; a malformed frame closes the connection with a paced warning.
Input is read as it is processed: what was received is handled ``input_bytes_per_turn`` per
turn of the loop (the work it starts runs in between), and while more than
``max_unprocessed_input_bytes`` wait, or the answers held for a peer that does not read pass
that bound (each counted with its bookkeeping), the transport is not read: a peer that sends
requests without reading the answers waits for its own reading. A closing connection handles
no more input.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from client_push.errors import ConnectionLostError, RequestsInFlightError, RequestTimeoutError
from client_push.runtime.interface import (
    Future,
    Runtime,
    Target,
    Timer,
    Tls,
    Transport,
    settle,
)
from client_push.wire.request_table import RequestTable, answer_server_request
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, encode_command
from protocol.paced_log import PacedLog
from protocol.tls_refusal import is_tls_refusal

log = logging.getLogger("client_push.wire.remoting")

TLS_FAILURE_SIGNS = ("ConnectionResetError", "SSL", "EOF")
"""Words of a failed connect that mean the TLS handshake failed, not the connect itself."""

HELD_WRITE_OVERHEAD = 160
"""Bytes a held-back write costs beyond its data (its bytes object and its outbox entry)."""

RequestHandler = Callable[["RemotingConnection", RemotingCommand], "RemotingCommand | None"]
"""Handles a request the server initiated; returns the response to send (ignored for oneway)."""


@dataclass(frozen=True, slots=True)
class ConnectionBounds:
    max_frame_size: int = 16 * 1024 * 1024
    max_requests: int = 10_000
    """Requests sent on one connection and not yet answered."""
    max_request_bytes: int = 64 * 1024 * 1024
    """Their encoded bytes, those not yet written out included."""
    write_buffer_bytes: int = 256 * 1024
    """The transport's buffer above which the peer counts as not reading."""
    max_unprocessed_input_bytes: int = 4 * 1024 * 1024
    """Bytes received and not yet handled above which the transport is not read."""
    input_bytes_per_turn: int = 256 * 1024
    """Received bytes handled in one turn of the loop; the rest waits for the next."""


class RemotingConnection:
    def __init__(
        self,
        runtime: Runtime,
        bounds: ConnectionBounds,
        on_request: RequestHandler | None = None,
        *,
        label: str = "?",
        paced: PacedLog | None = None,
        counters: Counter[str] | None = None,
    ) -> None:
        """``counters``/``paced``: shared by the connections of one owner, so what a peer
        provokes is counted and paced across its reconnects."""
        self._runtime = runtime
        self._clock = runtime.clock
        self.bounds = bounds
        self._decoder = FrameDecoder(bounds.max_frame_size)
        self._on_request = on_request
        self._pending: RequestTable[tuple[Future[RemotingCommand], Timer, int]] = RequestTable()
        self._transport: Transport | None = None
        self._paused = False
        self._outbox: OrderedDict[int, bytes] = OrderedDict()
        """Writes held back while the peer does not read, in order: a request's under its
        opaque (it leaves with its table entry: a request timed out or given up is never
        written), anything else under a negative key."""
        self._outbox_keys = itertools.count(-1, -1)
        self._outbox_bytes = 0
        """Bytes of the held-back writes that are not requests."""
        self.pending_bytes = 0
        """Encoded bytes of the requests in the table."""
        self.label = label
        self.connected = False
        self.tls = False
        self.heard = False
        """A frame other than a TLS refusal came from the peer: the connection works."""
        self.lost: Future[None] = runtime.future()
        """Done (with None) when the connection closes, for whatever reason."""
        self.counters: Counter[str] = Counter() if counters is None else counters
        self._paced = paced or PacedLog(log, self._clock.time, burst=1)
        self._input: deque[bytes] = deque()
        """Reads not handled yet, in order."""
        self.input_bytes = 0
        """Their bytes."""
        self._reading_paused = False
        self._drain_call: Timer | None = None
        self._closing = False

    @property
    def pending(self) -> int:
        """Requests sent and not yet answered, timed out, failed or cancelled."""
        return len(self._pending)

    @property
    def writing_paused(self) -> bool:
        return self._paused

    @property
    def held_back(self) -> int:
        """Writes waiting for the peer to read."""
        return len(self._outbox)

    async def open(self, addr: str, timeout_ms: int, tls: Tls | None = None) -> RemotingConnection:
        """Connect to ``addr``; ``ConnectionLostError`` when that fails within ``timeout_ms``."""
        target = Target(addr, timeout_ms, tls, self.bounds.write_buffer_bytes)
        self.tls = tls is not None
        try:
            await self._runtime.connect(target, self)
        except ConnectionLostError as exc:
            # A runtime that connects through the handshake fails here when the peer is no
            # TLS server: it resets the connection or answers what is no TLS record.
            if self.tls and any(sign in str(exc) for sign in TLS_FAILURE_SIGNS):
                self.counters["tls_failed"] += 1
            raise
        return self

    # -- the runtime's events ------------------------------------------------------------------

    def connection_made(self, transport: Transport) -> None:
        self._transport = transport
        self.connected = True

    def data_received(self, data: bytes) -> None:
        if self._closing or not data:
            return  # a closing connection owes nothing more to what it is sent
        self._input.append(data)
        self.input_bytes += len(data)
        counters = self.counters
        if self.input_bytes > counters["input_held_max_bytes"]:
            counters["input_held_max_bytes"] = self.input_bytes
        bound = self.bounds.max_unprocessed_input_bytes
        if self.input_bytes > bound:
            self._pause_reading()
        if self._drain_call is None:
            self._drain()

    def _answers_held(self) -> bool:
        """Whether the answers held for a peer that does not read are past the input bound:
        handling more of its requests would only hold more."""
        return self._paused and self._outbox_bytes > self.bounds.max_unprocessed_input_bytes

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None and self.connected:
            self._reading_paused = True
            self.counters["input_paused"] += 1
            self._transport.pause_reading()

    def _maybe_resume_reading(self) -> None:
        if (
            self._reading_paused
            and not self._answers_held()
            and self.input_bytes <= self.bounds.max_unprocessed_input_bytes // 2
            and self._transport is not None
            and self.connected
        ):
            self._reading_paused = False
            self._transport.resume_reading()

    def _drain(self) -> None:
        """Handle up to ``input_bytes_per_turn`` of what was received; the rest next turn."""
        self._drain_call = None
        budget = self.bounds.input_bytes_per_turn
        handled = 0
        while self._input and handled < budget and not self._closing:
            if self._answers_held():
                self.counters["input_held_for_output"] += 1
                self._pause_reading()
                return  # resume_writing hands the rest on
            data = self._input.popleft()
            self.input_bytes -= len(data)
            handled += len(data)
            try:
                commands = self._decoder.feed(data)
            except FrameError as exc:
                self.counters["frames_refused"] += 1
                self._paced.warning("frame", "closing connection to %s: %s", self.label, exc.remark)
                self._drop_input()
                self.abort()
                return
            for cmd in commands:
                if is_tls_refusal(cmd):
                    # TLS mismatches are counted apart (``tls_required``, ``tls_failed``): no
                    # retry mends them, and a command stops on them.
                    self.counters["tls_required"] += 1
                    self._paced.warning("tls", "%s: %s", self.label, cmd.remark)
                elif not self.heard:
                    self.heard = True
                    self.counters["connections_answered"] += 1
                if cmd.is_response:
                    self._response(cmd)
                else:
                    self._request(cmd)
        if self._closing:
            self._drop_input()
            return
        if self._input:
            self._drain_call = self._runtime.call_soon(self._drain)
            self.counters["input_turns_deferred"] += 1
        self._maybe_resume_reading()

    def _drop_input(self) -> None:
        self._input.clear()
        self.input_bytes = 0
        if self._drain_call is not None:
            self._drain_call.cancel()
            self._drain_call = None

    def connection_lost(self, why: str) -> None:
        if self.tls and not self.heard:
            self.counters["tls_failed"] += 1
        self.connected = False
        self._closing = True
        self._drop_input()
        self._outbox.clear()
        self._outbox_bytes = 0
        for future, timer, _size in self._pending.drain():
            timer.cancel()
            if not future.done():
                future.set_exception(ConnectionLostError(f"connection to {self.label} lost: {why}"))
        self.pending_bytes = 0
        settle(self.lost, None)

    def pause_writing(self) -> None:
        self._paused = True
        self.counters["writes_paused"] += 1

    def resume_writing(self) -> None:
        """Write what was held back, in order, until the transport is full again."""
        self._paused = False
        outbox = self._outbox
        while outbox and not self._paused and self._transport is not None and self.connected:
            key, data = outbox.popitem(last=False)
            if key < 0:
                self._outbox_bytes -= len(data) + HELD_WRITE_OVERHEAD
            self._transport.write(data)
        if self._input and self._drain_call is None and not self._answers_held():
            self._drain_call = self._runtime.call_soon(self._drain)
        self._maybe_resume_reading()

    # -- requests ------------------------------------------------------------------------------

    def request(self, cmd: RemotingCommand, timeout_ms: int) -> Future[RemotingCommand]:
        """Send ``cmd`` (its opaque is assigned here); the future of the matching response."""
        future: Future[RemotingCommand] = self._runtime.future()
        if not self.connected:
            future.set_exception(ConnectionLostError(f"not connected to {self.label}"))
            return future
        opaque = self._pending.allocate()
        cmd.opaque = opaque
        data = encode_command(cmd)
        bounds = self.bounds
        if (
            len(self._pending) >= bounds.max_requests
            or self.pending_bytes + len(data) > bounds.max_request_bytes
        ):
            self.counters["requests_refused_in_flight"] += 1
            future.set_exception(
                RequestsInFlightError(
                    f"{len(self._pending)} requests ({self.pending_bytes} bytes) in flight to "
                    f"{self.label}: at most {bounds.max_requests} requests and "
                    f"{bounds.max_request_bytes} bytes"
                )
            )
            return future
        timer = self._clock.call_later(
            timeout_ms / 1000.0, partial(self._timed_out, opaque, cmd.code, timeout_ms)
        )
        self._pending.put(opaque, (future, timer, len(data)))
        self.pending_bytes += len(data)
        future.add_done_callback(partial(self._given_up, opaque))
        self._write(data, opaque)
        self.counters["requests_sent"] += 1
        return future

    def oneway(self, cmd: RemotingCommand) -> None:
        if self.connected:
            self._write(encode_command(cmd))
            self.counters["oneway_sent"] += 1

    def close(self) -> None:
        """Close once what is written has gone out; at once when the peer is not reading,
        since what waits for it would only hold the close until its deadline."""
        self._closing = True
        self._drop_input()
        if self._transport is not None and self.connected:
            if self._paused:
                self.counters["close_aborted"] += 1
                self._transport.abort()
            else:
                self._transport.close()

    def abort(self) -> None:
        self._closing = True
        self._drop_input()
        if self._transport is not None:
            self._transport.abort()

    def _write(self, data: bytes, opaque: int | None = None) -> None:
        """Write ``data`` (a request's when ``opaque`` is given), or hold it back while the
        peer does not read."""
        if self._transport is None or not self.connected:
            return
        if not self._paused and not self._outbox:
            self._transport.write(data)
            return
        # A request's bytes are in ``pending_bytes`` already; anything else (an answer, a
        # oneway) may hold at most the same bound.
        if opaque is None:
            cost = len(data) + HELD_WRITE_OVERHEAD
            if self._outbox_bytes + cost > self.bounds.max_request_bytes:
                self.counters["writes_dropped"] += 1
                self._paced.warning("dropped", "%s does not read: a write was dropped", self.label)
                return
            self._outbox_bytes += cost
            if self._outbox_bytes > self.counters["held_writes_max_bytes"]:
                self.counters["held_writes_max_bytes"] = self._outbox_bytes
            opaque = next(self._outbox_keys)
        self._outbox[opaque] = data

    def _forget(self, opaque: int, entry: tuple[Future[RemotingCommand], Timer, int]) -> None:
        entry[1].cancel()
        self.pending_bytes -= entry[2]
        self._outbox.pop(opaque, None)

    def _given_up(self, opaque: int, future: Any) -> None:
        """A cancelled request leaves nothing behind: its entry and timer go now; a late
        answer is then counted as one."""
        if not future.cancelled():
            return
        entry = self._pending.pop(opaque)
        if entry is not None:
            self._forget(opaque, entry)
            self.counters["requests_cancelled"] += 1

    def _timed_out(self, opaque: int, code: int, timeout_ms: int) -> None:
        entry = self._pending.pop(opaque)
        if entry is None:
            return
        self._forget(opaque, entry)
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
        self._forget(cmd.opaque, entry)
        future = entry[0]
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


class Deadline:
    """A moment ``timeout_ms`` of the loop's own time from now (it bounds real socket work):
    ``expired`` is done then. Started when a close begins, so everything the close does counts
    against it."""

    def __init__(self, runtime: Runtime, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.expired: Future[None] = runtime.future()
        self._timer = runtime.call_later_real(timeout_ms / 1000.0, self._expire)

    def _expire(self) -> None:
        settle(self.expired, None)

    def cancel(self) -> None:
        self._timer.cancel()


async def close_within(
    runtime: Runtime, conns: list[RemotingConnection], deadline: Deadline
) -> None:
    """Close ``conns``; those not closed by ``deadline`` (a peer that does not read keeps a
    graceful close waiting for ever) are aborted, and this returns."""
    open_ = [c for c in conns if c.connected]
    for conn in conns:
        conn.close()
    if not open_:
        deadline.cancel()
        return
    everything: Future[None] = runtime.future()
    left = len(open_)

    def one_lost(_f: Any) -> None:
        nonlocal left
        left -= 1
        if left == 0:
            settle(everything, None)

    for conn in open_:
        conn.lost.add_done_callback(one_lost)
    deadline.expired.add_done_callback(lambda _f: settle(everything, None))
    await everything
    deadline.cancel()
    stuck = [c for c in open_ if not c.lost.done()]
    for conn in stuck:
        conn.counters["close_aborted"] += 1
        conn.abort()
    if stuck:
        log.warning(
            "%d connection(s) did not close within %d ms: aborted", len(stuck), deadline.timeout_ms
        )
