"""What the job found, as plain values: the report, the tuning and ``summary.json`` read this.

Kept free of Spark so the tuning and the report can be tested on hand-made summaries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class InputQuality:
    files: int
    lines: int
    corrupt: int
    invalid: int
    unknown_events: int = 0

    @property
    def used(self) -> int:
        return self.lines - self.corrupt - self.invalid - self.unknown_events


@dataclass(frozen=True, slots=True)
class MatchWindow:
    """How a client fetch is tied to the journal change of its (topic, version).

    Versions restart when a name server restarts, so the same (topic, version) can name
    several changes over a long journal: a fetch is tied to the latest change detected at most
    ``max_lag_ms`` before it. ``clock_skew_ms`` lets a client clock run behind the server's.
    """

    clock_skew_ms: int = 1_000
    max_lag_ms: int = 600_000


@dataclass(frozen=True, slots=True)
class Distribution:
    """Count and percentiles of one measure (milliseconds, frames or bytes)."""

    count: int = 0
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None


@dataclass(frozen=True, slots=True)
class Transition:
    """One ``degradation`` or ``backlog_drained`` journal record, as the pairing needs it."""

    namesrv: str | None
    ts_ms: int
    event: str
    degraded: bool | None = None
    cpu_percent: float | None = None
    memory_percent: float | None = None
    pending_connections: int | None = None
    frames: int | None = None
    duration_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Episode:
    """One stretch of degraded push, from the transition in to the backlog drained."""

    namesrv: str | None
    degraded_at_ms: int
    cpu_percent: float | None
    memory_percent: float | None
    recovered_at_ms: int | None = None
    """None: the journal ends (or the server restarted) while degraded."""
    backlog_connections: int | None = None
    drain_ms: int | None = None
    drain_frames: int | None = None
    relapsed: bool = False
    """Degraded again before the backlog drained."""

    @property
    def degraded_ms(self) -> int | None:
        if self.recovered_at_ms is None:
            return None
        return self.recovered_at_ms - self.degraded_at_ms


def pair_episodes(transitions: Iterable[Transition]) -> list[Episode]:
    """Episodes from transitions, per name server in time order.

    A recovery with no episode open (the journal starts mid-episode) and a drain with no
    recovery open are skipped; a second ``degraded`` while one is open (a restart in between
    leaves the first unfinished) closes the first as unrecovered.
    """
    by_source: dict[str | None, list[Transition]] = {}
    for t in transitions:
        by_source.setdefault(t.namesrv, []).append(t)
    episodes: list[Episode] = []
    for source in sorted(by_source, key=lambda s: s or ""):
        open_ep: Episode | None = None
        for t in sorted(by_source[source], key=lambda t: t.ts_ms):
            if t.event == "degradation" and t.degraded:
                if open_ep is not None:
                    relapse = open_ep.recovered_at_ms is not None
                    episodes.append(replace(open_ep, relapsed=relapse))
                open_ep = Episode(source, t.ts_ms, t.cpu_percent, t.memory_percent)
            elif t.event == "degradation" and open_ep is not None:
                if open_ep.recovered_at_ms is None:
                    open_ep = replace(
                        open_ep, recovered_at_ms=t.ts_ms, backlog_connections=t.pending_connections
                    )
            elif (
                t.event == "backlog_drained"
                and open_ep is not None
                and open_ep.recovered_at_ms is not None
            ):
                episodes.append(replace(open_ep, drain_ms=t.duration_ms, drain_frames=t.frames))
                open_ep = None
        if open_ep is not None:
            episodes.append(open_ep)
    return episodes


@dataclass(frozen=True, slots=True)
class SlowConnection:
    namesrv: str | None
    conn: int
    skips: int
    max_pending_topics: int


@dataclass(slots=True)
class Summary:
    journal: InputQuality
    telemetry: InputQuality | None
    first_ts_ms: int | None = None
    last_ts_ms: int | None = None
    changes: int = 0
    changes_by_kind: dict[str, int] = field(default_factory=dict)
    changes_by_cause: dict[str, int] = field(default_factory=dict)
    notified_changes: int = 0
    suppressed_by_rule: dict[str, int] = field(default_factory=dict)
    broker_events: dict[str, int] = field(default_factory=dict)
    """Journal ``broker_event`` records by "KIND cause" (``DEPARTED unregister``)."""
    notification_ticks: int = 0
    notification_frames: int = 0
    notification_bytes: int = 0
    frames_per_tick: Distribution = field(default_factory=Distribution)
    frame_bytes: Distribution = field(default_factory=Distribution)
    """Per tick, its bytes over its frames: the size of one connection's notification."""
    subscribed_topics: int = 0
    unsubscribed_topics: int = 0
    connections_closed: int = 0
    slow_skips: int = 0
    slow_connections: int = 0
    slowest: list[SlowConnection] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    fetches_by_cause: dict[str, int] = field(default_factory=dict)
    delivery: Distribution = field(default_factory=Distribution)
    """Client telemetry: NOTIFY emitted (server clock) to the route applied (client clock)."""
    propagation: dict[str, Distribution] = field(default_factory=dict)
    """Journal change detected to each client first holding that version, by the learning
    fetch's cause; key ``all`` for every cause."""
    propagation_quiet: Distribution = field(default_factory=Distribution)
    """The same, for changes whose notification was suppressed: how long clients stayed stale."""
    learned_changes: int = 0
    unmatched_fetches: int = 0
    """Fetches whose (topic, version) no journal change explains: other name servers,
    journal gaps, or an upstream name server (version 0)."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["journal"]["used"] = self.journal.used
        if self.telemetry is not None:
            out["telemetry"]["used"] = self.telemetry.used
        out["episodes"] = [dict(asdict(e), degraded_ms=e.degraded_ms) for e in self.episodes]
        return out


def distribution(row: Any) -> Distribution:
    """From an aggregate row (or None) with ``count``, ``pcts`` ([p50, p90, p99]) and ``max``."""
    if row is None or not row["count"]:
        return Distribution()
    p50, p90, p99 = (float(v) for v in row["pcts"])
    return Distribution(int(row["count"]), p50, p90, p99, float(row["max"]))
