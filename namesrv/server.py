"""The Twisted glue: sockets, timers and shutdown around the pure cores.

Everything that decides anything lives elsewhere (registries, change detector, pressure
monitor, processors); this module moves bytes, fires timers and owns connection lifetimes.
"""

from __future__ import annotations

import errno
import itertools
import logging
import resource
import secrets
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

from twisted.internet import defer, main, task, tcp
from twisted.internet.interfaces import IListeningPort, IPushProducer
from twisted.internet.posixbase import PosixReactorBase
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import ILogObserver, globalLogPublisher
from twisted.python.failure import Failure
from zope.interface import implementer

from namesrv.config import NamesrvConfig, parse_listen
from namesrv.ops.durations import DurationHistogram
from namesrv.ops.journal import EventJournal, NullJournal
from namesrv.ops.log_limit import RateLimitedLog
from namesrv.push.broker_events import BrokerEvent, BrokerEventBook
from namesrv.push.change_detector import ChangeDetector, Notification
from namesrv.push.pressure import PressureMonitor, PsutilSampler, Sample
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.requests import operations
from namesrv.requests.acl import AccessControl
from namesrv.requests.processors import PendingResponse, RequestProcessor, Services
from namesrv.requests.route_response_cache import RouteResponseCache
from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.kv_config import KVConfig
from namesrv.routes.registry import RouteRegistry
from namesrv.routes.route_bodies import ORDER_TOPIC_CONFIG_NAMESPACE, RouteBodies
from protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, RequestCode, SerializeType
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, SplitFrame, decode_frame, encode_command
from protocol.notify_frames import NotifyFrames
from protocol.push_codec import encode_go_away

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL_MS = 1_000
"""How often overdue frames and idle connections are looked for: the timeouts' resolution."""
QUIET_SETTLE_DEFERRALS = 4
"""Ticks in a row that, while registers are being read or applied, settle only subscribed
topics: brokers of one cluster re-registering the same topics mark each once per burst, not
once per broker. Then one tick settles everything, and the count starts again."""


@implementer(IPushProducer)
class NamesrvConnection(Protocol):
    """One client or broker connection.

    It registers itself as the producer of its own transport: when unsent output passes
    ``server.output_buffer_bytes`` the transport pauses it, and the connection stops reading
    requests and is skipped by notification ticks until the output drains. That is what
    keeps memory bounded against a peer that writes but never reads.

    A read holds up to :data:`READ_SIZE` bytes of requests, and small requests can have large
    answers (a route lookup of a topic on many brokers): answering all of them would accept
    a whole read's answers past the bound. So the answers stop at the one that crosses it; the
    read's remaining frames are kept (:attr:`_kept`), reading stops, and once the output has
    drained they are answered first, in order, before anything new is read.
    """

    def __init__(self, server: NameServer, conn_id: int) -> None:
        self.server = server
        self.conn_id = conn_id
        self.peer = "?"
        self.host = "?"
        self.decoder = FrameDecoder(server.config.server.max_frame_size)
        self.max_header_size = server.config.server.max_header_size
        self.output_blocked = False
        self.serialize_type = SerializeType.JSON
        self.closed = False
        self._out: list[bytes] | None = None
        """While a read is being answered: its responses, written at once when it is done."""
        self._held: list[bytes] | None = None
        """Output held until the reactor has handled every ready socket of its poll."""
        self._output_bound = server.config.server.output_buffer_bytes
        self._out_bytes = 0
        """Bytes of the answers in :attr:`_out` sent by request handlers (not from the cache)."""
        self._kept: list[bytes | SplitFrame] | None = None
        """Frames of a read not answered yet: its answers had reached the output bound."""
        self._kept_call: Any = None
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
        self.partial_since_ms: int | None = None
        """When the frame now partly received began to arrive."""
        self.held_input = 0
        self.kept_input = 0
        """Bytes of :attr:`_kept`: counted with the partial frame in the buffered-input bound,
        for a kept frame may be a whole large one (up to ``server.max_frame_size``)."""
        """Memory of that partial frame (allocated, not just received), as counted in the
        server's buffered-input total."""

    @property
    def _transport(self) -> Any:
        return self.transport

    def connectionMade(self) -> None:
        peer = self._transport.getPeer()
        self.host = str(getattr(peer, "host", "?"))
        self.peer = f"{self.host}:{getattr(peer, 'port', '?')}"
        self.last_request_ms = self.server._now_ms()
        if not self.server._connection_made(self):
            self.closing = True
            self._transport.abortConnection()
            return
        transport: Any = self.transport
        if hasattr(transport, "bufferSize"):
            transport.bufferSize = self.server.config.server.output_buffer_bytes
        transport.registerProducer(self, True)
        if isinstance(transport, tcp.Connection) and hasattr(transport, "socket"):
            self._socket_transport = transport

    def dataReceived(self, data: bytes) -> None:
        if self.closing:
            return
        try:
            self._received(data)
        except Exception as exc:  # a bug must cost this connection, never the server
            self.server._stream_refused(
                self, FrameError(f"{type(exc).__name__} while reading: {exc}", kind="internal")
            )

    def _received(self, data: bytes, kept: list[bytes | SplitFrame] | None = None) -> None:
        """Answer the frames of ``data`` in order until the output reaches the bound, keeping
        the rest; or, given ``kept``, answer those (``data`` is then empty)."""
        server = self.server
        if kept is None:
            try:
                frames = self.decoder.feed_raw(data)
            except FrameError as exc:
                server._input_held(self)
                server._stream_refused(self, exc)
                return
            server._input_held(self)
            if not frames:
                announced = self.decoder.pending_header_length
                if announced is not None and announced > self.max_header_size and not self.closing:
                    server._stream_refused(
                        self,
                        FrameError(
                            f"header of {announced} bytes exceeds the limit of "
                            f"{self.max_header_size}",
                            kind="header_too_large",
                        ),
                    )
                return
            if self.closing:
                return
            if self._kept is not None:  # a wrapper (TLS) handing on more of a read after a stop
                self._kept.extend(frames)
                self._count_kept()
                return
        else:
            frames = kept
        self.last_request_ms = server._now_ms()
        answer_from_cache = server.route_responses.answer
        max_header = self.max_header_size
        out = self._out = []
        t = self._socket_transport
        if t is not None and not self._held:  # the usual case, without the property's detour
            room = self._output_bound - (len(t.dataBuffer) - t.offset + t._tempDataLen)
        else:
            room = self._output_bound - self.unsent_bytes
        frame_iter = iter(frames)
        try:
            for frame in frame_iter:
                if self.closing or self.closed:
                    return
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
                        server._header_refused(self, exc, frame)
                    else:
                        self.decoder.fail()
                        server._stream_refused(self, exc)
                        return
                else:
                    server._handle(self, command, frame)
                if self._out_bytes:  # what the handler sent (send() counts it)
                    room -= self._out_bytes
                    self._out_bytes = 0
                    if room <= 0:
                        self._keep(frame_iter)
                        return
        finally:
            # One write per read, however many frames it held: one syscall, and the reactor
            # adds and drops write interest once (usually not at all: see _write).
            self._out = None
            if out and not self.closed:
                self._write(out[0] if len(out) == 1 else b"".join(out))
            if self._kept is not None:
                self._answer_kept_later()

    def _keep(self, rest: Any) -> None:
        """The answers reached the output bound: keep the frames after, stop reading."""
        kept = list(rest)
        if not kept or self.closing or self.closed:
            return  # nothing left of this read: the transport's own pause bounds what follows
        self._kept = kept
        self.output_blocked = True
        self._transport.pauseProducing()
        self._count_kept()

    def _count_kept(self) -> None:
        """Charge the kept frames to the buffered-input bound (which may shed this one)."""
        self.kept_input = sum(
            len(f) if isinstance(f, bytes) else len(f.head) + len(f.body) for f in self._kept or ()
        )
        self.server._input_held(self)

    def _answer_kept_later(self) -> None:
        """Answer the kept frames once the output allows: now (on the next turn), or when the
        held output is written (:meth:`_flush_held`), or when the transport resumes us."""
        if self._kept_call is not None or self._paused_by_transport or self._held:
            return
        if self.closing or self.closed:
            self._drop_kept()
            return
        self._kept_call = self.server.reactor.callLater(0, self._answer_kept)

    def _answer_kept(self) -> None:
        self._kept_call = None
        kept = self._kept
        if kept is None or self._paused_by_transport or self._held:
            return  # answered later: resumeProducing or _flush_held comes back here
        if self.closing or self.closed:
            self._drop_kept()
            return
        self._kept = None
        self._count_kept()
        self.output_blocked = False
        try:
            self._received(b"", kept)
        except Exception as exc:  # as in dataReceived: a bug costs this connection only
            self.server._stream_refused(
                self, FrameError(f"{type(exc).__name__} while reading: {exc}", kind="internal")
            )
            return
        done = self._kept is None and not (self.closing or self.closed)
        if done and not self._paused_by_transport:  # else the transport resumes us when drained
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
            self.server.counters["kept_requests_dropped"] += len(kept)
            log.debug(
                "connection %s from %s closed with %d requests unanswered (output was full)",
                self.conn_id,
                self.peer,
                len(kept),
            )

    def close(self, *, abort: bool) -> None:
        """Close on the server's decision; ``abort`` drops unsent output (a misbehaving peer)."""
        if self.closing or self.closed:
            return
        self.closing = True
        self._drop_kept()
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

    def _write(self, data: bytes) -> None:
        """Write ``data``, or hold it while the reactor hands out the ready sockets of a poll.

        The held output of every connection goes out in one burst once the poll's sockets are
        handled (:meth:`NameServer._write_held`). Sent one by one, between reads, each answer
        woke its reader's process or thread on the other core, and on a virtual machine that
        wake-up cost the sender as much as the rest of the lookup; in a burst most readers are
        still awake from the first answers. Under the Go load generator of
        ``bench/vs_upstream.py`` that was 1.3-1.6 times the lookups at 0.7-0.8 of the CPU each.
        """
        reactor = self.server._dispatching_reactor
        if reactor is not None and reactor.dispatching:
            held = self._held
            if held is None:
                self._held = [data]
                self.server._held_output.append(self)
            else:
                held.append(data)
            return
        self._write_now(data)

    def _flush_held(self) -> None:
        held, self._held = self._held, None
        if held and not self.closed and not self.closing:
            self._write_now(held[0] if len(held) == 1 else b"".join(held))
        if self._kept is not None:
            self._answer_kept_later()

    def _write_now(self, data: bytes) -> None:
        """Hand ``data`` to the kernel now when nothing is queued before it.

        A transport write queues the bytes and asks the reactor for write readiness, and the
        reactor drops that interest again once they are sent: two epoll changes and a loop
        turn per response, a seventh of the CPU of a lookup at high rates. With an empty queue
        the socket can take the bytes at once; whatever it does not take is queued as usual,
        behind nothing, so the order of bytes is kept. Only for the plain TCP transport (a TLS
        or test transport takes the ordinary path).
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
    def unsent_bytes(self) -> int:
        """Output accepted (held, or queued in the transport) but not yet taken by the kernel."""
        held = sum(map(len, self._held)) if self._held else 0
        t: Any = self.transport
        try:
            return held + len(t.dataBuffer) - t.offset + t._tempDataLen
        except AttributeError:  # a transport that does not buffer (tests' string transports)
            return held

    def note_extension(self, serialize_type: SerializeType | None) -> None:
        """It sent a push-extension request; a SUBSCRIBE's serialize type encodes its
        notifications from now on (None: the encoding stays)."""
        self.speaks_extension = True
        if serialize_type is not None:
            self.serialize_type = serialize_type

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.closed = True
        self._drop_kept()
        self.server._connection_lost(self)

    # IPushProducer, driven by our own transport's write buffer.
    def pauseProducing(self) -> None:
        self._paused_by_transport = True
        self.output_blocked = True
        self._transport.pauseProducing()

    def resumeProducing(self) -> None:
        self._paused_by_transport = False
        if self._kept is not None:  # they come first; reading resumes once they are answered
            self._answer_kept_later()
            return
        self.output_blocked = False
        self._transport.resumeProducing()

    def stopProducing(self) -> None:
        self.output_blocked = True


READ_SIZE = 64 * 1024
"""Bytes asked of the kernel per read: Twisted's default, whatever the output bound is."""


class _BoundedReadTransport(tcp.Server):
    """A TCP connection whose reads stay at :data:`READ_SIZE` when ``bufferSize`` is raised.

    Twisted uses ``bufferSize`` both as the unsent-output mark past which it pauses the
    producer and as the size of every ``recv``. The server raises it to the output bound
    (``server.output_buffer_bytes``, 4 MiB), which made every read allocate, map and unmap a
    4 MiB buffer: two thirds of a route lookup's CPU. Reads keep their own size here.
    """

    def doRead(self) -> Any:
        try:
            data = self.socket.recv(READ_SIZE)
        except OSError as exc:
            if exc.errno == errno.EWOULDBLOCK:
                return None
            return main.CONNECTION_LOST
        return self._dataReceived(data)


class _Port(tcp.Port):
    transport = _BoundedReadTransport


class _Factory(Factory):
    def __init__(self, server: NameServer) -> None:
        self.server = server
        self._ids = itertools.count(1)

    def buildProtocol(self, addr: Any) -> NamesrvConnection:
        return NamesrvConnection(self.server, next(self._ids))


class NameServer:
    """A name server instance: build it, ``listen()``, and ``stop()`` it (GoAway, then close)."""

    def __init__(
        self,
        config: NamesrvConfig | None = None,
        reactor: Any = None,
        *,
        clock: Any = None,
        sampler: Callable[[], Sample] | None = None,
        epoch: str | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``reactor`` carries the sockets; ``clock`` (default: the reactor) drives every timer
        and timestamp, so tests can run real loopback traffic under a ``task.Clock``.
        ``timer`` measures tick durations for the metrics (seconds, monotonic)."""
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.config = config or NamesrvConfig()
        self.reactor = reactor
        self.clock = clock if clock is not None else reactor
        self.counters: Counter[str] = Counter()
        self.connections: dict[int, NamesrvConnection] = {}
        self._dispatching_reactor: Any = None
        """The reactor, once listening on one that says when it dispatches ready sockets
        (``namesrv.net.lean_reactor``): output is then held until each poll is handled."""
        self._held_output: list[NamesrvConnection] = []
        """Connections holding output until the reactor's current poll is handled."""
        self._connections_of_host: dict[str, int] = {}
        self.buffered_input = 0
        """Bytes of partly received frames over all connections."""
        self._peer_log = RateLimitedLog(log, self.clock)
        self._fd_episode_refused = 0
        """Connections the kernel or Twisted refused since file descriptors ran out; 0: none."""
        self._fd_episode_ends_below = 1
        """Open connections below which an accepted one ends the episode."""
        self._log_observer = cast(ILogObserver, self._twisted_log_event)
        self.epoch = epoch or secrets.token_hex(8)
        cfg = self.config
        self.journal: EventJournal | NullJournal
        journaled = bool(cfg.journal.directory)
        if cfg.journal.directory:
            self.journal = EventJournal(
                cfg.journal.directory,
                max_file_bytes=cfg.journal.max_file_bytes,
                max_files=cfg.journal.max_files,
                max_total_bytes=cfg.journal.max_total_bytes,
                max_records_per_second=cfg.journal.max_records_per_second,
                clock_ms=self._now_ms,
            )
        else:
            self.journal = NullJournal()
        self.registry = RouteRegistry(
            self.clock,
            broker_expiry_ms=cfg.registry.broker_expiry_ms,
            listener=self._routes_touched,
            delete_topic_with_broker_registration=cfg.registry.delete_topic_with_broker_registration,
            slice_topics=cfg.registry.register_slice_topics,
        )
        self.kv = KVConfig(on_change=self._kv_changed, max_bytes=cfg.registry.max_kv_config_bytes)
        if cfg.registry.kv_config_path:
            self.kv.load(cfg.registry.kv_config_path)
        self.route_responses = RouteResponseCache(max_bytes=cfg.server.route_cache_bytes)
        self.routes = RouteBodies(
            self.registry, self.kv, order_message_enable=cfg.registry.order_message_enable
        )
        self.subscriptions = SubscriptionRegistry(
            cfg.push.max_topics_per_connection,
            cfg.push.max_total_subscriptions,
            cfg.push.max_subscriptions_per_host,
        )
        self.broker_events = BrokerEventBook(
            cfg.push.broker_events,
            self.subscriptions,
            on_event=lambda event, fields: self.journal.record(event, **fields),
        )
        self.detector = ChangeDetector(
            self.registry.route_exists_check(),
            self.subscriptions,
            cfg.push.suppress,
            self.epoch,
            broker_events=self.broker_events,
            # Per-topic journal records (and the mark times they carry) only with a journal.
            clock_ms=self._now_ms if journaled else None,
        )
        self.detector.on_event = self._detector_event
        self.detector.report_routes = journaled
        self.registry.broker_listener = self._broker_event
        self.acl = AccessControl(cfg.acl)
        self.tick_durations = DurationHistogram()
        self._timer = timer
        self.pressure = PressureMonitor(
            sampler or PsutilSampler(), cfg.pressure, on_transition=self._pressure_transition
        )
        self.processor = RequestProcessor(
            Services(
                config=cfg,
                registry=self.registry,
                kv=self.kv,
                routes=self.routes,
                subscriptions=self.subscriptions,
                detector=self.detector,
                on_subscription_change=self._subscription_changed,
                acl=self.acl,
                operations=self._operations_answer,
                clock=self.clock,
            ),
            route_responses=self.route_responses,
            counters=self.counters,
        )
        self.frames = NotifyFrames(self.epoch)
        self._recovering = False
        self._recovery_started_ms = 0
        self._recovery_frames = 0
        self._port: IListeningPort | None = None
        self.metrics_port: IListeningPort | None = None
        self._loops: list[task.LoopingCall] = []
        self._stopping: defer.Deferred[None] | None = None
        self._works: list[tuple[NamesrvConnection, PendingResponse]] = []
        self._registers_scheduled = False
        self._apply_next = False
        self._tick_continuation: Any = None
        self._quiet_deferrals = 0
        """Ticks in a row that left topics nobody subscribes to marked (registers pending)."""
        self._tick_defers = False

    # -- lifecycle -----------------------------------------------------------------------------

    def listen(self) -> IListeningPort:
        cfg = self.config
        host, port = parse_listen(cfg.server.listen)
        factory: Factory = _Factory(self)
        if cfg.server.tls != "disabled":
            from namesrv.net.tls import TlsRoutingFactory, server_options

            options = server_options(cfg.server.tls_cert_file, cfg.server.tls_key_file)
            factory = TlsRoutingFactory(
                factory, options, cfg.server.tls, self.counters, self._size_transport
            )
        listening: IListeningPort
        if isinstance(self.reactor, PosixReactorBase):
            bounded = _Port(port, cast(Any, factory), 1024, host, self.reactor)
            bounded.startListening()
            listening = cast(IListeningPort, bounded)
        else:  # a test reactor
            listening = self.reactor.listenTCP(port, factory, backlog=1024, interface=host)
        self._port = listening
        if hasattr(self.reactor, "after_dispatch"):
            self._dispatching_reactor = self.reactor
            self.reactor.after_dispatch(self._write_held)
        if cfg.metrics.listen:
            from namesrv.ops.metrics import listen_metrics

            self.metrics_port = listen_metrics(self.reactor, cfg.metrics.listen, self)
        globalLogPublisher.addObserver(self._log_observer)
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < self.config.server.max_connections + 64:
            log.warning(
                "the file-descriptor limit (%d) is below server.max_connections=%d plus what "
                "the process needs: connections past it fail at accept, not at the bound; "
                "raise `ulimit -n` or lower server.max_connections",
                soft,
                self.config.server.max_connections,
            )
        self._start_timers()
        bound: Any = listening.getHost()  # type: ignore[misc]
        log.info(
            "name server listening on %s:%s (epoch %s, push %s, tls %s, acl %s)",
            bound.host,
            bound.port,
            self.epoch,
            "on" if cfg.push.enabled else "off",
            cfg.server.tls,
            "on" if cfg.acl.enabled else "off",
        )
        return listening

    def _size_transport(self, transport: Any) -> None:
        """Under TLS the connection writes to the TLS layer; bound the socket's buffer too."""
        if hasattr(transport, "bufferSize"):
            transport.bufferSize = self.config.server.output_buffer_bytes

    def _start_timers(self) -> None:
        cfg = self.config
        self._every(cfg.registry.scan_interval_ms, self._scan)
        self._every(HOUSEKEEPING_INTERVAL_MS, self.housekeep)
        if cfg.push.enabled:
            self._every(cfg.push.tick_interval_ms, self.tick)
        if cfg.pressure.enabled:
            self._every(cfg.pressure.sample_interval_ms, self.pressure.sample_now)

    def _every(self, interval_ms: int, call: Callable[[], object]) -> None:
        def guarded() -> None:
            try:
                call()
            except Exception:  # a failing timer must not stop for good
                self.counters["timer_errors"] += 1
                log.exception("error in periodic %s", getattr(call, "__name__", call))

        loop = task.LoopingCall(guarded)
        loop.clock = self.clock
        loop.start(interval_ms / 1000.0, now=False)
        self._loops.append(loop)

    def stop(self, grace_ms: int | None = None) -> defer.Deferred[None]:
        """Send GoAway to everyone, stop accepting, serve on for the grace period, then close."""
        if self._stopping is not None:
            return self._stopping
        grace = self.config.server.shutdown_grace_ms if grace_ms is None else grace_ms
        if not self.connections:
            grace = 0  # nobody to serve through a grace period
        frame = encode_command(
            RemotingCommand.request(
                RequestCode.GO_AWAY,
                body=encode_go_away(
                    grace,
                    list(self.config.server.go_away_alternatives),
                    "name server shutting down",
                ),
                oneway=True,
            )
        )
        # Only peers that spoke the extension know 7004: an upstream client logs an error for
        # it, so it just gets normal service through the grace period and then a close.
        told = [conn for conn in self.connections.values() if conn.speaks_extension]
        for conn in told:
            conn.send(frame)
        log.info(
            "GoAway sent to %d of %d connections; closing in %d ms",
            len(told),
            len(self.connections),
            grace,
        )
        stopped: defer.Deferred[None] = defer.Deferred()
        self._stopping = stopped
        port: Any = self._port
        listening = defer.maybeDeferred(port.stopListening) if port else defer.succeed(None)
        if self.metrics_port is not None:
            metrics_port: Any = self.metrics_port
            both = [listening, defer.maybeDeferred(metrics_port.stopListening)]
            listening = defer.gatherResults(both).addCallback(lambda _: None)

        def close_all() -> None:
            self._write_held()  # output held in this poll (GoAway among it) goes out first
            if self._dispatching_reactor is not None:
                self._dispatching_reactor.remove_after_dispatch(self._write_held)
                self._dispatching_reactor = None
            globalLogPublisher.removeObserver(self._log_observer)
            for loop in self._loops:
                if loop.running:
                    loop.stop()
            for conn in list(self.connections.values()):
                # Released now rather than when the transport reports the loss, which comes
                # after the journal is closed: their records would be dropped.
                self._connection_lost(conn)
                conn._transport.loseConnection()
            self.journal.close()
            listening.addBoth(lambda _: stopped.callback(None))

        if grace == 0:
            close_all()
        else:
            self.clock.callLater(grace / 1000.0, close_all)
        return stopped

    # -- connections -------------------------------------------------------------------------

    def _write_held(self) -> None:
        """Write what connections held while the reactor handled its poll's ready sockets."""
        if not self._held_output:
            return
        conns, self._held_output = self._held_output, []
        for conn in conns:
            try:
                conn._flush_held()
            except Exception:  # one connection's failure must not keep the others' output
                log.exception("writing the held output of connection %d", conn.conn_id)

    def _connection_made(self, conn: NamesrvConnection) -> bool:
        """Admit ``conn`` unless a connection bound is reached (then it is refused, counted)."""
        if self._fd_episode_refused and len(self.connections) < self._fd_episode_ends_below:
            log.warning(
                "accepting connections again; %d were refused while file descriptors ran out",
                self._fd_episode_refused,
            )
            self._fd_episode_refused = 0
        cfg = self.config.server
        on_host = self._connections_of_host.get(conn.host, 0)
        if len(self.connections) >= cfg.max_connections:
            bound = f"server.max_connections={cfg.max_connections}"
        elif on_host >= cfg.max_connections_per_host:
            bound = f"server.max_connections_per_host={cfg.max_connections_per_host}"
        else:
            self.connections[conn.conn_id] = conn
            self._connections_of_host[conn.host] = on_host + 1
            self.counters["connections_opened"] += 1
            return True
        kind = bound.split("=")[0].split(".")[1]
        self.counters[f"connections_refused.{kind}"] += 1
        self._peer_log.warning(
            f"refused.{kind}", "refused a connection from %s: %s reached", conn.peer, bound
        )
        return False

    def _connection_lost(self, conn: NamesrvConnection) -> None:
        if conn.held_input:
            self.buffered_input -= conn.held_input
            conn.held_input = 0
        if self.connections.pop(conn.conn_id, None) is None:
            return
        left = self._connections_of_host.get(conn.host, 0) - 1
        if left > 0:
            self._connections_of_host[conn.host] = left
        else:
            self._connections_of_host.pop(conn.host, None)
        self.counters["connections_closed"] += 1
        released = self.subscriptions.drop_connection(conn)
        self.detector.forget_connection(conn)
        self.registry.on_channel_close(conn.conn_id)
        self._schedule_registers()  # a large departed broker's queue data leaves in slices
        if released:
            self.journal.record(
                "connection_closed", conn=conn.conn_id, released_topics=len(released)
            )

    # -- input bounds ----------------------------------------------------------------------

    def _input_held(self, conn: NamesrvConnection) -> None:
        """Account ``conn``'s partly received frame; past the global bound, shed the biggest."""
        partial = conn.decoder.allocated
        held = partial + conn.kept_input
        if not held and not conn.held_input:  # the usual read: whole frames, nothing held
            return
        delta = held - conn.held_input
        conn.held_input = held
        self.buffered_input += delta
        if partial == 0:  # kept whole frames are not overdue: the peer is not reading
            conn.partial_since_ms = None
        elif conn.partial_since_ms is None:
            conn.partial_since_ms = self._now_ms()
        cfg = self.config.server
        # The transport reads up to its buffer size at a time, on top of what is held: that
        # read is kept inside the bound too (never below one whole frame).
        bound = max(cfg.max_frame_size, cfg.max_buffered_input_bytes - cfg.output_buffer_bytes)
        while delta > 0 and self.buffered_input > bound:
            biggest = max(
                (c for c in self.connections.values() if not c.closing),
                key=lambda c: c.held_input,
                default=None,
            )
            if biggest is None or biggest.held_input == 0:
                break
            self.counters["input_bound_closes"] += 1
            self._peer_log.warning(
                "input_bound",
                "closing connection %s from %s: partly received frames and requests waiting "
                "for their output to drain hold %d bytes over all connections, past "
                "server.max_buffered_input_bytes=%d less one read; it held the most (%d)",
                biggest.conn_id,
                biggest.peer,
                self.buffered_input,
                cfg.max_buffered_input_bytes,
                biggest.held_input,
            )
            self._release_input(biggest)
            biggest.close(abort=True)

    def _release_input(self, conn: NamesrvConnection) -> None:
        self.buffered_input -= conn.held_input
        conn.held_input = 0
        conn.partial_since_ms = None
        conn.decoder.fail()

    def _stream_refused(self, conn: NamesrvConnection, exc: FrameError) -> None:
        """The stream cannot be read on: count by kind, log (rate-limited), close."""
        self.counters["frames_refused"] += 1
        self.counters[f"decode_failures.{exc.kind}"] += 1
        self._peer_log.warning(
            exc.kind, "closing connection %s from %s: %s", conn.conn_id, conn.peer, exc.remark
        )
        self._release_input(conn)
        conn.close(abort=True)

    def _header_refused(
        self, conn: NamesrvConnection, exc: FrameError, frame: bytes | SplitFrame
    ) -> None:
        """A header that failed to decode in a sound frame: answer the error, keep serving."""
        self.counters["headers_refused"] += 1
        self.counters[f"decode_failures.{exc.kind}"] += 1
        self._peer_log.warning(exc.kind, "refused a request from %s: %s", conn.peer, exc.remark)
        if exc.flag & (FLAG_RESPONSE | FLAG_ONEWAY) or exc.opaque is None:
            return
        head = frame.head if isinstance(frame, SplitFrame) else frame
        response = RemotingCommand(
            code=exc.code,
            opaque=exc.opaque,
            flag=FLAG_RESPONSE,
            language=LanguageCode.JAVA,
            remark=exc.remark,
            serialize_type=SerializeType.ROCKETMQ if head[0] == 1 else SerializeType.JSON,
        )
        conn.send(encode_command(response))

    def housekeep(self) -> None:
        """Close connections whose frame is overdue, and idle ones that hold no subscription."""
        cfg = self.config.server
        now = self._now_ms()
        frame_deadline = now - cfg.frame_timeout_ms
        idle_deadline = now - cfg.idle_timeout_ms if cfg.idle_timeout_ms else None
        subscribed = self.subscriptions.topics_of
        for conn in list(self.connections.values()):
            if conn.closing:
                continue
            if conn.partial_since_ms is not None and conn.partial_since_ms <= frame_deadline:
                self.counters["frame_timeouts"] += 1
                self._peer_log.warning(
                    "frame_timeout",
                    "closing connection %s from %s: a frame begun %d ms ago is still "
                    "incomplete (%d bytes), past server.frame_timeout_ms=%d",
                    conn.conn_id,
                    conn.peer,
                    now - conn.partial_since_ms,
                    conn.held_input,
                    cfg.frame_timeout_ms,
                )
                self._release_input(conn)
                conn.close(abort=True)
            elif (
                idle_deadline is not None
                and conn.last_request_ms <= idle_deadline
                and not subscribed(conn)
            ):
                self.counters["idle_closes"] += 1
                log.debug("closing connection %s from %s: idle", conn.conn_id, conn.peer)
                # Aborted: output still unsent after the idle period is never going to be read.
                conn.close(abort=True)

    def _twisted_log_event(self, event: dict[str, Any]) -> None:
        """Twisted reports accept() failures (file descriptors out) only to its own log."""
        text = str(event.get("log_format") or "")
        if not text.startswith(("EMFILE encountered", "Could not accept new connection")):
            return
        self.counters["accept_failures"] += 1
        if self._fd_episode_refused == 0:
            # The episode ends once a tenth of the connections it started with have gone: an
            # accept that squeezes through while the limit is still in reach starts no new one.
            self._fd_episode_ends_below = max(1, len(self.connections) * 9 // 10)
            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            log.error(
                "cannot accept new connections: this process is out of file descriptors "
                "(limit %d, %d connections open); they are refused until some close. "
                "Raise `ulimit -n` or lower server.max_connections",
                soft,
                len(self.connections),
            )
        self._fd_episode_refused += 1

    def _handle(
        self, conn: NamesrvConnection, command: RemotingCommand, frame: bytes | SplitFrame
    ) -> None:
        answer = self.processor.handle(conn, command, frame)
        if answer is None:
            return
        if isinstance(answer, PendingResponse):
            self._answer_when_applied(conn, answer)
            return
        if self.registry.pending_jobs:  # e.g. an unregister of a large broker
            self._schedule_registers()
        conn.send(answer)

    # -- large registers, read and applied in slices ---------------------------------------------

    @property
    def pending_registers(self) -> int:
        """Registers still being read or applied, plus register tables still being applied."""
        return len(self._works) + self.registry.pending_jobs

    def _answer_when_applied(self, conn: NamesrvConnection, pending: PendingResponse) -> None:
        self._works.append((conn, pending))
        self._schedule_registers()

    def _schedule_registers(self) -> None:
        if not self._registers_scheduled and (self._works or self.registry.pending_jobs):
            self._registers_scheduled = True
            self.clock.callLater(0, self._run_register_turn)

    def _run_register_turn(self) -> None:
        """One slice of register work per reactor turn: a slice of reading a body, or of
        applying a table, by turns when both wait. Each is a slice's time; both in one turn
        would double how long a request that arrives meanwhile waits."""
        self._registers_scheduled = False
        if self.registry.pending_jobs and (self._apply_next or not self._reads_pending()):
            self._run_job_slice()
            self._run_works(read_budget=0)  # answers the registers whose table is now applied
            self._apply_next = False
        else:
            self._run_works(read_budget=1)
            self._apply_next = True
        self._schedule_registers()

    def _reads_pending(self) -> bool:
        """Whether some register may read a slice now (see ``_run_works``)."""
        seen: set[tuple[str, str]] = set()
        for _conn, pending in self._works:
            if pending.key in seen:
                continue
            seen.add(pending.key)
            if pending.last != "wait":
                return True
        return False

    def _run_works(self, read_budget: int) -> None:
        """The pending registers: at most ``read_budget`` slices of body reading, in arrival
        order, each address's registers one after the other; those waiting for their table to
        be applied just look whether it is."""
        seen: set[tuple[str, str]] = set()
        for entry in list(self._works):
            conn, pending = entry
            if pending.key in seen:
                continue  # an earlier register of this address is in flight
            seen.add(pending.key)
            if pending.last != "wait":
                if not read_budget:
                    continue
                read_budget -= 1
            response = self.processor.step(pending)
            if response is None:
                continue
            self._works.remove(entry)
            if not pending.request.is_oneway:
                conn.send(encode_command(response))

    def _run_job_slice(self) -> None:
        """One slice of the pending register tables: other requests are read and answered
        between slices."""
        try:
            self.registry.run_jobs()
        except Exception:  # a failing slice must not stop the others for good
            self.counters["timer_errors"] += 1
            log.exception("error applying a register slice")
        self.counters["register_slices"] += 1

    # -- route changes -----------------------------------------------------------------------

    def _routes_touched(self, topics: Any, cause: ChangeCause) -> None:
        self.routes.invalidate(topics)
        self.route_responses.invalidate(topics)
        self.detector.mark(topics, cause)

    def _broker_event(self, event: BrokerEvent) -> None:
        self.counters[f"broker_events.{event.kind.name.lower()}"] += 1
        self.broker_events.record(event)

    def _kv_changed(self, namespace: str, key: str) -> None:
        # The order conf is part of a route only when order messages are on.
        if namespace == ORDER_TOPIC_CONFIG_NAMESPACE and self.config.registry.order_message_enable:
            self._routes_touched((key,), ChangeCause.ORDER_CONF)

    def _detector_event(self, event: str, fields: dict[str, Any]) -> None:
        if event == "suppressed_counts":  # no journal: counted, not recorded
            for rule, count in fields["rules"].items():
                self.counters[f"suppressed.{rule}"] += count
            return
        if event == "suppressed":
            for rule in fields.get("rules", ()):
                self.counters[f"suppressed.{rule}"] += 1
        self.journal.record(event, **fields)

    def _operations_answer(self, code: int, request: RemotingCommand) -> RemotingCommand:
        source = operations.PushStatusSource(
            epoch=self.epoch,
            push_enabled=self.config.push.enabled,
            tick_interval_ms=self.config.push.tick_interval_ms,
            detector=self.detector,
            subscriptions=self.subscriptions,
            degraded=lambda: self.pressure.degraded,
            recovering=lambda: self._recovering,
            stats=self.stats,
            connections=lambda: list(self.connections.values()),
        )
        return operations.answer(source, code, request)

    def _subscription_changed(self, event: str, conn: Any, topics: list[str]) -> None:
        self.journal.record(event, conn=conn.conn_id, topics=topics)

    def tick(self) -> None:
        """One detection tick: settle changed routes and send at most one frame per connection.

        A tick does at most a slice of work (``push.settle_slice_topics`` topics settled, or
        ``push.settle_slice_ms`` of settling; ``push.notify_slice_connections`` frames built)
        per reactor turn; what is left is continued in the next turn, so a large change set
        never holds the event loop.
        """
        started = self._timer()
        try:
            self._tick()
        finally:
            self.tick_durations.observe(max(0.0, self._timer() - started))

    def _tick(self) -> None:
        detector = self.detector
        continuation = self._tick_continuation
        if continuation is not None:
            if continuation.active():
                continuation.cancel()
            self._tick_continuation = None
        elif not (detector.dirty_count or detector.pending_connections or self._recovering):
            detector.stats.ticks += 1  # idle: nothing marked, nobody owed (what tick() finds)
            self.journal.flush()
            return
        if continuation is None:  # a scheduled tick decides for its continuations too
            defer = bool(self.pending_registers) and self._quiet_deferrals < QUIET_SETTLE_DEFERRALS
            self._quiet_deferrals = self._quiet_deferrals + 1 if defer else 0
            self._tick_defers = defer
        defer = self._tick_defers
        push = self.config.push
        budget = push.notify_slice_connections
        rate_limited = False
        if self._recovering:
            per_tick = push.recovery_notifications_per_second
            recovery = max(1, per_tick * push.tick_interval_ms // 1000)
            rate_limited = recovery <= budget
            budget = min(budget, recovery)
        now_ms = self._now_ms()
        timer = self._timer
        settle_until = timer() + push.settle_slice_ms / 1000.0
        notes = self.detector.tick(
            now_ms,
            can_send=self._can_send,
            degraded=self.pressure.degraded,
            max_notifications=budget,
            max_settle=push.settle_slice_topics,
            out_of_time=lambda: timer() >= settle_until,
            subscribed_only=defer,
        )
        if defer:
            self.counters["settle_deferrals"] += 1
        more = (self.detector.dirty_count > 0 and not defer) or (
            len(notes) >= budget and not rate_limited and self.detector.pending_connections > 0
        )
        if more:
            self.counters["tick_continuations"] += 1
            self._tick_continuation = self.clock.callLater(0, self.tick)
        if notes:
            self._send_notifications(notes, now_ms)
            if self._recovering:
                self._recovery_frames += len(notes)
        if self._recovering and self.detector.pending_connections == 0:
            self._recovering = False
            duration_ms = now_ms - self._recovery_started_ms
            log.info(
                "route push recovered: the backlog of missed changes is delivered "
                "(%d frames in %d ms)",
                self._recovery_frames,
                duration_ms,
            )
            self.journal.record(
                "backlog_drained", frames=self._recovery_frames, duration_ms=duration_ms
            )
        self.journal.flush()

    def _can_send(self, conn: Any) -> bool:
        if conn.output_blocked or conn.closed:
            self.counters["slow_subscriber_skips"] += 1
            self.journal.record(
                "slow_subscriber_skipped",
                conn=conn.conn_id,
                pending_topics=self.detector.pending_topics_of(conn),
            )
            return False
        return True

    def _send_notifications(self, notes: list[Notification], now_ms: int) -> None:
        frames = self.frames
        frames.start_tick(now_ms)
        frame = frames.frame
        total_bytes = 0
        broker_entries = 0
        for note in notes:
            conn: Any = note.conn
            data = frame(note.changes, note.brokers, note.sequence, conn.serialize_type)
            conn.send(data)
            total_bytes += len(data)
            broker_entries += len(note.brokers)
        self.counters["notifications_sent"] += len(notes)
        self.counters["notification_bytes"] += total_bytes
        self.counters["broker_entries_sent"] += broker_entries
        topic_list = sorted(frames.topics)
        self.journal.record(
            "notification_sent",
            connections=len(notes),
            topics=len(topic_list),
            frames=len(notes),
            bytes=total_bytes,
            topic_list=topic_list[:100],
            broker_entries=broker_entries,
        )

    def _pressure_transition(self, degraded: bool, sample: Sample) -> None:
        if degraded:
            log.warning(
                "route push degraded: cpu %.1f%%, memory %.1f%%; changes are held",
                sample.cpu_percent,
                sample.memory_percent,
            )
        else:
            self._recovering = True
            self._recovery_started_ms = self._now_ms()
            self._recovery_frames = 0
            log.warning(
                "route push resumed: cpu %.1f%%, memory %.1f%%; %d connections have missed changes",
                sample.cpu_percent,
                sample.memory_percent,
                self.detector.pending_connections,
            )
        self.counters["degradation_transitions"] += 1
        self.journal.record(
            "degradation",
            degraded=degraded,
            cpu_percent=sample.cpu_percent,
            memory_percent=sample.memory_percent,
            pending_connections=self.detector.pending_connections,
        )

    def _scan(self) -> None:
        expired = self.registry.scan_not_active_brokers()
        self._schedule_registers()
        if expired:
            self.counters["brokers_expired"] += len(expired)
            log.warning("brokers expired after missing heartbeats: %s", ", ".join(expired))

    def _now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    def stats(self) -> dict[str, int]:
        """Counters for operators and tests: connections, refusals, push and detector figures."""
        out = dict(self.counters)
        handled = self.processor.handled.copy()
        handled["GET_ROUTEINFO_BY_TOPIC"] += self.route_responses.hits
        out.update({f"handled.{k}": v for k, v in handled.items() if v})
        out.update({f"refused.{k}": v for k, v in self.processor.refused.items()})
        out["brokers"] = self.registry.broker_count
        out["topics"] = self.registry.topic_count
        out["subscriptions"] = self.subscriptions.total
        out["subscribed_connections"] = self.subscriptions.connection_count
        out["degraded"] = int(self.pressure.degraded)
        out["connections"] = len(self.connections)
        out["route_cache_hits"] = self.route_responses.hits
        out["ticks"] = self.detector.stats.ticks
        out["suppressed_changes"] = self.detector.stats.suppressed_changes
        out["push_pending_connections"] = self.detector.pending_connections
        out["push_pending_topics"] = self.detector.pending_topic_count
        out.update({f"rejected.acl_{k}": v for k, v in self.acl.rejections.items()})
        out["buffered_input_bytes"] = self.buffered_input
        out["route_cache_bytes"] = self.route_responses.size_bytes
        out["route_cache_entries"] = len(self.route_responses)
        out["kv_config_bytes"] = self.kv.size_bytes
        out["route_cache_resets"] = self.route_responses.resets
        out["route_cache_uncacheable"] = self.route_responses.uncacheable
        out["log_lines_suppressed"] = self._peer_log.dropped
        out["pressure_sample_errors"] = self.pressure.sample_errors
        out["journal_suppressed_records"] = getattr(self.journal, "suppressed_records", 0)
        chunks = self.processor.chunk_cache
        if chunks is not None:
            out["register_chunk_cache_bytes"] = chunks.bytes
            out["register_chunk_cache_hits"] = chunks.hits
            out["register_chunk_cache_misses"] = chunks.misses
        out["register_topics_skipped"] = self.registry.stats.topics_skipped
        return out
