"""The push tick: settle changed routes, build and send at most one frame per connection.

A tick works in slices of a reactor turn each and continues in the next turn when more is
left, so a large change set never holds the event loop. While CPU or memory pressure holds
push back (``push.pressure``) the change detector keeps every debt; once it ends the backlog
goes out paced at ``push.recovery_notifications_per_second``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from namesrv.config import PushConfig
from namesrv.ops.clock import Clock, DelayedCall, Every, now_ms
from namesrv.ops.journal import EARLY_TICK_EVENT, Journal, notification_sent_fields
from namesrv.ops.metrics import DurationHistogram
from namesrv.push.change_detector import ChangeDetector, Notification
from namesrv.push.inline_routes import InlineRoutes
from namesrv.push.pressure import Sample
from namesrv.push.subscriber import Subscriber
from namesrv.routes.events import BrokerEvent
from namesrv.routes.tables import MASTER_ID
from protocol.notify_frames import NotifyFrames
from protocol.push_events import BrokerChangeKind

log = logging.getLogger(__name__)

QUIET_SETTLE_DEFERRALS = 4
"""Ticks in a row that, while registers are being read or applied, settle only subscribed
topics: brokers of one cluster re-registering the same topics mark each once per burst, not
once per broker. Then one tick settles everything, and the count starts again."""


class Ticker:
    """Runs the ticks of one server; :meth:`pressure_changed` hears the pressure monitor."""

    def __init__(
        self,
        config: PushConfig,
        *,
        detector: ChangeDetector,
        frames: NotifyFrames,
        journal: Journal,
        counters: Counter[str],
        clock: Clock,
        timer: Callable[[], float],
        durations: DurationHistogram,
        registers_pending: Callable[[], int],
        inline: InlineRoutes | None = None,
    ) -> None:
        """``clock`` schedules continuations and stamps frames; ``timer`` (seconds, monotonic)
        measures the turn's settling time and the tick durations kept in ``durations``;
        ``registers_pending`` says how many registers are being read or applied; ``inline``
        chooses the routes sent inside the frames of connections that asked for them."""
        self._config = config
        self._inline = inline
        self._detector = detector
        self._frames = frames
        self._journal = journal
        self._counters = counters
        self._clock = clock
        self._timer = timer
        self._durations = durations
        self._registers_pending = registers_pending
        self._degraded = False
        """As the pressure monitor last said (:meth:`pressure_changed`)."""
        self.recovering = False
        """Degradation ended and connections still owe what they missed meanwhile."""
        self._recovery_started_ms = 0
        self._recovery_frames = 0
        self._continuation: DelayedCall | None = None
        self._quiet_deferrals = 0
        """Ticks in a row that left topics nobody subscribes to marked (registers pending)."""
        self._defers = False
        self._expedited: DelayedCall | None = None
        """The pending tick :meth:`expedite` brought forward."""
        self._timed = False
        """The regular ticks run on a timer (:meth:`start`): only then is one brought forward."""
        self._may_expedite = True
        """No tick was brought forward since the last regular one."""

    def _now_ms(self) -> int:
        return now_ms(self._clock)

    def tick(self) -> None:
        """One regular detection tick: settle changed routes and send at most one frame per
        connection.

        A tick does at most a slice of work (``push.settle_slice_topics`` topics settled, or
        ``push.settle_slice_ms`` of settling; ``push.notify_slice_connections`` frames built)
        per reactor turn; what is left is continued in the next turn, so a large change set
        never holds the event loop.
        """
        self._may_expedite = True
        expedited, self._expedited = self._expedited, None
        if expedited is not None and expedited.active():
            expedited.cancel()  # this tick carries what it was brought forward for
        self._run()

    def expedite(self) -> None:
        """Bring the next tick forward to ``push.master_arrival_tick_ms`` from now: a broker
        name has a new master. At most once between two regular ticks, so a burst of arrivals
        (a cluster starting) adds one tick per interval, not one per broker."""
        delay_ms = self._config.master_arrival_tick_ms
        if not (delay_ms > 0 and self._timed and self._may_expedite):
            return
        if self._continuation is not None:  # a tick in progress settles it
            return
        self._may_expedite = False
        self._counters["expedited_ticks"] += 1
        self._expedited = self._clock.callLater(delay_ms / 1000.0, self._expedited_tick, delay_ms)

    def broker_changed(self, event: BrokerEvent) -> None:
        """The registry's broker event: a broker name with a new master brings the next tick
        forward (:meth:`expedite`)."""
        if event.kind is BrokerChangeKind.ARRIVED and any(
            broker_id == MASTER_ID for broker_id, _ in event.addrs
        ):
            self.expedite()

    def start(self, every: Every) -> None:
        """With push on, run the regular ticks every ``push.tick_interval_ms`` on ``every``;
        from then on a tick may be brought forward."""
        if not self._config.enabled:
            return
        every(self._config.tick_interval_ms, self.tick)
        self._timed = True

    def stop(self) -> None:
        """No tick runs after this: the pending continuation and brought-forward tick are
        dropped (the server is closing every connection)."""
        self._timed = False
        for call in (self._expedited, self._continuation):
            if call is not None and call.active():
                call.cancel()
        self._expedited = self._continuation = None

    def _expedited_tick(self, delay_ms: int) -> None:
        """The tick :meth:`expedite` brought forward ``delay_ms`` after a master arrived; its
        ``early_tick`` record says when it ran, so an offline replay detects at this time the
        changes it settled (docs/journal.md)."""
        self._expedited = None
        self._journal.record(EARLY_TICK_EVENT, delay_ms=delay_ms)
        self._run()

    def _run(self) -> None:
        started = self._timer()
        try:
            self._tick()
        finally:
            self._durations.observe(max(0.0, self._timer() - started))

    def _tick(self) -> None:
        detector = self._detector
        continuation = self._continuation
        if continuation is None and not (
            detector.dirty_count or detector.pending_connections or self.recovering
        ):
            detector.stats.ticks += 1  # idle: nothing marked, nobody owed (what tick() finds)
            self._journal.flush()
            return
        self._begin(continuation)
        defer = self._defers
        push = self._config
        budget, rate_limited = self._budget()
        now_ms = self._now_ms()
        timer = self._timer
        settle_until = timer() + push.settle_slice_ms / 1000.0
        notes = detector.tick(
            now_ms,
            can_send=self._can_send,
            degraded=self._degraded,
            max_notifications=budget,
            max_settle=push.settle_slice_topics,
            out_of_time=lambda: timer() >= settle_until,
            subscribed_only=defer,
        )
        if defer:
            self._counters["settle_deferrals"] += 1
        more = (detector.dirty_count > 0 and not defer) or (
            len(notes) >= budget and not rate_limited and detector.pending_connections > 0
        )
        if more:
            self._counters["tick_continuations"] += 1
            self._continuation = self._clock.callLater(0, self._run)
        if notes:
            self._send_notifications(notes, now_ms)
            if self.recovering:
                self._recovery_frames += len(notes)
        if self.recovering and detector.pending_connections == 0:
            self._recovered(now_ms)
        self._journal.flush()

    def _begin(self, continuation: DelayedCall | None) -> None:
        """Start a continuation, or a scheduled tick with work: a scheduled tick decides for
        its continuations whether settling is deferred."""
        if continuation is not None:
            if continuation.active():
                continuation.cancel()
            self._continuation = None
            return
        defer = bool(self._registers_pending()) and (self._quiet_deferrals < QUIET_SETTLE_DEFERRALS)
        self._quiet_deferrals = self._quiet_deferrals + 1 if defer else 0
        self._defers = defer
        if self._inline is not None:
            self._inline.new_tick()  # inline budgets are per tick, continuations included

    def _budget(self) -> tuple[int, bool]:
        """The frames this turn may build, and whether the recovery rate is what limits it."""
        push = self._config
        budget = push.notify_slice_connections
        if not self.recovering:
            return budget, False
        per_tick = push.recovery_notifications_per_second
        recovery = max(1, per_tick * push.tick_interval_ms // 1000)
        return min(budget, recovery), recovery <= budget

    def _recovered(self, now_ms: int) -> None:
        self.recovering = False
        duration_ms = now_ms - self._recovery_started_ms
        log.info(
            "route push recovered: the backlog of missed changes is delivered (%d frames in %d ms)",
            self._recovery_frames,
            duration_ms,
        )
        self._journal.record(
            "backlog_drained", frames=self._recovery_frames, duration_ms=duration_ms
        )

    def _can_send(self, conn: Subscriber) -> bool:
        if conn.output_blocked or conn.closed:
            self._counters["slow_subscriber_skips"] += 1
            self._journal.record(
                "slow_subscriber_skipped",
                conn=conn.conn_id,
                pending_topics=self._detector.pending_topics_of(conn),
            )
            return False
        return True

    def _send_notifications(self, notes: list[Notification], now_ms: int) -> None:
        frames = self._frames
        frames.start_tick(now_ms)
        frame = frames.frame
        total_bytes = 0
        broker_entries = 0
        inline = self._inline
        choose = None
        if inline is not None and inline.active:
            # Routes are looked up now, in the turn the frames are written: a topic marked
            # since its notified version was settled goes plain (see InlineRoutes).
            inline.start_slice()
            choose = inline.choose
        for note in notes:
            conn = note.conn
            routes = choose(conn, note.changes).routes if choose is not None else ()
            data = frame(note.changes, note.brokers, note.sequence, conn.serialize_type, routes)
            conn.send(data)
            total_bytes += len(data)
            broker_entries += len(note.brokers)
        counters = self._counters
        counters["notifications_sent"] += len(notes)
        counters["notification_bytes"] += total_bytes
        counters["broker_entries_sent"] += broker_entries
        self._journal.record(
            "notification_sent",
            **notification_sent_fields(len(notes), frames.topics, total_bytes, broker_entries),
        )

    def pressure_changed(self, degraded: bool, sample: Sample) -> None:
        """The pressure monitor's transition: hold push back, or start the paced recovery."""
        self._degraded = degraded
        if degraded:
            log.warning(
                "route push degraded: cpu %.1f%%, memory %.1f%%; changes are held",
                sample.cpu_percent,
                sample.memory_percent,
            )
        else:
            self.recovering = True
            self._recovery_started_ms = self._now_ms()
            self._recovery_frames = 0
            log.warning(
                "route push resumed: cpu %.1f%%, memory %.1f%%; %d connections have missed changes",
                sample.cpu_percent,
                sample.memory_percent,
                self._detector.pending_connections,
            )
        self._counters["degradation_transitions"] += 1
        self._journal.record(
            "degradation",
            degraded=degraded,
            cpu_percent=sample.cpu_percent,
            memory_percent=sample.memory_percent,
            pending_connections=self._detector.pending_connections,
        )
