"""The replay check: the recorded journal's route changes run again under other thresholds
(the current ones, the tuned ones, each tuned value alone), to say whether the end-to-end
target would have been met.

The model, per change owed a notification (its causes against ``[push.suppress]``):

- detection at the first tick at or after its registry mutation, ticks every
  ``push.tick_interval_ms`` from the journal's first record;
- if push is degraded then (a span of its name server, below), the change is held until the
  span's release: recovery, then the backlog drain. Clients then get the topic's latest
  version: of the changes of one topic held in one span only the last reaches them, and only
  it is counted (as the recorded telemetry counts only the versions clients learned);
- then the delivery p99 of the recorded notified fetches (a constant: the sum's p99 is
  over-estimated, never under).

Degraded spans come from the recorded transitions: the journal holds the CPU and memory
readings only of the samples that switched push off and on, not the load between them. Push
still degrades where it did (the high marks are never tuned). A recovery whose readings are
not below the tested low marks does not end the span: it runs to the next recovery that is, or
past the journal's end. A longer sample interval sees a recovery up to its growth later. The
drain stretches by the ratio of the recovery rates. Pure planning here; one Spark aggregation
over the journal's changes in ``replay``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from namesrv.config import NamesrvConfig, PressureConfig
from namesrv.push.change_detector import RULE_OF_CAUSE
from pipeline.spans import span_values, sql_text
from pipeline.stats import histogram_bucket
from pipeline.summary import Distribution, Episode, Histogram, Summary, per_name_server
from pipeline.tuning import Recommendation, Targets, end_to_end, tuned

REPLAYED_KEYS = frozenset(
    {
        "push.tick_interval_ms",
        "push.recovery_notifications_per_second",
        "pressure.sample_interval_ms",
        "pressure.cpu_low_percent",
        "pressure.memory_low_percent",
    }
)
"""The keys the model simulates; a suggestion for another key is replayed only in ``tuned``."""


@dataclass(frozen=True, slots=True)
class Release:
    """Push off on one name server from ``start_ms`` to ``end_ms`` (excluded); a change
    detected in it reaches the wire at ``release_ms`` (recovery plus drain)."""

    namesrv: str | None
    start_ms: int
    end_ms: int
    release_ms: int


def releases(
    episodes: Iterable[Episode],
    recorded: NamesrvConfig,
    tested: NamesrvConfig,
    last_ms: int,
) -> list[Release]:
    """The degraded spans the ``tested`` thresholds would have given on the journal that was
    recorded under ``recorded`` (see the module's model)."""
    old, new = recorded.pressure, tested.pressure
    late = max(0, new.sample_interval_ms - old.sample_interval_ms)
    stretch = recorded.push.recovery_notifications_per_second / max(
        1, tested.push.recovery_notifications_per_second
    )
    out: list[Release] = []
    for source, ordered in per_name_server(episodes, lambda e: e.degraded_at_ms):
        start: int | None = None
        for e in ordered:
            start = e.degraded_at_ms if start is None else start
            if e.recovered_at_ms is None or not _relieved(e, new):
                continue  # still degraded under the tested low marks
            end = e.recovered_at_ms + late
            drain = round((e.drain_ms or 0) * stretch)
            out.append(Release(source, start, end, end + drain))
            start = None
        if start is not None:
            out.append(Release(source, start, last_ms + 1, last_ms + 1))
    return out


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


@dataclass(frozen=True, slots=True)
class ReplayResult:
    target_ms: int
    delivery_p99_ms: float | None
    """Added to every change's simulated wait; None: no notified fetch was recorded, so the
    figures are the name server's part alone."""
    recorded_p99_ms: float | None
    """The end-to-end p99 the telemetry recorded (``tuning.end_to_end``), to set the model
    beside."""
    scenarios: dict[str, Distribution] = field(default_factory=dict)
    ticks: dict[str, int] = field(default_factory=dict)

    @property
    def met(self) -> bool | None:
        """Whether the tuned thresholds meet the target on the replayed journal."""
        d = self.scenarios.get("tuned")
        if d is None or d.p99 is None:
            return None
        return d.p99 <= self.target_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "target_ms": self.target_ms,
            "delivery_p99_ms": self.delivery_p99_ms,
            "recorded_p99_ms": self.recorded_p99_ms,
            "met": self.met,
            "scenarios": {
                name: dict(
                    tick_interval_ms=self.ticks[name],
                    count=d.count,
                    p50=d.p50,
                    p90=d.p90,
                    p99=d.p99,
                    max=d.max,
                )
                for name, d in self.scenarios.items()
            },
        }


def _detected(tick_ms: int, first_ms: int) -> Column:
    return F.expr(f"m + pmod({first_ms} - m, {tick_ms})")


def _owed(config: NamesrvConfig) -> str:
    """SQL: whether a change is owed a notification under ``config``'s ``[push.suppress]``
    (a change no cause of which is suppressed; the recorded ``notify`` when it names none)."""
    rules = config.push.suppress
    silent = sorted(c.value for c, rule in RULE_OF_CAUSE.items() if getattr(rules, rule))
    if not silent:
        return "(size(causes) > 0 OR notify)"
    listed = ", ".join(sql_text(c) for c in silent)
    return (
        f"(CASE WHEN size(causes) = 0 THEN notify"
        f" ELSE exists(causes, c -> NOT array_contains(array({listed}), c)) END)"
    )


def replay(
    changes: DataFrame,
    s: Summary,
    current: NamesrvConfig,
    recommendations: Sequence[Recommendation],
    targets: Targets,
) -> ReplayResult | None:
    """The replay of ``changes`` (the journal's usable ``route_changed`` rows) under every
    scenario, in one aggregation; None for a journal without changes."""
    if s.first_ts_ms is None or not s.changes:
        return None
    last = s.last_ts_ms or s.first_ts_ms
    tested = scenarios(current, recommendations)
    delivery = s.delivery.p99
    add = round(delivery or 0)
    # Scenarios of the same tick and the same spans replay alike (a suggestion alone often
    # changes neither): each such set is computed once, under its first name.
    spans: dict[str, list[Release]] = {}
    ticks: dict[str, int] = {}
    computed_as: dict[str, str] = {}
    first_of: dict[tuple[int, tuple[Release, ...]], str] = {}
    for name, cfg in tested.items():
        spanned = releases(s.episodes, current, cfg, last)
        tick = cfg.push.tick_interval_ms
        computed_as[name] = first_of.setdefault((tick, tuple(spanned)), name)
        if computed_as[name] == name:
            spans[name], ticks[name] = spanned, tick
    facts = [
        F.struct(F.lit(name).alias("k"), _detected(tick, s.first_ts_ms).alias("d"))
        for name, tick in ticks.items()
    ]
    rel, m = F.col("rel"), F.col("m")
    free = rel.isNull()
    detected = (
        changes.where(F.expr(_owed(current)))
        .select("namesrv", "topic", F.coalesce(F.col("mutated_at_ms"), F.col("ts_ms")).alias("m"))
        .select("namesrv", "topic", "m", F.explode(F.array(*facts)).alias("f"))
        .select("namesrv", "topic", "m", "f.*")
    )
    # A change detected in a degraded span reaches the wire at the span's release.
    waits = (
        span_values(detected, spans, "d", lambda r: r.release_ms, "rel", key="k")
        .withColumn("v", F.when(free, F.col("d") - m + add))
        # A change sent at once counts in its scenario's histogram. Held ones are counted
        # per topic and release: clients get the topic's latest version when push resumes,
        # and the versions it superseded while held reach no client at all.
        .groupBy(
            "k",
            F.when(free, histogram_bucket(F.col("v"))).alias("h"),
            F.when(~free, F.col("namesrv")).alias("ns"),
            F.when(~free, F.col("topic")).alias("held_topic"),
            "rel",
        )
        .agg(F.count(F.lit(1)).alias("n"), F.max("v").alias("top"), F.max(m).alias("latest"))
    )
    latest = (rel - F.col("latest") + add).alias("v")
    rows = (
        waits.where(free)
        .select("k", "h", "n", "top")
        .unionByName(
            waits.where(~free)
            .select("k", latest)
            .groupBy("k", histogram_bucket(F.col("v")).alias("h"))
            .agg(F.count(F.lit(1)).alias("n"), F.max("v").alias("top"))
        )
        .collect()
    )
    hists: dict[str, Histogram] = {name: Histogram() for name in spans}
    for r in rows:
        hists[r["k"]].add(float(r["h"]), int(r["n"]), float(r["top"]))
    figures = {name: h.distribution() for name, h in hists.items()}
    return ReplayResult(
        targets.propagation_p99_ms,
        delivery,
        end_to_end(s).p99,
        {name: figures[computed_as[name]] for name in tested},
        {name: cfg.push.tick_interval_ms for name, cfg in tested.items()},
    )


__all__ = ["Release", "ReplayResult", "releases", "replay", "scenarios"]
