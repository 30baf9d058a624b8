"""The owner of the connections: the :class:`~namesrv.net.connection.ConnectionOwner` they
talk to.

It admits them (:mod:`namesrv.net.admission`), bounds their input and their idle time
(:mod:`namesrv.net.input_bounds`), answers or refuses what cannot be read, holds their output
while the reactor hands out a poll's ready sockets and writes it in one burst after, and hands
every frame the route cache cannot answer up to ``frame_received``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from namesrv.config import ServerConfig
from namesrv.net.admission import Admission
from namesrv.net.connection import CachedAnswers, NamesrvConnection, PollState
from namesrv.net.input_bounds import InputBounds
from namesrv.ops.clock import Clock, DelayedCall
from protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, ResponseCode, SerializeType
from protocol.errors import FrameError
from protocol.frame import RemotingCommand, SplitFrame, encode_command
from protocol.paced_log import PacedLog

log = logging.getLogger(__name__)


class SharedSender(Protocol):
    """A connection that may be sent an answer from a shared body."""

    @property
    def peer(self) -> str: ...

    def send(self, data: bytes) -> None: ...

    def send_shared(self, head: bytes, body: bytes) -> None: ...


FrameHandler = Callable[[NamesrvConnection, RemotingCommand, "bytes | SplitFrame"], None]


class ConnectionHub:
    """Implements :class:`~namesrv.net.connection.ConnectionOwner` for every connection of
    the server; ``departed`` hears of each admitted connection once it is gone."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        reactor: Clock,
        clock: Clock,
        counters: Counter[str],
        route_cache: CachedAnswers,
        frame_received: FrameHandler,
        departed: Callable[[NamesrvConnection], None],
        keeps_idle: Callable[[NamesrvConnection], object],
        never_evict: Callable[[NamesrvConnection], object],
    ) -> None:
        """``reactor`` runs the calls of the next turn; ``clock`` tells the time; a connection
        for which ``keeps_idle`` is true (it holds subscriptions) is never closed for being
        idle, and is closed to admit another at the total bound only after its host's others;
        one for which ``never_evict`` is true (a broker's channel, a request being served over
        several turns) is never closed to admit another."""
        self.config = config
        self._reactor = reactor
        self._clock = clock
        self._seconds = clock.seconds
        self._counters = counters
        self.route_cache = route_cache
        self.frame_received = frame_received
        """The frames' way up: called as is, one call per frame."""
        self._departed = departed
        self._keeps_idle = keeps_idle
        self._never_evict = never_evict
        self.peer_log = PacedLog(log, clock.seconds)
        """Lines a peer can provoke, paced per kind."""
        self.admission = Admission(
            config,
            counters,
            self.peer_log,
            self._may_evict,
            subscribed=keeps_idle,
            clock=clock.seconds,
        )
        self.connections = self.admission.connections
        self.input = InputBounds(config, counters, self.peer_log)
        self.dispatching_reactor: PollState | None = None
        self._held_output: list[NamesrvConnection] = []
        """Connections holding output until the reactor's current poll is handled."""
        self._shared: dict[int, list[Any]] = {}
        """id of a body answers are sent from → [the body, how many connections send it]."""
        self.shared_output = 0
        """What answers sent from shared bodies may hold: each distinct body once, and the
        output bound once per connection sending one (its queued slices)."""

    def now_ms(self) -> int:
        # ``ops.clock.now_ms`` written out: every read asks (a call fewer per request).
        return int(self._seconds() * 1000)

    def figures(self) -> dict[str, int]:
        """The connections' figures for the server's stats."""
        return {
            "connections": len(self.connections),
            "buffered_input_bytes": self.input.buffered,
            "shared_output_bytes": self.shared_output,
            "log_lines_suppressed": self.peer_log.dropped,
        }

    def peer_of(self, conn_id: object) -> str:
        """``HOST:PORT`` of the open connection ``conn_id`` names; "" when none is open."""
        conn = self.connections.get(conn_id) if isinstance(conn_id, int) else None
        return conn.peer if conn is not None else ""

    def call_soon(self, call: Callable[[], object]) -> DelayedCall:
        return self._reactor.callLater(0, call)

    # -- admission ---------------------------------------------------------------------------

    def connection_made(self, conn: NamesrvConnection) -> bool:
        admission = self.admission
        if admission.full:
            victim = admission.make_room(conn, self.now_ms())
            if victim is not None:
                self.connection_lost(victim)  # released now: its room is the newcomer's
                victim.close(abort=True)
        return admission.admit(conn)

    def _may_evict(self, conn: NamesrvConnection) -> bool:
        """Whether ``conn`` may be closed to admit another at the total bound: not while it
        is closing, holds input (part of a frame, requests waiting for output or in service),
        or is one ``never_evict`` names."""
        return not (conn.closing or self.input.holds(conn) or self._never_evict(conn))

    def connection_lost(self, conn: NamesrvConnection) -> None:
        self.input.release(conn)
        if self.admission.release(conn):
            self._departed(conn)

    def close_all(self) -> None:
        """Close every connection now, releasing each at once (its loss is reported later)."""
        for conn in list(self.connections.values()):
            try:
                self.connection_lost(conn)
            except Exception:  # its state is lost with it; the others must still close
                log.exception("releasing connection %d", conn.conn_id)
            transport: Any = conn.transport
            transport.loseConnection()

    # -- input -------------------------------------------------------------------------------

    def input_changed(
        self, conn: NamesrvConnection, partial: int, kept: int, *, frame_begun: bool = False
    ) -> None:
        for shed in self.input.held(conn, partial, kept, self.now_ms(), frame_begun=frame_begun):
            shed.close(abort=True)

    def stream_refused(self, conn: NamesrvConnection, error: FrameError) -> None:
        """The stream cannot be read on: count by kind, log (rate-limited), close."""
        self._counters["frames_refused"] += 1
        self._counters[f"decode_failures.{error.kind}"] += 1
        self.peer_log.warning(
            error.kind, "closing connection %s from %s: %s", conn.conn_id, conn.peer, error.remark
        )
        self.input.release(conn)
        conn.close(abort=True)

    def header_refused(
        self, conn: NamesrvConnection, error: FrameError, frame: bytes | SplitFrame
    ) -> None:
        """A header that failed to decode in a sound frame: answer the error, keep serving."""
        self._counters["headers_refused"] += 1
        self._counters[f"decode_failures.{error.kind}"] += 1
        self.peer_log.warning(error.kind, "refused a request from %s: %s", conn.peer, error.remark)
        if error.flag & (FLAG_RESPONSE | FLAG_ONEWAY) or error.opaque is None:
            return
        head = frame.head if isinstance(frame, SplitFrame) else frame
        response = RemotingCommand(
            code=error.code,
            opaque=error.opaque,
            flag=FLAG_RESPONSE,
            language=LanguageCode.JAVA,
            remark=error.remark,
            serialize_type=SerializeType.ROCKETMQ if head[0] == 1 else SerializeType.JSON,
        )
        conn.send(encode_command(response))

    def housekeep(self) -> None:
        """Close connections whose frame is overdue, and idle ones that hold no subscription."""
        for conn in self.input.overdue(self.connections.values(), self.now_ms(), self._keeps_idle):
            # Aborted: output still unsent after the idle period is never going to be read.
            conn.close(abort=True)

    # -- output ------------------------------------------------------------------------------

    def requests_dropped(self, conn: NamesrvConnection, count: int) -> None:
        self._counters["kept_requests_dropped"] += count

    def send_shared(
        self, conn: SharedSender, request: RemotingCommand, head: bytes, body: bytes
    ) -> None:
        """Answer ``request`` from a (shared) large ``body`` while the total such answers may
        hold allows; past ``server.max_shared_output_bytes`` it is answered SYSTEM_BUSY."""
        if self.shared_answer_admitted(body):
            conn.send_shared(head, body)
            return
        self._counters["shared_answers_refused"] += 1
        self.peer_log.warning(
            "shared_output",
            "answered %s from %s SYSTEM_BUSY: large answers not yet read hold %d bytes, "
            "server.max_shared_output_bytes=%d",
            request.code,
            conn.peer,
            self.shared_output,
            self.config.max_shared_output_bytes,
        )
        busy = request.make_response(
            ResponseCode.SYSTEM_BUSY,
            "large answers not yet read by their clients fill server.max_shared_output_bytes; "
            "retry later",
        )
        conn.send(encode_command(busy))

    def shared_answer_admitted(self, body: bytes) -> bool:
        """Whether one more connection may be sent an answer from ``body`` within
        ``server.max_shared_output_bytes`` (a body already being sent costs only the
        connection's output bound)."""
        cost = self.config.output_buffer_bytes
        if id(body) not in self._shared:
            cost += len(body)
        return self.shared_output + cost <= self.config.max_shared_output_bytes

    def shared_answer_began(self, conn: NamesrvConnection, body: bytes) -> None:
        entry = self._shared.get(id(body))
        if entry is None:
            entry = self._shared[id(body)] = [body, 0]
            self.shared_output += len(body)
        entry[1] += 1
        self.shared_output += self.config.output_buffer_bytes

    def shared_answer_ended(self, conn: NamesrvConnection, body: bytes) -> None:
        entry = self._shared.get(id(body))
        if entry is None:
            return
        self.shared_output -= self.config.output_buffer_bytes
        entry[1] -= 1
        if entry[1] <= 0:
            del self._shared[id(body)]
            self.shared_output -= len(body)

    def hold_output_while_dispatching(self, reactor: PollState) -> None:
        """Hold output while ``reactor`` is dispatching a poll; with ``after_dispatch`` (the
        lean reactor) it is written after each poll, else the caller calls :meth:`write_held`."""
        self.dispatching_reactor = reactor
        after_dispatch = getattr(reactor, "after_dispatch", None)
        if after_dispatch is not None:
            after_dispatch(self.write_held)

    def stop_holding_output(self) -> None:
        """Write what is held, and hold nothing more."""
        self.write_held()
        reactor, self.dispatching_reactor = self.dispatching_reactor, None
        remove = getattr(reactor, "remove_after_dispatch", None)
        if remove is not None:
            remove(self.write_held)

    def output_held(self, conn: NamesrvConnection) -> None:
        self._held_output.append(conn)

    @property
    def holding(self) -> int:
        """Connections holding output for the end of the reactor's poll."""
        return len(self._held_output)

    def write_held(self) -> None:
        """Write what connections held while the reactor handled its poll's ready sockets."""
        if not self._held_output:
            return
        conns, self._held_output = self._held_output, []
        for conn in conns:
            try:
                conn.write_held()
            except Exception:  # one connection's failure must not keep the others' output
                log.exception("writing the held output of connection %d", conn.conn_id)
