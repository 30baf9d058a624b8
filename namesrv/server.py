"""The composition root: builds the name server's parts from their config slices, listens,
stops, and gathers their counters.

It decides nothing itself. Connections and their bounds live in ``namesrv.net`` (the
:class:`~namesrv.net.hub.ConnectionHub` is the connections' owner), requests in
``namesrv.requests`` (processors, large registers by turns), routes in ``namesrv.routes``,
route push in ``namesrv.push`` (change detector, subscriptions, pressure, the tick) and the
journal and metrics in ``namesrv.ops``. What is left here is the wiring between them: which
part hears of which event, and the timers that drive them.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from twisted.internet import defer, task
from twisted.internet.interfaces import IListeningPort

from namesrv.config import JournalConfig, NamesrvConfig, replay_record_file, state_file_path
from namesrv.net import transport
from namesrv.net.connection import NamesrvConnection
from namesrv.net.hub import ConnectionHub
from namesrv.ops.audit_events import BrokerLeft, Who
from namesrv.ops.audit_trail import AuditTrail
from namesrv.ops.durations import DurationHistogram
from namesrv.ops.heap_trim import HeapTrim, malloc_trim
from namesrv.ops.journal import EventJournal, NullJournal, topic_list_fields
from namesrv.push.broker_events import BrokerEventBook
from namesrv.push.change_detector import ChangeDetector
from namesrv.push.deleted_topics import DeletedTopics
from namesrv.push.inline_routes import InlineRoutes
from namesrv.push.pressure import PressureMonitor, PsutilSampler, Sample
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.push.tick import Ticker
from namesrv.requests import operations
from namesrv.requests.acl import AccessControl
from namesrv.requests.context import ConfigControl
from namesrv.requests.processors import (
    PendingResponse,
    RequestProcessor,
    Services,
    SharedAnswer,
)
from namesrv.requests.register.turns import RegisterTurns
from namesrv.requests.replay_record import ReplayRecord
from namesrv.requests.route_response_cache import RouteResponseCache
from namesrv.requests.startup_window import StartupWindow
from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.events import BrokerEvent
from namesrv.routes.kv_config import KVConfig
from namesrv.routes.listings import Listings
from namesrv.routes.registry import RouteRegistry
from namesrv.routes.route_bodies import ORDER_TOPIC_CONFIG_NAMESPACE, RouteBodies
from namesrv.routes.tables import MASTER_ID
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand, SplitFrame, encode_command
from protocol.notify_frames import NotifyFrames
from protocol.push_codec import encode_go_away
from protocol.push_events import BrokerChangeKind

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL_MS = 1_000
"""How often overdue frames and idle connections are looked for: the timeouts' resolution."""
STATE_CLOSE_TIMEOUT_S = 30.0
"""At shutdown, how long the last KV change (or replay stamp) may take to reach its file."""


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
        self.config = cfg = config or NamesrvConfig()
        self.reactor = reactor
        self.clock = clock if clock is not None else reactor
        self.counters: Counter[str] = Counter()
        self.epoch = epoch or secrets.token_hex(8)
        self.journal = self._open_journal(cfg.journal)
        self.startup = StartupWindow(
            self.clock,
            cfg.server.wait_for_service_ms,
            cfg.server.wait_for_service_exempt_topics,
        )
        """The start-up window; it starts now."""
        self.audit = AuditTrail(self.clock)
        """The operator's audit trail (logger ``namesrv.audit``)."""
        self._warm_timer: Any = None
        self._build_routes(cfg)
        self._build_push(cfg, journaled=bool(cfg.journal.directory))
        self._build_requests(cfg)
        self._build_ticker(cfg, sampler, timer)
        self.hub = self._build_hub(cfg)
        self.connections: dict[int, NamesrvConnection] = self.hub.connections
        """Open connections by id (the hub's admission keeps them)."""
        self._port: IListeningPort | None = None
        self.metrics_port: IListeningPort | None = None
        self._loops: list[task.LoopingCall] = []
        self._stopping: defer.Deferred[None] | None = None

    # -- the parts, each given what it needs when it is built ----------------------------------

    def _open_journal(self, cfg: JournalConfig) -> EventJournal | NullJournal:
        if not cfg.directory:
            return NullJournal()
        return EventJournal(
            cfg.directory,
            max_file_bytes=cfg.max_file_bytes,
            max_files=cfg.max_files,
            max_total_bytes=cfg.max_total_bytes,
            max_records_per_second=cfg.max_records_per_second,
            max_topics_per_record=cfg.max_topics_per_record,
            max_bytes_per_second=cfg.max_bytes_per_second,
            max_bytes_per_connection_per_second=cfg.max_bytes_per_connection_per_second,
            clock_ms=self._now_ms,
        )

    def _build_routes(self, cfg: NamesrvConfig) -> None:
        """The route tables, the KV config and the route bodies and answers derived from them."""
        self.registry = RouteRegistry(
            self.clock,
            broker_expiry_ms=cfg.registry.broker_expiry_ms,
            min_heartbeat_timeout_ms=cfg.registry.min_heartbeat_timeout_ms,
            listener=self._routes_touched,
            delete_topic_with_broker_registration=cfg.registry.delete_topic_with_broker_registration,
            slice_topics=cfg.registry.register_slice_topics,
            broker_listener=self._broker_event,
        )
        self.kv = KVConfig(on_change=self._kv_changed, max_bytes=cfg.registry.max_kv_config_bytes)
        kv_file = state_file_path(cfg.registry.kv_config_path)
        if kv_file is not None:
            self.kv.load(kv_file)
        self.route_responses = RouteResponseCache(max_bytes=cfg.server.route_cache_bytes)
        self.routes = RouteBodies(
            self.registry, self.kv, order_message_enable=cfg.registry.order_message_enable
        )

    def _build_push(self, cfg: NamesrvConfig, *, journaled: bool) -> None:
        """Subscriptions, broker events and the change detector."""
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
            on_event=self._detector_event,
            broker_events=self.broker_events,
            # Per-topic journal records (and the mark times they carry) only with a journal.
            clock_ms=self._now_ms if journaled else None,
            report_routes=journaled,
            deleted_topics=DeletedTopics(cfg.push.deleted_topics_remembered),
        )

    def _build_requests(self, cfg: NamesrvConfig) -> None:
        """Access control, the request processor and the registers answered over turns."""
        record_file = replay_record_file(cfg)
        self.replay_record = ReplayRecord(record_file) if record_file is not None else None
        self.acl = AccessControl(cfg.acl, record=self.replay_record)
        self._services = Services(
            config=cfg,
            registry=self.registry,
            kv=self.kv,
            routes=self.routes,
            subscriptions=self.subscriptions,
            detector=self.detector,
            listings=Listings(self.registry, cfg.registry.max_listing_bytes),
            on_subscription_change=self._subscription_changed,
            acl=self.acl,
            operations=self._operations_answer,
            config_control=ConfigControl(apply=self._run_with, listening=self._listening),
            clock=self.clock,
            startup=self.startup,
            audit=self.audit,
        )
        self.processor = RequestProcessor(
            self._services,
            route_responses=self.route_responses,
            counters=self.counters,
        )
        self.heap_trim = HeapTrim(
            self.clock,
            cfg.registry.heap_trim_after_ms,
            busy=lambda: self.register_turns.pending > 0,
            trim=self._trim_heap,
        )
        self.register_turns = RegisterTurns(
            self.processor,
            self.registry,
            self.clock,
            self.counters,
            on_settled=self.heap_trim.settled,
        )

    def _build_ticker(
        self, cfg: NamesrvConfig, sampler: Callable[[], Sample] | None, timer: Callable[[], float]
    ) -> None:
        """The push tick and the memory pressure that slows it."""
        self.tick_durations = DurationHistogram()
        self.ticker = Ticker(
            cfg.push,
            detector=self.detector,
            frames=NotifyFrames(self.epoch),
            journal=self.journal,
            counters=self.counters,
            clock=self.clock,
            timer=timer,
            durations=self.tick_durations,
            registers_pending=lambda: self.register_turns.pending,
            inline=InlineRoutes(
                cfg.push,
                self.subscriptions,
                lambda topic, standard, legacy: self.routes.body(
                    topic, standard_json=standard, legacy=legacy
                ),
                self.detector.settled_version,
                self.counters,
            ),
        )
        self.pressure = PressureMonitor(
            sampler or PsutilSampler(), cfg.pressure, on_transition=self.ticker.pressure_changed
        )

    def _build_hub(self, cfg: NamesrvConfig) -> ConnectionHub:
        return ConnectionHub(
            cfg.server,
            reactor=self.reactor,
            clock=self.clock,
            counters=self.counters,
            route_cache=self.route_responses,
            frame_received=self._handle,
            departed=self._connection_departed,
            keeps_idle=self.subscriptions.topics_of,
            never_evict=lambda conn: (
                self.registry.has_channel(conn.conn_id) or self.register_turns.serving(conn)
            ),
        )

    @property
    def buffered_input(self) -> int:
        """Bytes of partly received frames and kept requests over all connections."""
        return self.hub.input.buffered

    @property
    def pending_registers(self) -> int:
        """Registers still being read or applied, plus register tables still being applied."""
        return self.register_turns.pending

    def _now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    # -- lifecycle -----------------------------------------------------------------------------

    def listen(self) -> IListeningPort:
        cfg = self.config
        listening = transport.listen(
            self.reactor,
            cfg.server,
            self.hub,
            self.counters,
            clock=self.clock,
            peer_log=self.hub.peer_log,
        )
        self._port = listening
        if hasattr(self.reactor, "after_dispatch"):  # the lean reactor: answers go in bursts
            self.hub.hold_output_while_dispatching(self.reactor)
        if cfg.metrics.listen:
            from namesrv.net.metrics_http import listen_metrics

            self.metrics_port = listen_metrics(self.reactor, cfg.metrics.listen, self)
        self.hub.admission.start()
        self._start_timers()
        self._start_warming_up()
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

    def _start_timers(self) -> None:
        cfg = self.config
        self._every(cfg.registry.scan_interval_ms, self._scan)
        self._every(HOUSEKEEPING_INTERVAL_MS, self.hub.housekeep)
        self._every(HOUSEKEEPING_INTERVAL_MS, self.audit.release)
        if cfg.push.enabled:
            self._every(cfg.push.tick_interval_ms, self.ticker.tick)
            self.ticker.start()
        if cfg.pressure.enabled:
            self._every(cfg.pressure.sample_interval_ms, self.pressure.sample_now)

    def _start_warming_up(self) -> None:
        """Log the start-up window and, from a timer on the server's clock, its end."""
        left = self.startup.left_ms()
        if left <= 0:
            return
        log.info(
            "warming up for %d ms (server.wait_for_service_ms): a lookup of a topic no broker "
            "has registered yet is answered SYSTEM_ERROR 'not ready', not TOPIC_NOT_EXIST",
            left,
        )
        self._warm_timer = self.clock.callLater(left / 1000.0, self._warmed_up)

    def _cancel_warm_timer(self) -> None:
        if self._warm_timer is not None and self._warm_timer.active():
            self._warm_timer.cancel()

    def _close_replay_record(self) -> None:
        if self.replay_record is not None:
            self.replay_record.close(timeout=STATE_CLOSE_TIMEOUT_S)

    def _warmed_up(self) -> None:
        self._warm_timer = None
        log.info(
            "warmed up after %d ms: %d brokers, %d topics heard; a topic without a route is "
            "answered TOPIC_NOT_EXIST from now on",
            self.startup.uptime_ms(),
            self.registry.broker_count,
            self.registry.topic_count,
        )

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
        """Send GoAway to the connections that use route push, stop accepting, serve everyone
        on for the grace period, then close."""
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
            "GoAway sent to the connections that use route push: %d of %d; closing in %d ms",
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
            # Each step runs whatever the one before raised: a stop that fails half-way would
            # leave the process running past its grace period.
            steps: list[Callable[[], object]] = [
                self.heap_trim.stop,
                self.hub.stop_holding_output,  # output held in this poll (GoAway too) first
                self.hub.admission.stop,
                *(loop.stop for loop in self._loops if loop.running),
                self.ticker.stop,
                self._cancel_warm_timer,
                # Released now rather than when the transports report the loss, which comes
                # after the journal is closed: their records would be dropped.
                self.hub.close_all,
                self.journal.close,
                lambda: self.kv.close(timeout=STATE_CLOSE_TIMEOUT_S),
                self._close_replay_record,
            ]
            for step in steps:
                try:
                    step()
                except Exception:
                    self.counters["shutdown_errors"] += 1
                    log.exception("error while stopping (%s); stopping goes on", step)
            listening.addBoth(lambda _: stopped.callback(None))

        if grace == 0:
            close_all()
        else:
            self.clock.callLater(grace / 1000.0, close_all)
        return stopped

    def _trim_heap(self) -> bool:
        self.counters["heap_trims"] += 1
        return malloc_trim()

    def tick(self) -> None:
        """One push tick now (the timer runs them every ``push.tick_interval_ms``)."""
        self.ticker.tick()

    # -- what the parts tell each other ----------------------------------------------------------

    def _handle(
        self, conn: NamesrvConnection, command: RemotingCommand, frame: bytes | SplitFrame
    ) -> None:
        answer = self.processor.handle(conn, command, frame)
        if answer is None:
            return
        if isinstance(answer, PendingResponse):
            size = len(frame) if isinstance(frame, bytes) else len(frame.head) + len(frame.body)
            self._answer_when_applied(conn, answer, size)
            return
        if self.registry.pending_jobs:  # e.g. an unregister of a large broker
            self._schedule_registers()
        if isinstance(answer, SharedAnswer):
            self._send_shared(conn, command, answer)
            return
        conn.send(answer)

    def _send_shared(
        self, conn: NamesrvConnection, request: RemotingCommand, answer: SharedAnswer
    ) -> None:
        """A large answer goes out from its (shared) body while the total such answers may
        hold allows; past ``server.max_shared_output_bytes`` it is answered SYSTEM_BUSY."""
        if self.hub.shared_answer_admitted(answer.body):
            conn.send_shared(answer.head, answer.body)
            return
        self.counters["shared_answers_refused"] += 1
        self.hub.peer_log.warning(
            "shared_output",
            "answered %s from %s SYSTEM_BUSY: large answers not yet read hold %d bytes, "
            "server.max_shared_output_bytes=%d",
            request.code,
            conn.peer,
            self.hub.shared_output,
            self.config.server.max_shared_output_bytes,
        )
        busy = request.make_response(
            ResponseCode.SYSTEM_BUSY,
            "large answers not yet read by their clients fill server.max_shared_output_bytes; "
            "retry later",
        )
        conn.send(encode_command(busy))

    def _answer_when_applied(
        self, conn: NamesrvConnection, pending: PendingResponse, size: int
    ) -> None:
        """A register of ``size`` bytes answered over several reactor turns (``_handle`` hands
        it here)."""
        self.register_turns.answer_when_applied(conn, pending, size)

    def _schedule_registers(self) -> None:
        """Register tables left to apply go on in slices (``_handle`` asks for it)."""
        self.register_turns.schedule()

    def _connection_departed(self, conn: NamesrvConnection) -> None:
        released = self.subscriptions.drop_connection(conn)
        self.detector.forget_connection(conn)
        for event in self.registry.on_channel_close(conn.conn_id):
            self.audit.record(BrokerLeft.of(event), self._broker_who(event, conn.peer))
        self.register_turns.drop_connection(conn)
        self.register_turns.schedule()  # a large departed broker's queue data leaves in slices
        if released:
            self.journal.record(
                "connection_closed", conn=conn.conn_id, released_topics=len(released)
            )

    def _routes_touched(self, topics: Any, cause: ChangeCause) -> None:
        self.routes.invalidate(topics)
        self.route_responses.invalidate(topics)
        self.detector.mark(topics, cause)

    def _broker_event(self, event: BrokerEvent) -> None:
        self.counters[f"broker_events.{event.kind.name.lower()}"] += 1
        if event.cause is ChangeCause.EXPIRY:  # no request did it: the server tells the trail
            channel = event.channel  # the connection id it registered over, if still open
            conn = self.connections.get(channel) if isinstance(channel, int) else None
            peer = conn.peer if conn is not None else ""
            self.audit.record(BrokerLeft.of(event), self._broker_who(event, peer))
        self.acl.broker_changed(event.kind, event.cluster, event.broker_name, event.addrs)
        self.broker_events.record(event)
        if event.kind is BrokerChangeKind.ARRIVED and any(
            broker_id == MASTER_ID for broker_id, _ in event.addrs
        ):
            self.ticker.expedite()

    def _broker_who(self, event: BrokerEvent, peer: str) -> Who:
        """Who an expiry or a closed connection is charged to: the broker's connection and,
        with ACL on, the access key its name is bound to."""
        key = self.acl.owner_of(event.broker_name) if self.acl.enabled else None
        return Who(peer, key)

    def _run_with(self, config: NamesrvConfig) -> None:
        """UPDATE_NAMESRV_CONFIG's new config (only run-time keys differ): each part that uses
        a changed key is given its new value."""
        old, self.config = self.config, config
        self._services.config = config
        enabled = config.registry.order_message_enable
        if enabled != old.registry.order_message_enable:
            # Every topic with an order conf moves: reported in slices, as a large register's
            # table is applied, so the switch costs no turn more than a slice.
            moved = self.routes.set_order_message_enable(enabled)
            self.registry.report_later("order_message_enable", moved, ChangeCause.ORDER_CONF)
            self.register_turns.schedule()

    @property
    def main_port_bound(self) -> bool:
        """The name-server port listens (``listen()`` binds it before the metrics port)."""
        return self._port is not None

    def _listening(self) -> str | None:
        if self._port is None:
            return None
        bound: Any = self._port.getHost()  # type: ignore[misc]
        host = f"[{bound.host}]" if ":" in bound.host else bound.host
        return f"{host}:{bound.port}"

    def _kv_changed(self, namespace: str, key: str) -> None:
        # The order conf is part of a route only when order messages are on.
        if namespace == ORDER_TOPIC_CONFIG_NAMESPACE and self.config.registry.order_message_enable:
            self._routes_touched((key,), ChangeCause.ORDER_CONF)

    def _detector_event(self, event: str, fields: dict[str, Any]) -> None:
        if event == "suppressed_counts":  # no journal: counted, not recorded
            for rule, count in fields["rules"].items():
                self.counters[f"suppressed.{rule}"] += count
            return
        if event == "route_changed":
            self.journal.route_changed(fields)
            return
        if event == "suppressed":
            for rule in fields.get("rules", ()):
                self.counters[f"suppressed.{rule}"] += 1
            self.journal.route_suppressed(fields)
            return
        self.journal.record(event, **fields)

    def _operations_answer(self, code: int, request: RemotingCommand) -> RemotingCommand:
        source = operations.PushStatusSource(
            epoch=self.epoch,
            push_enabled=self.config.push.enabled,
            tick_interval_ms=self.config.push.tick_interval_ms,
            detector=self.detector,
            subscriptions=self.subscriptions,
            degraded=lambda: self.pressure.degraded,
            recovering=lambda: self.ticker.recovering,
            stats=self.stats,
            connections=lambda: list(self.connections.values()),
            startup=self.startup,
        )
        return operations.answer(source, code, request)

    def _subscription_changed(self, event: str, conn: Any, topics: list[str]) -> None:
        self.journal.record(event, conn=conn.conn_id, **topic_list_fields(topics))

    def _scan(self) -> None:
        expired = self.registry.scan_not_active_brokers()
        self.register_turns.schedule()
        if expired:
            self.counters["brokers_expired"] += len(expired)
            self.hub.peer_log.warning(
                "brokers_expired",
                "%d brokers expired after missing heartbeats (first: %s)",
                len(expired),
                expired[0],
            )

    # -- stats -----------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counters for operators and tests: connections, refusals, push and detector figures."""
        out = dict(self.counters)
        handled = self.processor.handled.copy()
        handled["GET_ROUTEINFO_BY_TOPIC"] += self.route_responses.hits
        out.update({f"handled.{k}": v for k, v in handled.items() if v})
        out.update({f"refused.{k}": v for k, v in self.processor.refused.items()})
        out.update({f"limit_refusals.{k}": v for k, v in self.processor.limit_refusals.items()})
        out["brokers"] = self.registry.broker_count
        out["topics"] = self.registry.topic_count
        out["subscriptions"] = self.subscriptions.total
        out["subscribed_connections"] = self.subscriptions.connection_count
        out["degraded"] = int(self.pressure.degraded)
        out["warming_up"] = int(self.startup.warming_up)
        out["uptime_ms"] = self.startup.uptime_ms()
        deleted = self.detector.deleted_topics
        out["deleted_topics"] = len(deleted)
        out["deleted_topics_forgotten"] = deleted.forgotten
        out["connections"] = len(self.connections)
        out["route_cache_hits"] = self.route_responses.hits
        out["ticks"] = self.detector.stats.ticks
        out["suppressed_changes"] = self.detector.stats.suppressed_changes
        out["push_pending_connections"] = self.detector.pending_connections
        out["push_pending_topics"] = self.detector.pending_topic_count
        out.update({f"rejected.acl_{k}": v for k, v in self.acl.rejections.items()})
        out["buffered_input_bytes"] = self.buffered_input
        out["shared_output_bytes"] = self.hub.shared_output
        out["listing_builds"] = self._services.listings.builds
        out["route_cache_bytes"] = self.route_responses.size_bytes
        out["route_cache_entries"] = len(self.route_responses)
        out["kv_config_bytes"] = self.kv.size_bytes
        out["kv_listing_builds"] = self.kv.listing_builds
        out["kv_file_writes"] = self.kv.file_writes
        out["kv_persist_failures"] = self.kv.persist_failures
        out["register_topics_dropped"] = self.processor.register_topics_dropped
        out["route_cache_resets"] = self.route_responses.resets
        out["route_cache_uncacheable"] = self.route_responses.uncacheable
        out["log_lines_suppressed"] = self.hub.peer_log.dropped
        out["audit_lines_suppressed"] = self.audit.dropped
        out["pressure_sample_errors"] = self.pressure.sample_errors
        out["journal_suppressed_records"] = getattr(self.journal, "suppressed_records", 0)
        chunks = self.processor.chunk_cache
        if chunks is not None:
            out["register_chunk_cache_bytes"] = chunks.bytes
            out["register_chunk_cache_hits"] = chunks.hits
            out["register_chunk_cache_misses"] = chunks.misses
        out["register_topics_skipped"] = self.registry.stats.topics_skipped
        return out
