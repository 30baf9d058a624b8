"""What the job found, as plain values: the report, the tuning and ``summary.json`` read this.

Kept free of Spark so the tuning and the report can be tested on hand-made summaries.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, TypeVar


@dataclass(frozen=True, slots=True)
class InputQuality:
    files: int
    lines: int
    corrupt: int
    invalid: int
    unknown_events: int = 0
    oversized: int = 0
    """Lines of ``--max-line-bytes`` or more: left out unread, not among ``lines``."""

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
    recovered_cpu_percent: float | None = None
    recovered_memory_percent: float | None = None
    """The readings of the sample that recovered."""

    @property
    def degraded_ms(self) -> int | None:
        if self.recovered_at_ms is None:
            return None
        return self.recovered_at_ms - self.degraded_at_ms


_Timed = TypeVar("_Timed", Transition, Episode)


def per_name_server(
    items: Iterable[_Timed], at: Callable[[_Timed], int]
) -> list[tuple[str | None, list[_Timed]]]:
    """``items`` grouped by name server (in name order), each group in time order."""
    by_source: dict[str | None, list[_Timed]] = {}
    for item in items:
        by_source.setdefault(item.namesrv, []).append(item)
    return [
        (source, sorted(by_source[source], key=at))
        for source in sorted(by_source, key=lambda s: s or "")
    ]


def pair_episodes(transitions: Iterable[Transition]) -> list[Episode]:
    """Episodes from transitions, per name server in time order.

    A recovery with no episode open (the journal starts mid-episode) and a drain with no
    recovery open are skipped; a second ``degraded`` while one is open (a restart in between
    leaves the first unfinished) closes the first as unrecovered.
    """
    episodes: list[Episode] = []
    for source, ordered in per_name_server(transitions, lambda t: t.ts_ms):
        open_ep: Episode | None = None
        for t in ordered:
            if t.event == "degradation" and t.degraded:
                if open_ep is not None:
                    relapse = open_ep.recovered_at_ms is not None
                    episodes.append(replace(open_ep, relapsed=relapse))
                open_ep = Episode(source, t.ts_ms, t.cpu_percent, t.memory_percent)
            elif t.event == "degradation" and open_ep is not None:
                if open_ep.recovered_at_ms is None:
                    open_ep = replace(
                        open_ep,
                        recovered_at_ms=t.ts_ms,
                        recovered_cpu_percent=t.cpu_percent,
                        recovered_memory_percent=t.memory_percent,
                        backlog_connections=t.pending_connections,
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
class Span:
    """A stretch of one name server's journal time, ``start_ms`` included, ``end_ms`` not."""

    namesrv: str | None
    start_ms: int
    end_ms: int


def degraded_spans(episodes: Iterable[Episode], last_ms: int) -> list[Span]:
    """Where push was off: each episode from its degradation to its recovery, or past
    ``last_ms`` (the journal's last record) when it never recovered."""
    return [Span(e.namesrv, e.degraded_at_ms, e.recovered_at_ms or last_ms + 1) for e in episodes]


@dataclass(frozen=True, slots=True)
class SlowConnection:
    namesrv: str | None
    conn: int
    skips: int
    max_pending_topics: int


SPREAD_CAUSES = ("broker_arrived", "confirm")
"""Learning causes whose fetch the client delays on purpose, spread over a window so that a
broker's arrival or departure does not bring every client at once (docs/telemetry.md)."""

CDF_POINTS = 101
"""Quantiles 0, 0.01, ... 1 of each propagation distribution, for the report's plots."""


@dataclass(slots=True)
class Charts:
    """The small aggregates the report plots: time series in ``bucket_ms`` buckets (at most
    about ``MAX_BUCKETS``), top-N lists and quantile curves. Bounded whatever the input size."""

    bucket_ms: int = 0
    changes_by_cause: list[tuple[int, str, int]] = field(default_factory=list)
    """(bucket start ms, cause, changes): a change with two causes counts under both."""
    changes_notified: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(bucket start ms, notified changes, held changes, suppressed changes): a held change
    was owed a notification but detected while push was degraded, so it went out only with
    the backlog after recovery."""
    ticks: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(bucket start ms, ticks that sent, frames, bytes)."""
    propagation_cdf: dict[str, list[float]] = field(default_factory=dict)
    """Per learning cause: end-to-end propagation (ms) at quantiles 0, 0.01, ... 1."""
    top_topics: list[tuple[str, int, int]] = field(default_factory=list)
    """(topic, changes, notified changes), most changed first."""
    top_clients: list[tuple[str, int, float, float]] = field(default_factory=list)
    """(client, versions learned, p99 ms, max ms), largest end-to-end lag first."""


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
    """Changes owed a notification, the held ones included."""
    held_changes: int = 0
    """Changes owed a notification but detected while push was degraded (inside an episode of
    their name server): sent only with the backlog after recovery."""
    detection: Distribution = field(default_factory=Distribution)
    """Per change: its first registry mutation to its detection at a tick (journal records
    with ``mutated_at_ms``)."""
    changes_without_mutation_time: int = 0
    """Changes from a name server that does not journal ``mutated_at_ms``: their propagation
    starts at detection."""
    suppressed_by_rule: dict[str, int] = field(default_factory=dict)
    """Per rule, the silent changes it silenced: a change silenced by several rules counts
    under each."""
    changes_by_cause_count: dict[str, int] = field(default_factory=dict)
    """Changes by how many causes they have ("1", "2", ...): ``changes_by_cause`` counts a
    change once under each of its causes."""
    suppressed_by_rule_count: dict[str, int] = field(default_factory=dict)
    """Silent changes (their ``suppressed`` records) by how many rules silenced them."""
    staleness: Distribution = field(default_factory=Distribution)
    """Per change: how long clients kept an older route, from its first registry mutation to
    the earliest moment a version at or after it had reached every client that learned that
    version (``ties.change_table``); changes no client learned, nor anything after, left out."""
    staleness_held: Distribution = field(default_factory=Distribution)
    """The same over the held changes, those superseded before reaching a client included."""
    held_reached: int = 0
    """Held changes some client learned (their own version reached it)."""
    held_superseded: int = 0
    """Held changes no client learned, replaced by a later version of their topic that did:
    clients held the older route until that one reached them."""
    held_unresolved: int = 0
    """Held changes after which no client learned any version of their topic (no client held
    it, or the telemetry ends first): no staleness."""
    held_unlearned_topic: int | None = None
    """Of ``held_unresolved``, those of a topic no client learned any version of in the whole
    recording (nobody held it); the others follow the last version clients learned of theirs.
    None in a summary from a job that did not split them."""
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
    """End to end: the route change (its first registry mutation) to each client first holding
    that version, by the learning fetch's cause; key ``all`` for every cause."""
    propagation_detection: dict[str, Distribution] = field(default_factory=dict)
    """Its first part: mutation to detection at a tick (the wait for the tick)."""
    propagation_delivery: dict[str, Distribution] = field(default_factory=dict)
    """Its second part: detection to the client holding the version."""
    propagation_unspread: Distribution = field(default_factory=Distribution)
    """End to end, every cause but ``SPREAD_CAUSES``: the figure the target is held to, as
    a wait clients add on purpose is no delay of the name server's."""
    propagation_request: dict[str, Distribution] = field(default_factory=dict)
    """Within the second part: detection to the client's request for the route (the NOTIFY's
    trip, the poll or check that found it, or the refetch spread a client applies on purpose
    after a broker arrival or departure, causes ``SPREAD_CAUSES``)."""
    propagation_quiet: Distribution = field(default_factory=Distribution)
    """End to end, for changes whose notification was suppressed: how long clients stayed
    stale."""
    learned_changes: int = 0
    learned_inline: int = 0
    """Of ``learned_changes``, those learned from a route inside the notification (cause
    ``inline``): no request was sent for them."""
    unmatched_fetches: int = 0
    """Fetches whose (topic, version) no journal change explains: other name servers,
    journal gaps, or an upstream name server (version 0)."""
    charts: Charts = field(default_factory=Charts)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["journal"]["used"] = self.journal.used
        if self.telemetry is not None:
            out["telemetry"]["used"] = self.telemetry.used
        out["episodes"] = [dict(asdict(e), degraded_ms=e.degraded_ms) for e in self.episodes]
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Summary:
        """The summary ``to_json`` wrote (``summary.json``'s ``summary``)."""
        nested: dict[str, Callable[[Any], Any]] = {
            "journal": _quality,
            "telemetry": lambda q: None if q is None else _quality(q),
            "slowest": lambda rows: [SlowConnection(**r) for r in rows],
            "episodes": lambda rows: [Episode(**_known(Episode, r)) for r in rows],
            "charts": _charts,
        }
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in doc:
                continue
            raw = doc[f.name]
            if f.name in nested:
                values[f.name] = nested[f.name](raw)
            elif isinstance(raw, dict) and raw and all(isinstance(v, dict) for v in raw.values()):
                values[f.name] = {k: Distribution(**v) for k, v in raw.items()}
            elif isinstance(raw, dict) and "p99" in raw:
                values[f.name] = Distribution(**raw)
            else:
                values[f.name] = raw
        return cls(**values)


def _known(cls: Any, raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw``'s fields that ``cls`` takes (to_json adds derived ones, such as ``used``)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in raw.items() if k in names}


def _quality(raw: Mapping[str, Any]) -> InputQuality:
    return InputQuality(**_known(InputQuality, raw))


def _charts(raw: Mapping[str, Any]) -> Charts:
    """JSON gives lists where the charts hold tuples."""
    values: dict[str, Any] = {
        k: v if not isinstance(v, list) else [tuple(row) for row in v]
        for k, v in _known(Charts, raw).items()
    }
    return Charts(**values)


def distribution(row: Any) -> Distribution:
    """From an aggregate row (or None) with ``count``, ``pcts`` ([p50, p90, p99]) and ``max``."""
    if row is None or not row["count"]:
        return Distribution()
    p50, p90, p99 = (float(v) for v in row["pcts"])
    return Distribution(int(row["count"]), p50, p90, p99, float(row["max"]))


EXACT_BELOW = 2_048
"""Histogram buckets are single values below this magnitude; above it, each power of two is
cut into 1,024 buckets (a relative error under 0.1 %)."""


class Histogram:
    """Counts per bucket (the bucket's value closest to zero), as Spark aggregates them; the
    driver reads percentiles and quantile curves from it."""

    def __init__(self) -> None:
        self.counts: dict[float, int] = {}
        self.max: float | None = None

    def add(self, value: float, count: int, largest: float | None = None) -> None:
        self.counts[value] = self.counts.get(value, 0) + count
        if largest is not None and (self.max is None or largest > self.max):
            self.max = largest

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    def quantiles(self, fractions: Iterable[float]) -> list[float]:
        """The value of rank ``max(1, ceil(q * count))`` for each q (the smallest value with at
        least that share of the values at or below it)."""
        order = sorted(self.counts.items())
        if not order:
            return []
        seen = list(itertools.accumulate(n for _, n in order))
        out: list[float] = []
        for q in fractions:
            rank = min(seen[-1], max(1, math.ceil(q * seen[-1] - 1e-9)))
            value = order[bisect.bisect_left(seen, rank)][0]
            # A bucket's value is rounded; never past the exact largest value.
            out.append(value if self.max is None else min(value, self.max))
        return out

    def distribution(self) -> Distribution:
        total = self.count
        if not total:
            return Distribution()
        p50, p90, p99 = self.quantiles((0.5, 0.9, 0.99))
        top = self.max if self.max is not None else max(self.counts)
        return Distribution(total, p50, p90, p99, float(top))
