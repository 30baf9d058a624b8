"""The composition root: builds the name server's parts from their config slices, wires them,
listens, stops, and gathers their counters; it decides nothing itself.

Connections, ports, timers and shutdown are ``namesrv.net``'s; requests ``namesrv.requests``'s
(the door frames come in by); routes ``namesrv.routes``'s; route push ``namesrv.push``'s; the
journal, metrics, audit and typed events ``namesrv.ops``'s. What is left here is which part
hears of which event, and which timers drive them.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IListeningPort

from namesrv.config import NamesrvConfig, replay_record_file, state_file_path
from namesrv.net.connection import NamesrvConnection
from namesrv.net.hub import ConnectionHub
from namesrv.net.lifecycle import ListeningPorts, Shutdown, Timers
from namesrv.ops.audit_trail import AuditTrail, BrokerDepartures
from namesrv.ops.clock import Clock, now_ms
from namesrv.ops.events import EventCounters, EventFanOut
from namesrv.ops.heap_trim import HeapTrim
from namesrv.ops.journal import open_journal
from namesrv.ops.metrics import DurationHistogram
from namesrv.push.broker_events import BrokerEventBook
from namesrv.push.change_detector import ChangeDetector
from namesrv.push.deleted_topics import DeletedTopics
from namesrv.push.inline_routes import InlineRoutes
from namesrv.push.pressure import PressureMonitor, PsutilSampler, Sample
from namesrv.push.route_marks import RouteMarks
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.push.tick import Ticker
from namesrv.requests import operations
from namesrv.requests.acl import AccessControl
from namesrv.requests.context import ConfigControl
from namesrv.requests.door import RequestDoor
from namesrv.requests.processors import RequestProcessor, Services
from namesrv.requests.register.turns import RegisterTurns
from namesrv.requests.replay_record import ReplayRecord
from namesrv.requests.route_response_cache import RouteResponseCache
from namesrv.requests.startup_window import StartupWindow
from namesrv.routes.events import BrokerEvent
from namesrv.routes.kv_config import KVConfig
from namesrv.routes.listings import Listings
from namesrv.routes.registry import RouteRegistry
from namesrv.routes.route_bodies import RouteBodies
from protocol.frame import RemotingCommand, SplitFrame
from protocol.notify_frames import NotifyFrames

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
        clock: Clock | None = None,
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
        self.clock: Clock = clock if clock is not None else reactor
        self.counters: Counter[str] = Counter()
        self.epoch = epoch or secrets.token_hex(8)
        self.journal = open_journal(cfg.journal, partial(now_ms, self.clock))
        self.events = EventFanOut(self.journal, EventCounters(self.counters))
        """Route push's typed events: the journal records them, the counters count them."""
        self.startup = StartupWindow(
            self.clock,
            cfg.server.wait_for_service_ms,
            cfg.server.wait_for_service_exempt_topics,
        )
        """The start-up window; it starts now."""
        self.audit = AuditTrail(self.clock)
        """The operator's audit trail (logger ``namesrv.audit``)."""
        self._build_routes(cfg)
        self._build_push(cfg, sampler, timer)
        self._build_requests(cfg)
        self._build_net(cfg)

    # -- the parts, each given what it needs when it is built ----------------------------------

    def _build_routes(self, cfg: NamesrvConfig) -> None:
        """The route tables, the KV config and the route bodies and answers derived from them."""
        self.registry = RouteRegistry(
            self.clock,
            broker_expiry_ms=cfg.registry.broker_expiry_ms,
            min_heartbeat_timeout_ms=cfg.registry.min_heartbeat_timeout_ms,
            listener=lambda topics, cause: self.marks.touched(topics, cause),
            delete_topic_with_broker_registration=cfg.registry.delete_topic_with_broker_registration,
            slice_topics=cfg.registry.register_slice_topics,
            broker_listener=self._broker_event,
        )
        self.kv = KVConfig(
            on_change=lambda namespace, key: self.marks.kv_changed(namespace, key),
            max_bytes=cfg.registry.max_kv_config_bytes,
        )
        kv_file = state_file_path(cfg.registry.kv_config_path)
        if kv_file is not None:
            self.kv.load(kv_file)
        self.route_responses = RouteResponseCache(max_bytes=cfg.server.route_cache_bytes)
        self.routes = RouteBodies(
            self.registry, self.kv, order_message_enable=cfg.registry.order_message_enable
        )

    def _build_push(
        self, cfg: NamesrvConfig, sampler: Callable[[], Sample] | None, timer: Callable[[], float]
    ) -> None:
        """Subscriptions, broker events, the change detector and the marks that feed it, the
        push tick and the memory pressure that slows it."""
        journaled = bool(cfg.journal.directory)
        self.subscriptions = SubscriptionRegistry(
            cfg.push.max_topics_per_connection,
            cfg.push.max_total_subscriptions,
            cfg.push.max_subscriptions_per_host,
        )
        self.broker_events = BrokerEventBook(
            cfg.push.broker_events, self.subscriptions, events=self.events
        )
        self.detector = ChangeDetector(
            self.registry.route_exists_check(),
            self.subscriptions,
            cfg.push.suppress,
            self.epoch,
            events=self.events,
            broker_events=self.broker_events,
            # Per-topic journal records (and the mark times they carry) only with a journal.
            clock_ms=partial(now_ms, self.clock) if journaled else None,
            report_routes=journaled,
            deleted_topics=DeletedTopics(cfg.push.deleted_topics_remembered),
        )
        self.marks = RouteMarks(
            self.detector,
            self.routes,
            (self.route_responses,),
            self.registry,
            lambda: self.register_turns.schedule(),
            order_message_enable=cfg.registry.order_message_enable,
        )
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

    def _build_requests(self, cfg: NamesrvConfig) -> None:
        """Access control, the request processor and the registers answered over turns."""
        record_file = replay_record_file(cfg)
        self.replay_record = ReplayRecord(record_file) if record_file is not None else None
        self.acl = AccessControl(
            cfg.acl, wall_clock_ms=partial(now_ms, self.clock), record=self.replay_record
        )
        status = operations.PushStatusSource(  # push settings are fixed at start
            epoch=self.epoch,
            push_enabled=cfg.push.enabled,
            tick_interval_ms=cfg.push.tick_interval_ms,
            detector=self.detector,
            subscriptions=self.subscriptions,
            degraded=lambda: self.pressure.degraded,
            recovering=lambda: self.ticker.recovering,
            stats=self.stats,
            connections=lambda: list(self.connections.values()),
            startup=self.startup,
        )
        self._services = Services(
            config=cfg,
            registry=self.registry,
            kv=self.kv,
            routes=self.routes,
            subscriptions=self.subscriptions,
            detector=self.detector,
            listings=Listings(self.registry, cfg.registry.max_listing_bytes),
            events=self.events,
            acl=self.acl,
            operations=partial(operations.answer, status),
            config_control=ConfigControl(
                apply=self._run_with, listening=lambda: self.ports.address()
            ),
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
            counters=self.counters,
        )
        self.register_turns = RegisterTurns(
            self.processor,
            self.registry,
            self.clock,
            self.counters,
            on_settled=self.heap_trim.settled,
        )

    def _build_net(self, cfg: NamesrvConfig) -> None:
        """The connections' owner, the door their frames go up by, ports, timers, shutdown."""
        self.hub = ConnectionHub(
            cfg.server,
            reactor=self.reactor,
            clock=self.clock,
            counters=self.counters,
            route_cache=self.route_responses,
            frame_received=self._frame_received,
            departed=self._connection_departed,
            keeps_idle=self.subscriptions.topics_of,
            never_evict=lambda conn: (
                self.registry.has_channel(conn.conn_id) or self.register_turns.serving(conn)
            ),
        )
        self.connections: dict[int, NamesrvConnection] = self.hub.connections
        """Open connections by id (the hub's admission keeps them)."""
        self.door = RequestDoor(self.processor, self.register_turns, self.registry, self.hub)
        self.departures = BrokerDepartures(
            self.audit, self.acl, self.hub.peer_of, self.counters, self.hub.peer_log
        )
        self.ports = ListeningPorts(self.reactor, self.hub, self.counters, self.clock)
        self.timers = Timers(self.clock, self.counters)
        self.shutdown = Shutdown(cfg.server, self.hub, self.ports, self.clock, self.counters)

    @property
    def buffered_input(self) -> int:
        """Bytes of partly received frames and kept requests over all connections."""
        return self.hub.input.buffered

    @property
    def pending_registers(self) -> int:
        """Registers still being read or applied, plus register tables still being applied."""
        return self.register_turns.pending

    @property
    def metrics_port(self) -> IListeningPort | None:
        """The ``/metrics`` port, once listening (``metrics.listen`` set)."""
        return self.ports.metrics

    @property
    def main_port_bound(self) -> bool:
        """The name-server port listens (``listen()`` binds it before the metrics port)."""
        return self.ports.main is not None

    # -- lifecycle -----------------------------------------------------------------------------

    def listen(self) -> IListeningPort:
        cfg = self.config
        listening = self.ports.listen(cfg, self)
        self.hub.admission.start()
        every = self.timers.every
        every(cfg.registry.scan_interval_ms, self._scan)
        every(HOUSEKEEPING_INTERVAL_MS, self.hub.housekeep)
        every(HOUSEKEEPING_INTERVAL_MS, self.audit.release)
        self.ticker.start(every)
        self.pressure.start(every)
        self.startup.announce(lambda: (self.registry.broker_count, self.registry.topic_count))
        self.ports.announce(cfg, self.epoch)
        return listening

    def stop(self, grace_ms: int | None = None) -> defer.Deferred[None]:
        """Send GoAway to the connections that use route push, stop accepting, serve everyone
        on for the grace period, then close (``namesrv.net.lifecycle``)."""
        return self.shutdown.stop(
            grace_ms,
            [
                self.heap_trim.stop,
                self.hub.stop_holding_output,  # output held in this poll (GoAway too) first
                self.hub.admission.stop,
                self.timers.stop,
                self.ticker.stop,
                self.startup.stop,
                # Released now rather than when the transports report the loss, which comes
                # after the journal is closed: their records would be dropped.
                self.hub.close_all,
                self.journal.close,
                lambda: self.kv.close(timeout=STATE_CLOSE_TIMEOUT_S),
                self._close_replay_record,
            ],
        )

    def tick(self) -> None:
        """One push tick now (the timer runs them every ``push.tick_interval_ms``)."""
        self.ticker.tick()

    # -- what the parts tell each other ----------------------------------------------------------

    def _frame_received(
        self, conn: NamesrvConnection, command: RemotingCommand, frame: bytes | SplitFrame
    ) -> None:
        self.door.frame_received(conn, command, frame)

    def _connection_departed(self, conn: NamesrvConnection) -> None:
        self.detector.connection_closed(conn)
        self.departures.channel_closed(self.registry.on_channel_close(conn.conn_id), conn.peer)
        self.register_turns.drop_connection(conn)
        self.register_turns.schedule()  # a large departed broker's queue data leaves in slices

    def _broker_event(self, event: BrokerEvent) -> None:
        self.departures.broker_changed(event)
        self.acl.broker_changed(event.kind, event.cluster, event.broker_name, event.addrs)
        self.broker_events.record(event)
        self.ticker.broker_changed(event)

    def _run_with(self, config: NamesrvConfig) -> None:
        """UPDATE_NAMESRV_CONFIG's new config (only run-time keys differ): each part that uses
        a changed key is given its new value."""
        self.config = self._services.config = config
        self.marks.order_messages_switched(config.registry.order_message_enable)

    def _close_replay_record(self) -> None:
        if self.replay_record is not None:
            self.replay_record.close(timeout=STATE_CLOSE_TIMEOUT_S)

    def _scan(self) -> None:
        self.departures.scanned(self.registry.scan_not_active_brokers())
        self.register_turns.schedule()

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
        parts = (self.subscriptions, self.pressure, self.startup, self.detector, self.hub)
        for part in (*parts, self.route_responses):
            out.update(part.figures())
        out.update({f"rejected.acl_{k}": v for k, v in self.acl.rejections.items()})
        out["listing_builds"] = self._services.listings.builds
        out["kv_config_bytes"] = self.kv.size_bytes
        out["kv_listing_builds"] = self.kv.listing_builds
        out["kv_file_writes"] = self.kv.file_writes
        out["kv_persist_failures"] = self.kv.persist_failures
        out["register_topics_dropped"] = self.processor.register_topics_dropped
        out["audit_lines_suppressed"] = self.audit.dropped
        out["journal_suppressed_records"] = self.journal.suppressed_records
        chunks = self.processor.chunk_cache
        if chunks is not None:
            out["register_chunk_cache_bytes"] = chunks.bytes
            out["register_chunk_cache_hits"] = chunks.hits
            out["register_chunk_cache_misses"] = chunks.misses
            out["register_table_cache_hits"] = chunks.table_hits
        out["register_topics_skipped"] = self.registry.stats.topics_skipped
        out["register_tables_shared"] = self.registry.stats.tables_shared
        return out
