"""Bounds on what a peer makes the server hold and wait for: input and time.

Input: the bytes of partly received frames, of whole requests a connection keeps until its
output drains, and of requests served over several reactor turns (large registers), count over
all connections against ``server.max_buffered_input_bytes``; past it the connection holding the
most is shed. Time: a frame begun must be complete within
``server.frame_timeout_ms``, and a connection with no request for ``server.idle_timeout_ms``
is closed unless it holds subscriptions.

Connections report what they hold (:meth:`InputBounds.held`); the bounds keep their own table
and return the connections to close, which the caller closes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from namesrv.config import ServerConfig
from protocol.paced_log import PacedLog

if TYPE_CHECKING:
    from namesrv.net.connection import NamesrvConnection

log = logging.getLogger(__name__)


class InputBounds:
    def __init__(self, config: ServerConfig, counters: Counter[str], peer_log: PacedLog) -> None:
        self._config = config
        self._counters = counters
        self._peer_log = peer_log
        self.buffered = 0
        """Bytes held over all connections (partial frames and kept requests)."""
        self._held: dict[NamesrvConnection, int] = {}
        """Connections holding input, and how much."""
        self._partial_since: dict[NamesrvConnection, int] = {}
        """When the frame now partly received on a connection began to arrive (ms)."""
        # The transport reads up to its buffer size at a time, on top of what is held: that
        # read is kept inside the bound too (never below one whole frame).
        self._bound = max(
            config.max_frame_size, config.max_buffered_input_bytes - config.output_buffer_bytes
        )

    def held(
        self,
        conn: NamesrvConnection,
        partial: int,
        kept: int,
        now_ms: int,
        *,
        frame_begun: bool = False,
    ) -> list[NamesrvConnection]:
        """Account ``conn``'s input: ``partial`` bytes of a frame in arrival (memory allocated,
        not just received) and ``kept`` bytes of whole requests (kept or in service). The
        frame timeout runs from when the partial frame began: from this report when
        ``frame_begun`` (the read that brought it completed others), so a peer streaming
        pipelined requests, every read ending inside one, is never overdue. Past
        the bound, the biggest holders are released, counted and returned, to be closed,
        until the total is back under it; a connection whose input shrank never causes a
        shed."""
        held = partial + kept
        before = self._held.get(conn, 0)
        if not held and not before:
            return []
        if held:
            self._held[conn] = held
        else:
            del self._held[conn]
        delta = held - before
        self.buffered += delta
        if partial == 0:  # kept whole frames are not overdue: the peer is not reading
            self._partial_since.pop(conn, None)
        elif frame_begun or conn not in self._partial_since:
            self._partial_since[conn] = now_ms
        if delta <= 0 or self.buffered <= self._bound:
            return []
        shed: list[NamesrvConnection] = []
        holders = self._held
        while self.buffered > self._bound:
            biggest = max(
                (c for c in holders if not c.closing), key=holders.__getitem__, default=None
            )
            if biggest is None:
                break
            self._counters["input_bound_closes"] += 1
            self._peer_log.warning(
                "input_bound",
                "closing connection %s from %s: partly received frames and requests waiting "
                "for their output or in service hold %d bytes over all connections, past "
                "server.max_buffered_input_bytes=%d less one read; it held the most (%d)",
                biggest.conn_id,
                biggest.peer,
                self.buffered,
                self._config.max_buffered_input_bytes,
                holders[biggest],
            )
            self.release(biggest)
            shed.append(biggest)
        return shed

    def holds(self, conn: NamesrvConnection) -> bool:
        """``conn`` holds part of a frame or whole requests waiting for its output."""
        return conn in self._held

    def release(self, conn: NamesrvConnection) -> None:
        """``conn`` holds nothing any more (it is closing, or gone)."""
        self.buffered -= self._held.pop(conn, 0)
        self._partial_since.pop(conn, None)

    def overdue(
        self,
        connections: Iterable[NamesrvConnection],
        now_ms: int,
        keeps_idle: Callable[[NamesrvConnection], object],
    ) -> list[NamesrvConnection]:
        """The connections to close now: those whose frame is overdue (released here), and
        idle ones for which ``keeps_idle`` is false. Counted and logged."""
        cfg = self._config
        frame_deadline = now_ms - cfg.frame_timeout_ms
        idle_deadline = now_ms - cfg.idle_timeout_ms if cfg.idle_timeout_ms else None
        since = self._partial_since
        out: list[NamesrvConnection] = []
        for conn in connections:
            if conn.closing:
                continue
            begun = since.get(conn)
            if begun is not None and begun <= frame_deadline:
                self._counters["frame_timeouts"] += 1
                self._peer_log.warning(
                    "frame_timeout",
                    "closing connection %s from %s: a frame begun %d ms ago is still "
                    "incomplete (%d bytes), past server.frame_timeout_ms=%d",
                    conn.conn_id,
                    conn.peer,
                    now_ms - begun,
                    self._held.get(conn, 0),
                    cfg.frame_timeout_ms,
                )
                self.release(conn)
                out.append(conn)
            elif (
                idle_deadline is not None
                and conn.last_request_ms <= idle_deadline
                and not keeps_idle(conn)
            ):
                self._counters["idle_closes"] += 1
                log.debug("closing connection %s from %s: idle", conn.conn_id, conn.peer)
                out.append(conn)
        return out
