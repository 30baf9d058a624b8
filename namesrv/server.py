"""The Twisted glue: sockets, timers and shutdown around the pure cores.

Everything that decides anything lives elsewhere (registries, change detector, pressure
monitor, processors); this module moves bytes, fires timers and owns connection lifetimes.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from twisted.internet import defer, task
from twisted.internet.interfaces import IListeningPort, IPushProducer
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

from namesrv import operations
from namesrv.acl import AccessControl
from namesrv.change_cause import ChangeCause
from namesrv.change_detector import ChangeDetector, Notification
from namesrv.config import NamesrvConfig, parse_listen
from namesrv.durations import DurationHistogram
from namesrv.journal import EventJournal, NullJournal
from namesrv.kv_config import KVConfig
from namesrv.notification_frames import NotificationFrames
from namesrv.pressure import PressureMonitor, PsutilSampler, Sample
from namesrv.processors import RequestProcessor, Services
from namesrv.route_bodies import ORDER_TOPIC_CONFIG_NAMESPACE, RouteBodies
from namesrv.route_registry import RouteRegistry
from namesrv.route_response_cache import RouteResponseCache
from namesrv.subscriptions import SubscriptionRegistry
from protocol.codes import RequestCode, SerializeType
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, decode_frame, encode_command
from protocol.push_codec import encode_go_away

log = logging.getLogger(__name__)


@implementer(IPushProducer)
class NamesrvConnection(Protocol):
    """One client or broker connection.

    It registers itself as the producer of its own transport: when unsent output passes
    ``server.output_buffer_bytes`` the transport pauses it, and the connection stops reading
    requests and is skipped by notification ticks until the output drains. That is what
    keeps memory bounded against a peer that writes but never reads.
    """

    def __init__(self, server: NameServer, conn_id: int) -> None:
        self.server = server
        self.conn_id = conn_id
        self.peer = "?"
        self.decoder = FrameDecoder(server.config.server.max_frame_size)
        self.output_blocked = False
        self.serialize_type = SerializeType.JSON
        self.closed = False

    @property
    def _transport(self) -> Any:
        return self.transport

    def connectionMade(self) -> None:
        peer = self._transport.getPeer()
        self.peer = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        transport: Any = self.transport
        if hasattr(transport, "bufferSize"):
            transport.bufferSize = self.server.config.server.output_buffer_bytes
        transport.registerProducer(self, True)
        self.server._connection_made(self)

    def dataReceived(self, data: bytes) -> None:
        server = self.server
        try:
            frames = self.decoder.feed_raw(data)
        except FrameError as exc:
            self._refuse_stream(exc)
            return
        answer_from_cache = server.route_responses.answer
        write = self._transport.write
        for frame in frames:
            if self.closed:
                return
            answer = answer_from_cache(frame)
            if answer is not None:
                write(answer)
                continue
            try:
                command = decode_frame(frame)
            except FrameError as exc:
                self.decoder.fail()
                self._refuse_stream(exc)
                return
            server._handle(self, command, frame)

    def _refuse_stream(self, exc: FrameError) -> None:
        self.server.counters["frames_refused"] += 1
        log.warning("closing connection %s from %s: %s", self.conn_id, self.peer, exc.remark)
        self._transport.abortConnection()

    def send(self, data: bytes) -> None:
        if not self.closed:
            self._transport.write(data)

    @property
    def unsent_bytes(self) -> int:
        """Output accepted by the transport but not yet taken by the kernel."""
        t: Any = self.transport
        try:
            return len(t.dataBuffer) - t.offset + t._tempDataLen
        except AttributeError:  # a transport that does not buffer (tests' string transports)
            return 0

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.closed = True
        self.server._connection_lost(self)

    # IPushProducer, driven by our own transport's write buffer.
    def pauseProducing(self) -> None:
        self.output_blocked = True
        self._transport.pauseProducing()

    def resumeProducing(self) -> None:
        self.output_blocked = False
        self._transport.resumeProducing()

    def stopProducing(self) -> None:
        self.output_blocked = True


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
        self.epoch = epoch or secrets.token_hex(8)
        cfg = self.config
        self.journal: EventJournal | NullJournal
        if cfg.journal.directory:
            self.journal = EventJournal(
                cfg.journal.directory,
                max_file_bytes=cfg.journal.max_file_bytes,
                max_files=cfg.journal.max_files,
                clock_ms=self._now_ms,
            )
        else:
            self.journal = NullJournal()
        self.registry = RouteRegistry(
            self.clock,
            broker_expiry_ms=cfg.registry.broker_expiry_ms,
            listener=self._routes_touched,
            delete_topic_with_broker_registration=cfg.registry.delete_topic_with_broker_registration,
        )
        self.kv = KVConfig(on_change=self._kv_changed)
        if cfg.registry.kv_config_path:
            self.kv.load(cfg.registry.kv_config_path)
        self.route_responses = RouteResponseCache()
        self.routes = RouteBodies(
            self.registry, self.kv, order_message_enable=cfg.registry.order_message_enable
        )
        self.subscriptions = SubscriptionRegistry(
            cfg.push.max_topics_per_connection, cfg.push.max_total_subscriptions
        )
        self.detector = ChangeDetector(
            self.routes.fingerprint, self.subscriptions, cfg.push.suppress, self.epoch
        )
        self.detector.on_event = self._detector_event
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
            )
        )
        self.frames = NotificationFrames(self.epoch)
        self._recovering = False
        self._recovery_started_ms = 0
        self._recovery_frames = 0
        self._port: IListeningPort | None = None
        self.metrics_port: IListeningPort | None = None
        self._loops: list[task.LoopingCall] = []
        self._stopping: defer.Deferred[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def listen(self) -> IListeningPort:
        cfg = self.config
        host, port = parse_listen(cfg.server.listen)
        factory: Factory = _Factory(self)
        if cfg.server.tls != "disabled":
            from namesrv.tls import TlsRoutingFactory, server_options

            options = server_options(cfg.server.tls_cert_file, cfg.server.tls_key_file)
            factory = TlsRoutingFactory(
                factory, options, cfg.server.tls, self.counters, self._size_transport
            )
        self._port = self.reactor.listenTCP(port, factory, backlog=1024, interface=host)
        if cfg.metrics.listen:
            from namesrv.metrics import listen_metrics

            self.metrics_port = listen_metrics(self.reactor, cfg.metrics.listen, self)
        self._start_timers()
        bound: Any = self._port.getHost()  # type: ignore[misc]
        log.info(
            "name server listening on %s:%s (epoch %s, push %s, tls %s, acl %s)",
            bound.host,
            bound.port,
            self.epoch,
            "on" if cfg.push.enabled else "off",
            cfg.server.tls,
            "on" if cfg.acl.enabled else "off",
        )
        return self._port

    def _size_transport(self, transport: Any) -> None:
        """Under TLS the connection writes to the TLS layer; bound the socket's buffer too."""
        if hasattr(transport, "bufferSize"):
            transport.bufferSize = self.config.server.output_buffer_bytes

    def _start_timers(self) -> None:
        cfg = self.config
        self._every(cfg.registry.scan_interval_ms, self._scan)
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
        for conn in list(self.connections.values()):
            conn.send(frame)
        log.info("GoAway sent to %d connections; closing in %d ms", len(self.connections), grace)
        stopped: defer.Deferred[None] = defer.Deferred()
        self._stopping = stopped
        port: Any = self._port
        listening = defer.maybeDeferred(port.stopListening) if port else defer.succeed(None)
        if self.metrics_port is not None:
            metrics_port: Any = self.metrics_port
            both = [listening, defer.maybeDeferred(metrics_port.stopListening)]
            listening = defer.gatherResults(both).addCallback(lambda _: None)

        def close_all() -> None:
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

    def _connection_made(self, conn: NamesrvConnection) -> None:
        self.connections[conn.conn_id] = conn
        self.counters["connections_opened"] += 1

    def _connection_lost(self, conn: NamesrvConnection) -> None:
        if self.connections.pop(conn.conn_id, None) is None:
            return
        self.counters["connections_closed"] += 1
        released = self.subscriptions.drop_connection(conn)
        self.detector.forget_connection(conn)
        self.registry.on_channel_close(conn.conn_id)
        if released:
            self.journal.record(
                "connection_closed", conn=conn.conn_id, released_topics=len(released)
            )

    def _handle(self, conn: NamesrvConnection, command: RemotingCommand, frame: bytes) -> None:
        if command.is_response:
            self.counters["responses_ignored"] += 1
            return
        if command.code == RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED:
            conn.serialize_type = SerializeType(command.serialize_type)
        response = self.processor.process(conn, command)
        if response is None:
            return
        encoded = encode_command(response)
        conn.send(encoded)
        if command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            topic = command.ext_fields.get("topic", "")
            self.route_responses.store(frame, command, response, topic, encoded)

    # -- route changes -----------------------------------------------------------------------

    def _routes_touched(self, topics: Any, cause: ChangeCause) -> None:
        self.routes.invalidate(topics)
        self.route_responses.invalidate(topics)
        self.detector.mark(topics, cause)

    def _kv_changed(self, namespace: str, key: str) -> None:
        if namespace == ORDER_TOPIC_CONFIG_NAMESPACE:
            self._routes_touched((key,), ChangeCause.ORDER_CONF)

    def _detector_event(self, event: str, fields: dict[str, Any]) -> None:
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
        """One detection tick: settle changed routes and send at most one frame per connection."""
        started = self._timer()
        try:
            self._tick()
        finally:
            self.tick_durations.observe(max(0.0, self._timer() - started))

    def _tick(self) -> None:
        budget = None
        if self._recovering:
            per_tick = self.config.push.recovery_notifications_per_second
            budget = max(1, per_tick * self.config.push.tick_interval_ms // 1000)
        now_ms = self._now_ms()
        notes = self.detector.tick(
            now_ms,
            can_send=self._can_send,
            degraded=self.pressure.degraded,
            max_notifications=budget,
        )
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
        for note in notes:
            conn: Any = note.conn
            data = frame(note, conn.serialize_type)
            conn.send(data)
            total_bytes += len(data)
        self.counters["notifications_sent"] += len(notes)
        self.counters["notification_bytes"] += total_bytes
        topic_list = sorted(frames.topics)
        self.journal.record(
            "notification_sent",
            connections=len(notes),
            topics=len(topic_list),
            frames=len(notes),
            bytes=total_bytes,
            topic_list=topic_list[:100],
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
        return out
