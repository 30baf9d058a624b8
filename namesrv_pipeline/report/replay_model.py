"""The replay's pure half: which thresholds are replayed (the scenarios and the what-if grid),
the degraded spans they give on the recorded journal, the end-to-end distribution a replay
yields, and its result with the calibration that decides whether it may give a verdict.

The model, per client-version of the figure the target is held to (every client-version tied
to a change, without the refetches clients spread on purpose):

- learned by push (causes ``PUSH_CAUSES``; a suppressed change too, when a NOTIFY of its
  topic brought it): the name server's part is replayed. The change is detected at the first
  tick at or after its registry mutation: the first regular tick (every
  ``push.tick_interval_ms`` from the journal's first record) or, when sooner, the first tick
  its name server brought forward after a master arrived (its ``early_tick`` records,
  ``early_ticks``). If its name server's push is degraded then, it goes out at the
  span's recovery plus the client's place in the backlog drain: the place it had in the
  recorded drain (stretched by the ratio of the recovery rates), or the whole drain for a
  change the recording did not hold (a version the replay holds behind a later one of its
  topic reaches the client with it: the client then holds it or newer). The client's part
  (the NOTIFY emitted to the route applied) is drawn from the recorded delivery of notified
  fetches;
- learned otherwise (a poll, a version check, a lookup): the recorded lag, which no replayed
  key changes.

Degraded spans come from the recorded transitions: the journal holds the CPU and memory
readings only of the samples that switched push off and on. Push degrades where it did (the
high marks are never tuned); a recovery whose readings are not under the tested low marks does
not end the span, which runs on to the next recovery that is, or past the journal's end; a
longer sample interval sees a recovery up to its growth later; the drain stretches by the
ratio of the recovery rates.

The early ticks are the recorded ones whatever tick is tested. What a different tick would
have changed about them is second-order and not modelled. The name server brings at most one
tick forward between two regular ones and drops it when a regular tick comes first: under a
shorter tick some recorded early ticks would not have run (a regular tick detects what was
pending no later than the early tick would have; only a change made between that regular tick
and the early tick's time would have waited for the next regular tick, where the replay still
has the early tick detect it), and under a longer one arrivals the recording's regular ticks
forestalled, or that followed another arrival in the same interval, would have brought ticks
forward of their own (the replay leaves their changes to the regular tick).

Before any verdict the recorded thresholds are replayed and set beside the recording over the
same client-versions (``Calibration``); a model further than ``MAX_MODEL_ERROR`` from it at
p99, or a replay over too few client-versions or without the readings it needs, gives no
verdict, and says why.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from namesrv.config import ConfigError, NamesrvConfig, PressureConfig
from namesrv_pipeline.report.summary import Distribution, Episode, Summary, per_name_server
from namesrv_pipeline.report.tuning import Recommendation, tuned
from namesrv_pipeline.report.tuning import end_to_end as recorded_end_to_end

PUSH_CAUSES = ("notify", "inline")
"""Learning causes whose timing the replay models: the fetch a NOTIFY caused, or the route
the NOTIFY carried."""

MAX_MODEL_ERROR = 0.10
"""The current thresholds' replay must be within this share of the recorded p99."""
MIN_REPLAYED = 20
"""Fewer client-versions than this make no verdict."""

TICK = "push.tick_interval_ms"
RATE = "push.recovery_notifications_per_second"
SAMPLE = "pressure.sample_interval_ms"
CPU_LOW = "pressure.cpu_low_percent"
MEMORY_LOW = "pressure.memory_low_percent"
REPLAYED_KEYS = (TICK, CPU_LOW, MEMORY_LOW, SAMPLE, RATE)
"""The keys the model simulates, in the order the report shows their what-if curves."""
TICK_GRID_MS = (100, 200, 500, 1_000)
LOW_MARK_SHARES = (0.2, 0.4, 0.6, 0.8)
"""Grid low marks: these shares of the high mark."""
SCALES = (0.5, 1, 2, 4)
"""Grid sample intervals and recovery rates: these multiples of the current value."""


@dataclass(frozen=True, slots=True)
class Release:
    """Push off on one name server from ``start_ms`` to ``end_ms`` (excluded, the recovery);
    a change detected in it and owed to the connection drained last reaches the wire at
    ``release_ms`` (recovery plus drain)."""

    namesrv: str | None
    start_ms: int
    end_ms: int
    release_ms: int


def releases(
    episodes: Iterable[Episode], recorded: NamesrvConfig, tested: NamesrvConfig, last_ms: int
) -> list[Release]:
    """The degraded spans the ``tested`` thresholds would have given on the journal that was
    recorded under ``recorded`` (see the module's model)."""
    old, new = recorded.pressure, tested.pressure
    late = max(0, new.sample_interval_ms - old.sample_interval_ms)
    stretch = drain_stretch(recorded, tested)
    out: list[Release] = []
    for source, ordered in per_name_server(episodes, lambda e: e.degraded_at_ms):
        start: int | None = None
        for e in ordered:
            start = e.degraded_at_ms if start is None else start
            if e.recovered_at_ms is None or not _relieved(e, new):
                continue  # still degraded under the tested low marks
            end = e.recovered_at_ms + late
            out.append(Release(source, start, end, end + round((e.drain_ms or 0) * stretch)))
            start = None
        if start is not None:
            out.append(Release(source, start, last_ms + 1, last_ms + 1))
    return out


@dataclass(frozen=True, slots=True)
class EarlyTick:
    """A tick one name server brought forward after a master arrived, run at ``at_ms``: the
    first such tick at or after a mutation from ``start_ms`` to ``end_ms`` (excluded)."""

    namesrv: str | None
    start_ms: int
    end_ms: int
    at_ms: int


def early_ticks(recorded: Iterable[tuple[str | None, int]], reach_ms: int) -> list[EarlyTick]:
    """Per recorded early tick (name server, time), the mutations it is the first early tick
    at or after: those since its name server's previous one, and at most ``reach_ms`` (the
    longest tested tick) before it, since an earlier mutation meets a regular tick first
    whatever the tick tested. The spans of one name server are disjoint."""
    by_source: dict[str | None, set[int]] = {}
    for source, at in recorded:
        by_source.setdefault(source, set()).add(at)
    out: list[EarlyTick] = []
    for source, times in by_source.items():
        previous: int | None = None
        for at in sorted(times):
            start = at - reach_ms + 1 if previous is None else max(at - reach_ms, previous) + 1
            out.append(EarlyTick(source, start, at + 1, at))
            previous = at
    return out


def drain_stretch(recorded: NamesrvConfig, tested: NamesrvConfig) -> float:
    """How much longer a backlog takes to drain at the tested recovery rate."""
    rate = recorded.push.recovery_notifications_per_second
    return rate / max(1, tested.push.recovery_notifications_per_second)


def _relieved(e: Episode, p: PressureConfig) -> bool:
    """Whether the recovering sample's readings are below the low marks (a reading the
    journal lacks does not hold push off)."""
    cpu, memory = e.recovered_cpu_percent, e.recovered_memory_percent
    return (cpu is None or cpu < p.cpu_low_percent) and (
        memory is None or memory < p.memory_low_percent
    )


def scenarios(
    current: NamesrvConfig, recommendations: Sequence[Recommendation]
) -> dict[str, NamesrvConfig]:
    """``current``, ``tuned`` (every suggestion) and each replayed suggestion alone."""
    out = {"current": current, "tuned": tuned(current, list(recommendations))}
    for r in recommendations:
        if r.changed and r.key in REPLAYED_KEYS:
            out[f"{r.key} alone"] = tuned(current, [r])
    return out


def value_of(config: NamesrvConfig, key: str) -> int | float:
    section, _, name = key.partition(".")
    value: int | float = getattr(getattr(config, section), name)
    return value


def grid_values(key: str, current: NamesrvConfig, suggested: int | float) -> list[int | float]:
    """The values of ``key`` the what-if curve replays: a few round ones around the current
    value, the current and the suggested one, those the config accepts."""
    now = value_of(current, key)
    if key == TICK:
        wanted: list[int | float] = list(TICK_GRID_MS)
    elif key in (CPU_LOW, MEMORY_LOW):
        high = value_of(current, key.replace("_low_", "_high_"))
        wanted = [round(high * share, 1) for share in LOW_MARK_SHARES]
    else:
        wanted = [max(1, round(now * scale)) for scale in SCALES]
    return sorted({*wanted, now, suggested})


def grid(
    current: NamesrvConfig, recommendations: Sequence[Recommendation]
) -> dict[str, dict[int | float, NamesrvConfig]]:
    """Per replayed key, per grid value: the current config with that one value changed."""
    suggested = {r.key: r.suggested for r in recommendations}
    out: dict[str, dict[int | float, NamesrvConfig]] = {}
    for key in REPLAYED_KEYS:
        points: dict[int | float, NamesrvConfig] = {}
        for value in grid_values(key, current, suggested.get(key, value_of(current, key))):
            try:
                points[value] = tuned(current, [Recommendation(key, value, value, "")])
            except ConfigError:
                continue  # outside what the config accepts (a low mark above its high one)
        out[key] = points
    return out


def weighted_distribution(values: np.ndarray, weights: np.ndarray) -> Distribution:
    """Count and percentiles of ``values`` each counted ``weights`` times: the value of rank
    ``ceil(q * count)``, as ``summary.Histogram`` reads them."""
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if not len(values):
        return Distribution()
    order = np.argsort(values, kind="stable")
    values, seen = values[order], np.cumsum(weights[order])
    total = int(seen[-1])

    def at(q: float) -> float:
        rank = min(total, max(1, math.ceil(q * total - 1e-9)))
        return float(values[int(np.searchsorted(seen, rank))])

    return Distribution(total, at(0.5), at(0.9), at(0.99), float(values[-1]))


def end_to_end(
    server: Mapping[float, int], client: Mapping[float, int], kept: Mapping[float, int]
) -> Distribution:
    """The replayed end-to-end distribution: every pushed client-version's server part
    (``server``: mutation to the NOTIFY's emission, ms: count) plus a client part drawn from
    the recorded ones (``client``: emission to the route applied), the two independent, and
    the client-versions whose lag is kept as recorded (``kept``)."""
    s_val, s_n = _arrays(server)
    c_val, c_n = _arrays(client)
    if not len(c_val):  # no client part recorded: the server's part alone
        c_val, c_n = np.zeros(1), np.ones(1)
    share = c_n / c_n.sum()
    values = (s_val[:, None] + c_val[None, :]).ravel()
    weights = (s_n[:, None] * share[None, :]).ravel()
    k_val, k_n = _arrays(kept)
    d = weighted_distribution(np.concatenate([values, k_val]), np.concatenate([weights, k_n]))
    return replace(d, count=round(s_n.sum() + k_n.sum()))


def _arrays(counts: Mapping[float, int]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.fromiter(counts.keys(), dtype=float, count=len(counts)),
        np.fromiter(counts.values(), dtype=float, count=len(counts)),
    )


def missing_readings(
    s: Summary,
    telemetry: bool,
    recommendations: Sequence[Recommendation],
    pressure_on: bool = True,
) -> str | None:
    """What keeps the replay of ``s`` from a verdict whatever its figures: too few
    client-versions, or a tuned key whose replay needs readings the journal lacks
    (``unjudged``); None when nothing does."""
    count = recorded_end_to_end(s).count
    if not telemetry or not count:
        return "no client telemetry tied to the journal's changes: nothing to replay against"
    if count < MIN_REPLAYED:
        return f"only {count} client-versions were recorded, {MIN_REPLAYED} needed"
    if s.changes_without_mutation_time:
        return (
            f"{s.changes_without_mutation_time:,} changes lack their mutation time "
            "(`mutated_at_ms`): their wait for the tick is unknown"
        )
    unknown = unjudged(s, pressure_on)
    tuned_unknown = [r.key for r in recommendations if r.changed and r.key in unknown]
    if tuned_unknown:
        key = tuned_unknown[0]
        return f"`{key}` is tuned, but {unknown[key]}"
    return None


PRESSURE_KEYS = (CPU_LOW, MEMORY_LOW, SAMPLE, RATE)
"""The replayed keys that act through push's degraded spans: their replay needs the journal's
``degradation`` records."""


def unjudged(s: Summary, pressure_on: bool = True) -> dict[str, str]:
    """Per replayed key whose what-if curve the journal cannot judge, why: its replay needs
    records or readings the journal lacks. With pressure thresholds on (``pressure_on``) and
    no ``degradation`` record, push either never degraded or its records were lost (dropped,
    an older server): the telemetry then shows any hold only as a late NOTIFY, which a tested
    low mark, sample interval or recovery rate cannot move, so their curves would be flat
    whatever the truth. A recovery without its CPU (memory) reading leaves unknown where a
    tested CPU (memory) low mark would have ended the span."""
    if not pressure_on:
        return {}
    if not s.episodes:
        why = (
            "the journal has no `degradation` record while pressure thresholds are on: push "
            "never degraded or its records are missing, and the replay cannot tell which"
        )
        return {key: why for key in PRESSURE_KEYS}
    recovered = [e for e in s.episodes if e.recovered_at_ms is not None]
    out: dict[str, str] = {}
    for key, what, lacking in (
        (CPU_LOW, "CPU", sum(e.recovered_cpu_percent is None for e in recovered)),
        (MEMORY_LOW, "memory", sum(e.recovered_memory_percent is None for e in recovered)),
    ):
        if lacking:
            out[key] = (
                f"{lacking} of {len(recovered)} recoveries lack their {what} reading: where "
                "a tested low mark would have ended push's degradation is unknown"
            )
    return out


@dataclass(frozen=True, slots=True)
class GridPoint:
    value: int | float
    end_to_end: Distribution
    frames_per_tick: float | None
    """Mean notification frames of a tick that sent, on the recorded ticks merged into the
    tested tick (a connection counted once per tick)."""


@dataclass(frozen=True, slots=True)
class Curve:
    """One replayed key's what-if curve."""

    key: str
    current: int | float
    suggested: int | float
    points: list[GridPoint] = field(default_factory=list)
    no_verdict: str | None = None
    """Why the journal cannot judge this key (``unjudged``): its points are shown, not judged;
    None when it can."""


@dataclass(frozen=True, slots=True)
class Calibration:
    """The recorded thresholds replayed beside what was recorded, over the same
    client-versions."""

    recorded: Distribution
    replayed: Distribution

    @property
    def error(self) -> float | None:
        """The replay's p99 off the recorded one, as a share of it (signed)."""
        got, want = self.replayed.p99, self.recorded.p99
        if got is None or not want:
            return None
        return (got - want) / want


@dataclass(frozen=True, slots=True)
class ReplayResult:
    target_ms: int
    calibration: Calibration
    scenarios: dict[str, Distribution] = field(default_factory=dict)
    ticks: dict[str, int] = field(default_factory=dict)
    curves: list[Curve] = field(default_factory=list)
    missing: str | None = None
    """Why the replay can give no verdict whatever its figures (too few client-versions,
    readings the journal lacks); None when nothing is missing."""

    @property
    def no_verdict(self) -> str | None:
        """Why there is no verdict, or None when there is one."""
        if self.missing is not None:
            return self.missing
        error = self.calibration.error
        if error is None:
            return "the recording has no end-to-end figure to calibrate the model on"
        if abs(error) > MAX_MODEL_ERROR:
            return (
                f"the model misses the recorded p99 by {error:+.1%} (more than "
                f"{MAX_MODEL_ERROR:.0%}) with the recorded thresholds"
            )
        return None

    @property
    def met(self) -> bool | None:
        """Whether the tuned thresholds meet the target on the replayed journal; None: no
        verdict."""
        d = self.scenarios.get("tuned")
        if self.no_verdict is not None or d is None or d.p99 is None:
            return None
        return d.p99 <= self.target_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "target_ms": self.target_ms,
            "met": self.met,
            "no_verdict": self.no_verdict,
            "missing": self.missing,
            "model_error": self.calibration.error,
            "calibration": {
                "recorded": asdict(self.calibration.recorded),
                "replayed": asdict(self.calibration.replayed),
            },
            "scenarios": {
                name: dict(asdict(d), tick_interval_ms=self.ticks[name])
                for name, d in self.scenarios.items()
            },
            "grid": [
                {
                    "key": c.key,
                    "current": c.current,
                    "suggested": c.suggested,
                    "points": [
                        {
                            "value": p.value,
                            "end_to_end": asdict(p.end_to_end),
                            "frames_per_tick": p.frames_per_tick,
                        }
                        for p in c.points
                    ],
                    "no_verdict": c.no_verdict,
                }
                for c in self.curves
            ],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ReplayResult:
        cal = doc["calibration"]
        return cls(
            int(doc["target_ms"]),
            Calibration(Distribution(**cal["recorded"]), Distribution(**cal["replayed"])),
            {
                name: Distribution(**{k: v for k, v in d.items() if k != "tick_interval_ms"})
                for name, d in doc["scenarios"].items()
            },
            {name: int(d["tick_interval_ms"]) for name, d in doc["scenarios"].items()},
            [
                Curve(
                    c["key"],
                    c["current"],
                    c["suggested"],
                    [
                        GridPoint(p["value"], Distribution(**p["end_to_end"]), p["frames_per_tick"])
                        for p in c["points"]
                    ],
                    c.get("no_verdict"),
                )
                for c in doc["grid"]
            ],
            doc.get("missing"),
        )


__all__ = [
    "MAX_MODEL_ERROR",
    "PRESSURE_KEYS",
    "PUSH_CAUSES",
    "REPLAYED_KEYS",
    "Calibration",
    "Curve",
    "EarlyTick",
    "GridPoint",
    "Release",
    "ReplayResult",
    "early_ticks",
    "end_to_end",
    "grid",
    "releases",
    "scenarios",
    "unjudged",
]
