"""One client or broker connection, and the door through which it talks to its owner.

A connection turns the bytes of its socket into frames and answers: a lookup the route cache
can answer is answered here, any other frame is handed up through
:meth:`ConnectionOwner.frame_received`. Everything a connection asks of the rest of the server
goes through :class:`ConnectionOwner`, and the owner learns the connection's state only from
what it reports (``input_changed``) or from its public attributes; it never writes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet import tcp
from twisted.internet.interfaces import IPushProducer
from twisted.internet.protocol import Protocol as TwistedProtocol
from twisted.python.failure import Failure
from zope.interface import implementer

from protocol.codes import SerializeType
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, SplitFrame, decode_frame

if TYPE_CHECKING:
    from namesrv.config import ServerConfig
    from namesrv.ops.clock import DelayedCall

log = logging.getLogger(__name__)

STREAM_SLICE_BYTES = 256 * 1024
"""Bytes of a shared answer's body copied into the output at a time (at most the output
bound): the output passes its bound by less than one slice."""


class CachedAnswers(Protocol):
    def answer(self, frame: bytes) -> bytes | None:
        """The whole encoded response to ``frame`` when it is known already, else None."""


class PollState(Protocol):
    dispatching: bool
    """True while the reactor hands out the ready sockets of one poll."""


class ConnectionOwner(Protocol):
    """What a connection may ask of whoever owns it: its one door up."""

    @property
    def route_cache(self) -> CachedAnswers:
        """Answers repeated lookups without decoding them (read once per read)."""

    @property
    def dispatching_reactor(self) -> PollState | None:
        """The reactor, when output is held until each of its polls is handled; else None."""

    def now_ms(self) -> int: ...

    def call_soon(self, call: Callable[[], object]) -> DelayedCall:
        """Run ``call`` on the reactor's next turn."""

    def connection_made(self, conn: NamesrvConnection) -> bool:
        """Admit ``conn``; False: refused (the connection aborts itself)."""

    def connection_lost(self, conn: NamesrvConnection) -> None: ...

    def input_changed(
        self, conn: NamesrvConnection, partial: int, kept: int, *, frame_begun: bool = False
    ) -> None:
        """``conn`` now holds ``partial`` bytes of a frame in arrival and ``kept`` bytes of
        whole requests: frames waiting for its output to drain, and requests being served
        over several reactor turns (reported whenever either is or was non-zero).
        ``frame_begun``: the read completed frames, so the partial one began in it."""

    def stream_refused(self, conn: NamesrvConnection, error: FrameError) -> None:
        """The stream cannot be read on: the owner counts it and closes ``conn``."""

    def header_refused(
        self, conn: NamesrvConnection, error: FrameError, frame: bytes | SplitFrame
    ) -> None:
        """A sound frame whose header failed to decode: the owner answers the error."""

    def frame_received(
        self, conn: NamesrvConnection, command: RemotingCommand, frame: bytes | SplitFrame
    ) -> None:
        """A decoded frame the route cache could not answer."""

    def output_held(self, conn: NamesrvConnection) -> None:
        """``conn`` holds output for the first time in this poll: call its
        :meth:`~NamesrvConnection.write_held` once the poll is handled."""

    def requests_dropped(self, conn: NamesrvConnection, count: int) -> None:
        """``count`` requests kept for later went unanswered: the connection is closing."""

    def shared_answer_began(self, conn: NamesrvConnection, body: bytes) -> None:
        """``conn`` sends an answer from ``body``, which other answers may share, as its output
        drains (:meth:`NamesrvConnection.send_shared`)."""

    def shared_answer_ended(self, conn: NamesrvConnection, body: bytes) -> None:
        """``conn`` sent all of ``body``, or dropped the rest of it (it is closing)."""


@implementer(IPushProducer)
class NamesrvConnection(TwistedProtocol):
    """One client or broker connection.

    It registers itself as the producer of its own transport: when unsent output passes
    ``server.output_buffer_bytes`` the transport pauses it, and the connection stops reading
    requests and is skipped by notification ticks until the output drains. That is what
    keeps memory bounded against a peer that writes but never reads.

    A read holds up to ``READ_SIZE`` bytes of requests (``namesrv.net.transport``), and small
    requests can have large answers (a route lookup of a topic on many brokers): answering all
    of them would accept a whole read's answers past the bound. So the answers stop at the one
    that crosses it; the read's remaining frames are kept (:attr:`_kept`), reading stops, and
    once the output has drained they are answered first, in order, before anything new is read.

    Requests served over several reactor turns (large registers) hold their frames until they
    are answered: the server tells the connection of each (:meth:`pending_began`,
    :meth:`pending_ended`), their bytes count with the rest of its input, and while they pass
    ``server.max_input_bytes_per_connection`` the connection is not read (the frames of a read
    after the one that crossed it are kept, as above).

    An answer with a large body (a listing of the whole registry, whose body every answer
    shares) is sent from that body as the output drains (:meth:`send_shared`): no more than
    the bound and one slice of it is ever queued, so a peer that does not read holds no copy
    of the body; meanwhile the connection is not read and any other output waits behind it.
    """

    # Tens of thousands of these are held: slots keep each one's state out of a per-instance
    # dict (Twisted's base protocol still has one, for the transport it is given).
    __slots__ = (
        "_after_stream",
        "_held",
        "_input_reported",
        "_kept",
        "_kept_call",
        "_out",
        "_out_bytes",
        "_output_bound",
        "_paused_by_transport",
        "_pending_bound",
        "_pending_held",
        "_socket_transport",
        "_stream",
        "_stream_body",
        "_stream_next",
        "_stream_slice",
        "closed",
        "closing",
        "conn_id",
        "decoder",
        "host",
        "kept_input",
        "last_request_ms",
        "max_header_size",
        "output_blocked",
        "owner",
        "peer",
        "pending_input",
        "serialize_type",
        "speaks_extension",
    )

    def __init__(self, owner: ConnectionOwner, conn_id: int, config: ServerConfig) -> None:
        self.owner = owner
        self.conn_id = conn_id
        self.peer = "?"
        self.host = "?"
        self.decoder = FrameDecoder(config.max_frame_size)
        self.max_header_size = config.max_header_size
        self.output_blocked = False
        self.serialize_type = SerializeType.JSON
        self.closed = False
        self._out: list[bytes] | None = None
        """While a read is being answered: its responses, written at once when it is done."""
        self._held: list[bytes] | None = None
        """Output held until the reactor has handled every ready socket of its poll."""
        self._output_bound = config.output_buffer_bytes
        self._out_bytes = 0
        """Bytes of the answers in :attr:`_out` sent by request handlers (not from the cache)."""
        self._kept: list[bytes | SplitFrame] | None = None
        """Frames of a read not answered yet: its answers had reached the output bound."""
        self._kept_call: DelayedCall | None = None
        """The pending call that answers :attr:`_kept` (the output did not need to drain)."""
        self._paused_by_transport = False
        """The transport paused this producer: it calls :meth:`resumeProducing` when drained."""
        self._socket_transport: Any = None
        """The plain TCP transport, when that is ours: see :meth:`_write_now`."""
        self.closing = False
        """Set when the server decided to close it: nothing more is read or answered."""
        self.speaks_extension = False
        """It sent a push-extension request (SUBSCRIBE/UNSUBSCRIBE): it may be sent GoAway."""
        self.last_request_ms = 0
        self.kept_input = 0
        """Bytes of :attr:`_kept`: they count with the partial frame in the buffered-input
        bound, for a kept frame may be a whole large one (up to ``server.max_frame_size``)."""
        self._input_reported = 0
        """Input bytes last reported to the owner: while not 0, every change is reported."""
        self.pending_input = 0
        """Bytes of the requests the server serves over several turns (:meth:`pending_began`)."""
        self._pending_bound = min(
            config.max_input_bytes_per_connection, config.max_buffered_input_bytes
        )
        self._pending_held = False
        """:attr:`pending_input` passed the bound: nothing is read until it is back under."""
        self._stream: list[memoryview] | None = None
        """What is left to send of an answer sent from a shared body (:meth:`send_shared`)."""
        self._stream_body = b""
        self._stream_next: tuple[bytes, bytes] | None = None
        """An answer from a shared body given during a read: it starts once the read's other
        answers are written."""
        self._after_stream: list[bytes] | None = None
        """Output given while an answer is sent from a shared body: it follows that answer."""
        self._stream_slice = min(STREAM_SLICE_BYTES, self._output_bound)

    @property
    def _transport(self) -> Any:
        return self.transport

    def note_extension(self, serialize_type: int | None) -> None:
        """The peer spoke the push extension: it may be sent GoAway; given a
        ``serialize_type`` (a SUBSCRIBE's), its notifications are encoded in it."""
        self.speaks_extension = True
        if serialize_type is not None:
            self.serialize_type = SerializeType(serialize_type)

    def connectionMade(self) -> None:
        peer = self._transport.getPeer()
        self.host = str(getattr(peer, "host", "?"))
        self.peer = f"{self.host}:{getattr(peer, 'port', '?')}"
        self.last_request_ms = self.owner.now_ms()
        if not self.owner.connection_made(self):
            self.closing = True
            self._transport.abortConnection()
            return
        transport: Any = self.transport
        if hasattr(transport, "bufferSize"):
            transport.bufferSize = self._output_bound
        transport.registerProducer(self, True)
        if isinstance(transport, tcp.Connection) and hasattr(transport, "socket"):
            self._socket_transport = transport

    def start_tls(self, tls: Any) -> None:
        """The peer opened a TLS handshake before sending anything else: from now on this
        connection reads and writes through ``tls``, a layer the port put over its socket
        (the port routes the socket's bytes to it). Admission, the idle and frame timeouts
        and the output bound carry on as they were."""
        self._transport.unregisterProducer()
        self._socket_transport = None
        self.transport = tls
        tls.registerProducer(self, True)

    def dataReceived(self, data: bytes) -> None:
        if self.closing:
            return
        try:  # the frames of ``data`` in order until the output reaches the bound, the rest kept
            frames = self._frames_to_answer(data)
            if frames is not None:
                self._answer(frames)
        except Exception as exc:  # a bug must cost this connection, never the server
            self.owner.stream_refused(
                self, FrameError(f"{type(exc).__name__} while reading: {exc}", kind="internal")
            )

    def _frames_to_answer(self, data: bytes) -> list[bytes | SplitFrame] | None:
        """The whole frames ``data`` completes, to answer now; None when there are none or
        they must wait (the stream is refused, the connection closes, or earlier frames are
        kept)."""
        try:
            frames = self.decoder.feed_raw(data)
        except FrameError as exc:
            self._report_input()
            self.owner.stream_refused(self, exc)
            return None
        if self._input_reported or self.decoder.allocated:  # the usual read holds nothing
            self._report_input(frame_begun=bool(frames))
        if not frames:
            self._refuse_oversized_header()
            return None
        if self.closing:
            return None
        if self._kept is not None:  # a wrapper (TLS) handing on more of a read after a stop
            self._kept.extend(frames)
            self._count_kept()
            return None
        if self._pending_held:  # not read meanwhile: a wrapper's rest of a read
            self._keep(iter(frames), output=False)
            return None
        return frames

    def _refuse_oversized_header(self) -> None:
        """A frame in arrival announces a header over ``max_header_size``: refused before its
        header arrives."""
        announced = self.decoder.pending_header_length
        if announced is not None and announced > self.max_header_size and not self.closing:
            self.owner.stream_refused(
                self,
                FrameError(
                    f"header of {announced} bytes exceeds the limit of {self.max_header_size}",
                    kind="header_too_large",
                ),
            )

    def _answer(self, frames: list[bytes | SplitFrame]) -> None:
        """Answer ``frames`` in order until the output reaches the bound; the rest are kept.
        The route cache answers the lookups it knows without a decode (the hot path)."""
        owner = self.owner
        self.last_request_ms = owner.now_ms()
        answer_from_cache = owner.route_cache.answer
        frame_received = owner.frame_received
        max_header = self.max_header_size
        out = self._out = []
        t = self._socket_transport
        if t is not None and not self._held:  # the usual case, without the property's detour
            room = self._output_bound - (len(t.dataBuffer) - t.offset + t._tempDataLen)
        else:
            room = self._output_bound - self.unsent_bytes
        frame_iter = iter(frames)
        try:
            if self.closing or self.closed:
                return
            for frame in frame_iter:
                # Only a handler or a refusal can close the connection (checked after each):
                # a cached answer goes out without asking again.
                if type(frame) is bytes:  # not a large frame's SplitFrame
                    answer = answer_from_cache(frame)
                    if answer is not None:
                        out.append(answer)
                        room -= len(answer)
                        if room > 0:
                            continue
                        self._keep(frame_iter)
                        return
                try:
                    command = decode_frame(frame, max_header)
                except FrameError as exc:
                    if exc.answerable:
                        owner.header_refused(self, exc, frame)
                    else:
                        self.decoder.fail()
                        owner.stream_refused(self, exc)
                        return
                else:
                    frame_received(self, command, frame)
                    if self._pending_held:  # its requests in service passed its share
                        self._keep(frame_iter, output=False)
                        return
                if self._out_bytes:  # what the handler sent (send() counts it)
                    room -= self._out_bytes
                    self._out_bytes = 0
                    if room <= 0:
                        self._keep(frame_iter)
                        return
                if self.closing or self.closed:
                    return
        finally:
            self._read_answered(out)

    def _read_answered(self, out: list[bytes]) -> None:
        """One write per read, however many frames it held: one syscall, and the reactor adds
        and drops write interest once (usually not at all: see _write)."""
        self._out = None
        if out and not self.closed:
            self._write(out[0] if len(out) == 1 else b"".join(out))
        if self._stream_next is not None:
            self._start_stream()
        if self._kept is not None:
            self._answer_kept_later()

    def _report_input(self, *, frame_begun: bool = False) -> None:
        """Tell the owner what input this connection holds (it may shed one, this one too).
        Once closed it reports nothing more: the owner has released it."""
        if self.closed:
            return
        partial = self.decoder.allocated
        whole = self.kept_input + self.pending_input
        held = partial + whole
        if held or self._input_reported:
            self._input_reported = held
            self.owner.input_changed(self, partial, whole, frame_begun=frame_begun)

    def pending_began(self, size: int) -> None:
        """A request of ``size`` bytes is served over several turns: it counts as input until
        :meth:`pending_ended`; past the connection's share, reading stops."""
        self.pending_input += size
        if self.pending_input > self._pending_bound and not self._pending_held:
            self._pending_held = True
            if not (self.closing or self.closed):
                self._transport.pauseProducing()
        self._report_input()

    def pending_ended(self, size: int) -> None:
        """A request announced by :meth:`pending_began` was answered or dropped; back under
        the share, reading goes on (kept frames first)."""
        self.pending_input = max(0, self.pending_input - size)
        self._report_input()
        if self._pending_held and self.pending_input <= self._pending_bound:
            self._pending_held = False
            if self.closing or self.closed:
                return
            if self._kept is not None:
                self._answer_kept_later()
            elif not self._paused_by_transport and self._stream is None:
                self._transport.resumeProducing()

    def _keep(self, rest: Any, *, output: bool = True) -> None:
        """The answers reached the output bound (``output``), or the requests in service the
        connection's share: keep the frames after, stop reading."""
        kept = list(rest)
        if not kept or self.closing or self.closed:
            return  # nothing left of this read: the transport's own pause bounds what follows
        self._kept = kept
        if output:
            self.output_blocked = True
        self._transport.pauseProducing()
        self._count_kept()

    def _count_kept(self) -> None:
        """Charge the kept frames to the buffered-input bound (which may shed this one)."""
        self.kept_input = sum(
            len(f) if isinstance(f, bytes) else len(f.head) + len(f.body) for f in self._kept or ()
        )
        self._report_input()

    def _answer_kept_later(self) -> None:
        """Answer the kept frames once the output allows: now (on the next turn), or when the
        held output is written (:meth:`write_held`), or when the transport resumes us."""
        if self._kept_call is not None or self._paused_by_transport or self._held:
            return
        if self._pending_held or self._stream is not None:  # pending_ended, _stream_done
            return
        if self.closing or self.closed:
            self._drop_kept()
            return
        self._kept_call = self.owner.call_soon(self._answer_kept)

    def _answer_kept(self) -> None:
        self._kept_call = None
        kept = self._kept
        if kept is None or self._paused_by_transport or self._held or self._pending_held:
            return  # answered later: resumeProducing, write_held or pending_ended comes back
        if self._stream is not None:
            return  # _stream_done comes back
        if self.closing or self.closed:
            self._drop_kept()
            return
        self._kept = None
        self._count_kept()
        self.output_blocked = False
        try:
            self._answer(kept)
        except Exception as exc:  # as in dataReceived: a bug costs this connection only
            self.owner.stream_refused(
                self, FrameError(f"{type(exc).__name__} while reading: {exc}", kind="internal")
            )
            return
        done = self._kept is None and not (self.closing or self.closed)
        if done and not (self._paused_by_transport or self._pending_held or self._stream):
            # else resumeProducing, pending_ended or _stream_done does
            self._transport.resumeProducing()

    def _drop_kept(self) -> None:
        """A closing connection's kept requests go unanswered: counted, never silently."""
        kept, self._kept = self._kept, None
        if self.kept_input:
            self._count_kept()
        if self._kept_call is not None:
            if self._kept_call.active():
                self._kept_call.cancel()
            self._kept_call = None
        if kept:
            self.owner.requests_dropped(self, len(kept))
            log.debug(
                "connection %s from %s closed with %d requests unanswered (output was full)",
                self.conn_id,
                self.peer,
                len(kept),
            )

    def close(self, *, abort: bool) -> None:
        """Close on the server's decision; ``abort`` drops unsent output and the partly
        received frame (a misbehaving peer: nothing more of it is read)."""
        if abort:
            self.decoder.fail()
        if self.closing or self.closed:
            return
        self.closing = True
        self._drop_kept()
        self._drop_stream()
        if abort:
            if self._out:
                self._out.clear()
            self._transport.abortConnection()
        else:
            unsent = (self._held or []) + (self._out or [])
            self._held = None
            if self._out:
                self._out.clear()
            if unsent:  # held output and the answers of this read so far go out first
                self._write_now(b"".join(unsent))
            self._transport.loseConnection()

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        if self._out is not None:
            self._out.append(data)
            self._out_bytes += len(data)
        else:
            self._write(data)

    def send_shared(self, head: bytes, body: bytes) -> None:
        """Send the answer ``head`` + ``body`` without copying ``body`` whole: slices of it
        are queued as the output drains, never more than the output bound and one slice. The
        rest of the read waits (kept) until it is sent; so does any other output."""
        if self.closed or self.closing:
            return
        if self._out is not None:  # in a read: after the read's answers so far
            self._stream_next = (head, body)
            self._out_bytes += self._output_bound  # the read's other frames are kept
            return
        self._stream_next = (head, body)
        self._start_stream()

    def _start_stream(self) -> None:
        head, body = self._stream_next or (b"", b"")
        self._stream_next = None
        if self.closed or self.closing:
            return
        if self._stream is not None:  # one at a time: the later waits behind the first
            self._follow_stream(head, body)
            return
        self._stream = [memoryview(head), memoryview(body)]
        self._stream_body = body
        self.owner.shared_answer_began(self, body)
        self.output_blocked = True  # notification ticks skip it, its reads wait
        self._transport.pauseProducing()
        self._pump()

    def _pump(self) -> None:
        """Queue slices of the answer being sent from a shared body while the unsent output
        is within the bound. Once past it the transport pauses this producer and resumes it
        when drained (then :meth:`resumeProducing` comes back here)."""
        parts = self._stream
        if parts is None or self._held or self.closed or self.closing:
            return  # held output first: write_held comes back here
        transport = self._transport
        while parts:
            if self.unsent_bytes > self._output_bound:
                return
            part = parts[0]
            piece = part[: self._stream_slice]
            transport.write(piece.tobytes())
            if len(piece) == len(part):
                parts.pop(0)
            else:
                parts[0] = part[len(piece) :]
        self._stream_done()

    def _stream_done(self) -> None:
        """The answer from a shared body is all queued: what waited behind it goes on."""
        body, self._stream, self._stream_body = self._stream_body, None, b""
        self.owner.shared_answer_ended(self, body)
        after, self._after_stream = self._after_stream, None
        if after and not self.closed:
            self._write(b"".join(after))
        if self._stream is not None or self.closing or self.closed:
            return  # another shared answer was waiting: it is being sent now
        if self._paused_by_transport:
            return  # resumeProducing goes on once the output drains
        self.output_blocked = False
        if self._kept is not None:
            self._answer_kept_later()
        elif not self._pending_held:
            self._transport.resumeProducing()

    def _follow_stream(self, *parts: bytes) -> None:
        """Queue ``parts`` behind the answer being sent from a shared body."""
        if self._after_stream is None:
            self._after_stream = []
        self._after_stream.extend(parts)

    def _drop_stream(self) -> None:
        """A closing connection sends no more of an answer from a shared body."""
        self._stream_next = None
        self._after_stream = None
        if self._stream is not None:
            body, self._stream, self._stream_body = self._stream_body, None, b""
            self.owner.shared_answer_ended(self, body)

    def _write(self, data: bytes) -> None:
        """Write ``data``, or hold it while the reactor hands out the ready sockets of a poll.

        The held output of every connection goes out in one burst once the poll's sockets are
        handled (the owner calls :meth:`write_held`). Sent one by one, between reads, each
        answer would wake its reader's process or thread on the other core, and on a virtual
        machine that wake-up costs the sender as much as the rest of the lookup; in a burst
        most readers are still awake from the first answers.
        """
        if self._stream is not None:  # behind the answer being sent from a shared body
            self._follow_stream(data)
            return
        reactor = self.owner.dispatching_reactor
        if reactor is not None and reactor.dispatching:
            held = self._held
            if held is None:
                self._held = [data]
                self.owner.output_held(self)
            else:
                held.append(data)
            return
        self._write_now(data)

    def write_held(self) -> None:
        """Write the output held during the poll just handled."""
        held, self._held = self._held, None
        if held and not self.closed and not self.closing:
            self._write_now(held[0] if len(held) == 1 else b"".join(held))
        if self._stream is not None:
            self._pump()
        if self._kept is not None:
            self._answer_kept_later()

    def _write_now(self, data: bytes) -> None:
        """Hand ``data`` to the kernel now when nothing is queued before it.

        A transport write queues the bytes and asks the reactor for write readiness, and the
        reactor drops that interest again once they are sent: two epoll changes and a loop
        turn per response. With an empty queue the socket can take the bytes at once;
        whatever it does not take is queued as usual, behind nothing, so the order of bytes is
        kept. Only for the plain TCP transport (a TLS or test transport takes the ordinary
        path).
        """
        t = self._socket_transport
        if (
            t is not None
            and not t.TLS
            and not t._tempDataBuffer
            and len(t.dataBuffer) == t.offset
            and t.connected
            and not t.disconnecting
        ):
            try:
                sent = t.socket.send(data)
            except OSError:  # EAGAIN, or an error the transport's own write will report
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
        self._transport.write(data)

    @property
    def kept_requests(self) -> int:
        """Requests of a read kept unanswered until the output drains."""
        return len(self._kept) if self._kept is not None else 0

    @property
    def unsent_bytes(self) -> int:
        """Output accepted (held, or queued in the transport) but not yet taken by the kernel."""
        held = sum(map(len, self._held)) if self._held else 0
        t: Any = self.transport
        try:
            return held + len(t.dataBuffer) - t.offset + t._tempDataLen
        except AttributeError:  # a transport that does not buffer (tests' string transports)
            return held

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.closed = True
        self._drop_kept()
        self._drop_stream()
        self.owner.connection_lost(self)

    # IPushProducer, driven by our own transport's write buffer.
    def pauseProducing(self) -> None:
        self._paused_by_transport = True
        self.output_blocked = True
        self._transport.pauseProducing()

    def resumeProducing(self) -> None:
        self._paused_by_transport = False
        if self._stream is not None:  # its next slices; _stream_done goes on from there
            self._pump()
            return
        if self._kept is not None:  # they come first; reading resumes once they are answered
            self._answer_kept_later()
            return
        self.output_blocked = False
        if not self._pending_held:  # else pending_ended resumes reading
            self._transport.resumeProducing()

    def stopProducing(self) -> None:
        self.output_blocked = True
