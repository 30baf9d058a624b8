"""The replay in Spark: the recorded client-versions run again under the current thresholds
(the calibration), the tuned ones, each tuned value alone and every point of the what-if grid
(``namesrv_pipeline.report.replay_model`` holds the model and the result).

One aggregation over the telemetry's per-change groups (cached by the telemetry's pass: one
group per change, learning cause and emission offset, not one row per fetch) joined with the
journal's changes gives, per scenario, the histogram of the name server's part of each pushed
client-version; the client's part and the client-versions the model keeps as recorded come
from the telemetry's pass as histograms, and the driver adds them up. Scenarios of the same
tick, spans and drain give the same figures, so each such set is computed once. A second small
aggregation over the journal's sending ticks, run beside the first, gives the frames per tick of
each tested tick. The journal's early ticks (brought forward after a master arrived, at most
one per regular tick) come to the driver as times and are looked up like the degraded spans,
by a broadcast join (``namesrv_pipeline.spark.spans``): one lookup per row, whatever their number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from namesrv.config import NamesrvConfig
from namesrv.ops.journal import EARLY_TICK_EVENT
from namesrv_pipeline.report.replay_model import (
    PUSH_CAUSES,
    Calibration,
    Curve,
    EarlyTick,
    GridPoint,
    Release,
    ReplayResult,
    drain_stretch,
    early_ticks,
    end_to_end,
    grid,
    missing_readings,
    releases,
    scenarios,
    unjudged,
    value_of,
)
from namesrv_pipeline.report.summary import Distribution, Summary
from namesrv_pipeline.report.tuning import Recommendation, Targets
from namesrv_pipeline.report.tuning import end_to_end as recorded_end_to_end
from namesrv_pipeline.spark.beside import Beside
from namesrv_pipeline.spark.facts import histogram_bucket
from namesrv_pipeline.spark.spans import span_values


@dataclass(frozen=True, slots=True)
class ReplayInputs:
    """What the telemetry's pass gives the replay besides its per-change groups: histograms
    (bucket value: count) of the client's part of pushed client-versions and of the lags the
    model keeps as recorded."""

    client: Mapping[float, int]
    kept: Mapping[float, int]


@dataclass(frozen=True, slots=True)
class _Tested:
    """One distinct replay: a tick, its degraded spans and its drain stretch."""

    tick_ms: int
    spans: tuple[Release, ...]
    stretch: float


def _tested(current: NamesrvConfig, config: NamesrvConfig, s: Summary) -> _Tested:
    last = s.last_ts_ms or s.first_ts_ms or 0
    spans = tuple(releases(s.episodes, current, config, last))
    # Without a span nothing drains: the recovery rate then changes nothing.
    stretch = drain_stretch(current, config) if spans else 1.0
    return _Tested(config.push.tick_interval_ms, spans, stretch)


def _pushed(per_change: DataFrame, changes: DataFrame) -> DataFrame:
    """Pushed client-versions (a NOTIFY brought them), per change and emission offset
    (the NOTIFY's emission less the detection): mutation ``m``, detection ``d``, offset ``e``,
    count ``n``, name server ``namesrv``.

    The per-change groups are joined as they are, several rows of one change and offset (one
    per learning cause) kept apart: the replay sums their counts in its one aggregation, and
    grouping them first cost a shuffle and a second aggregation for no fewer rows. Only the
    columns the replay reads are kept.
    """
    groups = per_change.where(F.col("name").isin(*PUSH_CAUSES) & F.col("at").isNotNull()).select(
        F.col("bucket").alias("line"), F.col("at").alias("e"), F.col("count").alias("n")
    )
    owed = changes.select(
        "line",
        "namesrv",
        F.coalesce(F.col("mutated_at_ms"), F.col("ts_ms")).alias("m"),
        F.col("ts_ms").alias("d"),
    )
    return groups.join(owed, "line")


def _emission(current_tick: int) -> Column:
    """When the NOTIFY goes out in the replay: after a held change's recovery, at its recorded
    place in the drain (stretched), or at the whole drain for a change the recording did not
    hold; otherwise at the tested tick, plus the whole ticks the recording sent it late (a
    slow connection skipped, a paced drain)."""
    end, rec_end = F.col("rel_end"), F.col("rec_end")
    place = F.when(
        rec_end.isNotNull(),
        F.greatest(F.lit(0), F.col("d") + F.col("e") - rec_end) * F.col("stretch"),
    ).otherwise(F.col("rel_release") - end)
    late = F.when(rec_end.isNull(), F.floor(F.col("e") / current_tick) * current_tick).otherwise(0)
    return F.when(end.isNotNull(), end + place).otherwise(F.col("t") + F.greatest(late, F.lit(0)))


def recorded_early_ticks(journal: DataFrame) -> list[tuple[str | None, int]]:
    """The name server and time of every tick the journal's name servers brought forward
    after a master arrived (``early_tick`` records): at most one per regular tick."""
    rows = journal.where(F.col("event") == EARLY_TICK_EVENT).select("namesrv", "ts_ms").collect()
    return [(r["namesrv"], int(r["ts_ms"])) for r in rows]


def _server_parts(
    pushed: DataFrame,
    tested: Mapping[str, _Tested],
    recorded: Sequence[Release],
    early: Sequence[EarlyTick],
    first_ms: int,
    current_tick: int,
) -> dict[str, dict[float, int]]:
    """Per tested scenario, the histogram of mutation to emission of the pushed
    client-versions. A change is detected at the tested tick's first regular tick at or after
    its mutation, or at its name server's first recorded early tick at or after it when that
    is sooner (looked up once per row, whatever the scenarios). A version the recording's
    client learned, held in the replay behind a later one of its topic, counts as reaching
    the client with that later one, at release: the client then holds it or newer."""
    facts = [
        F.struct(
            F.lit(name).alias("k"),
            # least() skips a null: no early tick in reach
            F.least(F.expr(f"m + pmod({first_ms} - m, {t.tick_ms})"), F.col("early")).alias("t"),
            F.lit(t.stretch).alias("stretch"),
        )
        for name, t in tested.items()
    ]
    rows = span_values(pushed, {"early": list(early)}, "m", lambda r: r.at_ms, "early")
    rows = span_values(rows, {"recorded": list(recorded)}, "d", lambda r: r.end_ms, "rec_end")
    rows = rows.select("*", F.explode(F.array(*facts)).alias("f")).select("*", "f.*").drop("f")
    spans = {name: list(t.spans) for name, t in tested.items()}
    rows = span_values(rows, spans, "t", lambda r: r.end_ms, "rel_end", key="k")
    rows = span_values(rows, spans, "t", lambda r: r.release_ms, "rel_release", key="k")
    part = (_emission(current_tick) - F.col("m")).alias("v")
    collected = (
        rows.select("k", "n", part)
        .groupBy("k", histogram_bucket(F.col("v")).alias("b"))
        .agg(F.sum("n").alias("n"))
        .collect()
    )
    out: dict[str, dict[float, int]] = {name: {} for name in tested}
    for r in collected:
        out[r["k"]][float(r["b"])] = int(r["n"])
    return out


def frames_per_tick(
    journal: DataFrame, ticks: Sequence[int], first_ms: int, cap: float | None
) -> dict[int, float | None]:
    """Per tested tick, the mean frames of a tick that sent: the recorded sending ticks merged
    into the tested tick's windows, their frames added up to at most ``cap`` (the most one tick
    sent: a connection gets one frame per tick)."""
    if not ticks or cap is None:
        return {t: None for t in ticks}
    windows = F.explode(
        F.array(
            *(
                F.struct(
                    F.lit(t).alias("tick"), F.floor((F.col("ts_ms") - first_ms) / t).alias("w")
                )
                for t in ticks
            )
        )
    )
    rows = (
        journal.where(F.col("event") == "notification_sent")
        .select("namesrv", "frames", windows.alias("x"))
        .groupBy("x.tick", "namesrv", "x.w")
        .agg(F.sum("frames").alias("frames"))
        .groupBy("tick")
        .agg(F.avg(F.least(F.col("frames").cast(T.DoubleType()), F.lit(float(cap)))).alias("mean"))
        .collect()
    )
    found = {int(r["tick"]): float(r["mean"]) for r in rows}
    return {t: found.get(t) for t in ticks}


def replay(
    changes: DataFrame,
    journal: DataFrame,
    per_change: DataFrame | None,
    inputs: ReplayInputs | None,
    s: Summary,
    current: NamesrvConfig,
    recommendations: Sequence[Recommendation],
    targets: Targets,
) -> ReplayResult | None:
    """The replay of every scenario and grid point; None for a journal without changes."""
    if s.first_ts_ms is None or not s.changes:
        return None
    named = scenarios(current, recommendations)
    points = grid(current, recommendations)
    configs: dict[str, NamesrvConfig] = dict(named)
    for key, values in points.items():
        configs.update({f"{key}={v}": cfg for v, cfg in values.items()})
    tested = {name: _tested(current, cfg, s) for name, cfg in configs.items()}
    first_of: dict[_Tested, str] = {}
    computed_as = {name: first_of.setdefault(t, name) for name, t in tested.items()}
    # Without telemetry there is nothing to replay: the cost side is left out with it. It
    # runs beside the replay's aggregation: each is a few short Spark jobs whose planning
    # and scheduling leave the cores idle between their tasks.
    ticks = sorted({c.push.tick_interval_ms for c in configs.values()}) if inputs else []
    first_ms, cap = s.first_ts_ms, s.frames_per_tick.max
    costing = Beside(lambda: frames_per_tick(journal, ticks, first_ms, cap), "replay-cost")
    try:
        figures = _figures(
            changes,
            journal,
            per_change,
            inputs,
            s,
            current,
            {n: tested[n] for n in first_of.values()},
        )
    finally:
        cost = costing.join()
    result = {name: figures[computed_as[name]] for name in configs}
    return ReplayResult(
        targets.propagation_p99_ms,
        Calibration(recorded_end_to_end(s), result["current"]),
        {name: result[name] for name in named},
        {name: cfg.push.tick_interval_ms for name, cfg in named.items()},
        _curves(points, result, cost, s, current, recommendations),
        missing_readings(s, inputs is not None, recommendations, current.pressure.enabled),
    )


def _curves(
    points: Mapping[str, Mapping[int | float, NamesrvConfig]],
    result: Mapping[str, Distribution],
    cost: Mapping[int, float | None],
    s: Summary,
    current: NamesrvConfig,
    recommendations: Sequence[Recommendation],
) -> list[Curve]:
    """Per replayed key, its grid's figures, with why the journal cannot judge it if so."""
    suggested = {r.key: r.suggested for r in recommendations}
    unknown = unjudged(s, current.pressure.enabled)
    return [
        Curve(
            key,
            value_of(current, key),
            suggested.get(key, value_of(current, key)),
            [
                GridPoint(v, result[f"{key}={v}"], cost.get(cfg.push.tick_interval_ms))
                for v, cfg in values.items()
            ],
            unknown.get(key),
        )
        for key, values in points.items()
    ]


def _figures(
    changes: DataFrame,
    journal: DataFrame,
    per_change: DataFrame | None,
    inputs: ReplayInputs | None,
    s: Summary,
    current: NamesrvConfig,
    tested: Mapping[str, _Tested],
) -> dict[str, Distribution]:
    if per_change is None or inputs is None or s.first_ts_ms is None:
        return {name: Distribution() for name in tested}
    recorded = _tested(current, current, s).spans
    reach = max(t.tick_ms for t in tested.values())
    parts = _server_parts(
        _pushed(per_change, changes),
        tested,
        recorded,
        early_ticks(recorded_early_ticks(journal), reach),
        s.first_ts_ms,
        current.push.tick_interval_ms,
    )
    return {name: end_to_end(parts[name], inputs.client, inputs.kept) for name in tested}


__all__ = ["ReplayInputs", "frames_per_tick", "replay"]
