"""The Spark side of the job: parsed journal and telemetry in, a ``Summary`` and a per-change
table out.

The journal is parsed once into a cache (``namesrv_pipeline.spark.inputs``); the telemetry is
parsed once, tied to the journal changes it reflects and aggregated in the same pass. Every
figure comes from three aggregations whose small results are collected:

1. the journal's totals, input quality and degradation transitions (this fills its cache);
2. the journal's grouped counts: per cause, kind, rule and time bucket, histograms, and the
   most changed topics and most skipped connections, top-N cut in Spark;
3. the telemetry's: quality, fetches per cause, histograms of delivery and of propagation per
   learning cause, lag per client (one group per telemetry file, ranked on the driver), and
   per journal change and cause how many clients learned it and how fast (and the detection
   figure per cause from those groups, not from a fact per line). Those per-change groups stay
   in Spark (cached with the others) and make the per-change table with the journal's changes.

3 runs beside 1 and 2, in a thread of its own from the start: each leaves the cores idle at
times (planning on the driver, a stage's last tasks), which the other fills. The journal's
cache is filled by whichever job reads it first; the other waits for it. Each pass has a
scheduler pool of its own: under Spark's FIFO order the journal's short grouped-figure stage
waited behind every task of the telemetry's long one, so the journal's figures (and the plots
drawn from them) came only after it, when one core was idle; with fair pools that stage takes
the first free task slot. Each aggregation returns the summary's fields it found; the summary
is put together from them. Only aggregates (and the few degradation records) reach the driver;
their size does not grow with the input (the per-client groups with the number of files,
which the driver lists anyway). Distributions come from histograms
(``summary.Histogram``): exact to the millisecond (or frame, or byte) below 2,048, within
0.1 % above; maxima are exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

from pyspark import InheritableThread
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from namesrv_pipeline.report.replay_model import PUSH_CAUSES
from namesrv_pipeline.report.summary import (
    CDF_POINTS,
    SPREAD_CAUSES,
    Distribution,
    Histogram,
    InputQuality,
    MatchWindow,
    SlowConnection,
    Summary,
    Transition,
    degraded_spans,
    pair_episodes,
)
from namesrv_pipeline.spark.facts import each_fact, fact, grouped, histogram_bucket
from namesrv_pipeline.spark.inputs import Parsed
from namesrv_pipeline.spark.replay_grid import ReplayInputs
from namesrv_pipeline.spark.spans import span_values
from namesrv_pipeline.spark.ties import change_table, fetch_table

Fields = dict[str, Any]
"""Some of ``Summary``'s (or ``Charts``') fields by name: what one aggregation found."""

SLOWEST_SHOWN = 10
TOP_SHOWN = 10
MAX_BUCKETS = 120
_BUCKET_STEPS_MS = (
    *(m * s for s in (100, 1_000, 10_000) for m in (1, 2, 5)),
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
    900_000,
    1_800_000,
    3_600_000,
    7_200_000,
    21_600_000,
    43_200_000,
    86_400_000,
)
CDF = [i / (CDF_POINTS - 1) for i in range(CDF_POINTS)]


def bucket_ms(first_ms: int, last_ms: int) -> int:
    """The smallest round bucket width that covers ``first..last`` in at most MAX_BUCKETS."""
    span = max(1, last_ms - first_ms + 1)
    for step in _BUCKET_STEPS_MS:
        if span / step <= MAX_BUCKETS:
            return step
    day = _BUCKET_STEPS_MS[-1]
    return -(-span // (MAX_BUCKETS * day)) * day


_TRANSITION = ("namesrv", "ts_ms", "event", "degraded", "cpu_percent", "memory_percent")
_TRANSITION_MORE = ("pending_connections", "frames", "duration_ms")


def _journal_totals(journal: Parsed) -> Fields:
    """Job 1: one aggregation over every journal line (it also fills the cache)."""
    st, ev = F.col("status"), F.col("event")
    ok = st == "ok"

    def on(event: str) -> Column:
        return ok & (ev == event)

    changed, sent = on("route_changed"), on("notification_sent")
    transitions = F.struct(*_TRANSITION, *_TRANSITION_MORE)
    row = journal.frame.agg(
        F.count(F.lit(1)).alias("lines"),
        *(F.count(F.when(st == name, 1)).alias(name) for name in ("corrupt", "invalid", "unknown")),
        F.min(F.when(ok, F.col("ts_ms"))).alias("first"),
        F.max(F.when(ok, F.col("ts_ms"))).alias("last"),
        F.count(F.when(changed, 1)).alias("changes"),
        F.count(F.when(changed & F.col("notify"), 1)).alias("notified"),
        F.count(F.when(changed & F.col("mutated_at_ms").isNull(), 1)).alias("no_mutation"),
        F.count(F.when(sent, 1)).alias("ticks"),
        F.sum(F.when(sent, F.col("frames"))).alias("frames"),
        F.sum(F.when(sent, F.col("bytes"))).alias("bytes"),
        F.sum(F.when(on("subscribe"), F.col("topic_names"))).alias("sub"),
        F.sum(F.when(on("unsubscribe"), F.col("topic_names"))).alias("unsub"),
        F.count(F.when(on("connection_closed"), 1)).alias("closed"),
        F.count(F.when(on("slow_subscriber_skipped"), 1)).alias("skips"),
        F.collect_list(F.when(ok & ev.isin("degradation", "backlog_drained"), transitions)).alias(
            "transitions"
        ),
    ).first()
    assert row is not None
    return {
        "journal": InputQuality(
            journal.files,
            int(row["lines"]),
            int(row["corrupt"]),
            int(row["invalid"]),
            int(row["unknown"]),
            journal.oversized,
        ),
        "first_ts_ms": None if row["first"] is None else int(row["first"]),
        "last_ts_ms": None if row["last"] is None else int(row["last"]),
        "changes": int(row["changes"]),
        "notified_changes": int(row["notified"]),
        "changes_without_mutation_time": int(row["no_mutation"]),
        "notification_ticks": int(row["ticks"]),
        "notification_frames": int(row["frames"] or 0),
        "notification_bytes": int(row["bytes"] or 0),
        "subscribed_topics": int(row["sub"] or 0),
        "unsubscribed_topics": int(row["unsub"] or 0),
        "connections_closed": int(row["closed"]),
        "slow_skips": int(row["skips"]),
        "episodes": pair_episodes(
            Transition(*(t[name] for name in (*_TRANSITION, *_TRANSITION_MORE)))
            for t in row["transitions"]
        ),
    }


_NOTIFY_PARTS = ("notified", "held", "suppressed")


def _journal_facts(journal: Parsed, width: int, s: Summary) -> DataFrame:
    """The journal's usable lines with their time bucket and, for a change, whether it was
    held: owed a notification while push was off, sent with the backlog at recovery."""
    changed = F.col("event") == "route_changed"
    assert s.last_ts_ms is not None
    # Only changes look their time up (a null time finds no span).
    held = span_values(
        journal.usable.withColumn("_held_at", F.when(changed, F.col("ts_ms"))),
        {"degraded": degraded_spans(s.episodes, s.last_ts_ms)},
        "_held_at",
        lambda _: 1,
        "_held",
    )
    bucket = (F.floor(F.col("ts_ms") / width) * width).cast(T.LongType())
    return held.withColumn("time_bucket", bucket)


def _journal_fact_list() -> tuple[list[Column], list[Column]]:
    """The journal's facts: one per row and figure, and the arrays of per-element ones."""
    ev = F.col("event")
    changed, sent = ev == "route_changed", ev == "notification_sent"
    frames, at = F.col("frames"), F.col("time_bucket")
    part = F.when(~F.col("notify"), "suppressed").when(F.col("_held").isNotNull(), "held")
    single = [
        fact(changed, "notify", at=at, name=part.otherwise("notified")),
        fact(changed, "kind", name=F.col("kind")),
        fact(changed, "topic", name=F.col("topic"), total=F.col("notify").cast(T.LongType())),
        fact(sent, "tick", at=at, total=frames, tally=F.col("bytes")),
        fact(sent, "frames", value=frames),
        fact(sent & (frames > 0), "frame_bytes", value=F.when(frames > 0, F.col("bytes") / frames)),
        fact(
            changed & F.col("mutated_at_ms").isNotNull(),
            "detection",
            value=F.col("ts_ms") - F.col("mutated_at_ms"),
        ),
        fact(ev == "broker_event", "broker", name=F.concat_ws(" ", "kind", "cause")),
        # How many causes a change has and rules a silent one has: the per-cause and per-rule
        # counts count a change once under each, and the report reconciles them with these.
        fact(changed, "ncauses", name=F.size("causes")),
        fact(ev == "suppressed", "nrules", name=F.size("rules")),
        fact(
            ev == "slow_subscriber_skipped",
            "slow",
            name=F.col("namesrv"),
            detail=F.col("conn"),
            largest=F.col("pending_topics"),
        ),
    ]
    each = [
        each_fact(changed, "causes", "cause", "time_bucket"),
        each_fact(ev == "suppressed", "rules", "rule"),
    ]
    return single, each


def _journal_groups(journal: Parsed, s: Summary) -> tuple[Fields, Fields]:
    """Job 2: every grouped journal figure in one aggregation; the summary's fields and the
    charts' fields it found."""
    if s.first_ts_ms is None or s.last_ts_ms is None:
        return {}, {}
    width = bucket_ms(s.first_ts_ms, s.last_ts_ms)
    single, each = _journal_fact_list()
    rows, _ = grouped(
        _journal_facts(journal, width, s),
        single,
        {"topic": (TOP_SHOWN, "count"), "slow": (SLOWEST_SHOWN, "count")},
        each=each,
    )
    return _journal_fields(rows, width)


def _journal_fields(rows: list[T.Row], width: int) -> tuple[Fields, Fields]:
    counts: dict[str, dict[str, int]] = {
        name: {} for name in ("kind", "rule", "broker", "cause", "ncauses", "nrules")
    }
    hists = {"frames": Histogram(), "frame_bytes": Histogram(), "detection": Histogram()}
    notify_buckets: dict[int, list[int]] = {}
    charts: Fields = {"bucket_ms": width, "changes_by_cause": [], "ticks": []}
    slowest: list[SlowConnection] = []
    topics: list[tuple[int, str, int]] = []
    slow_groups = 0
    for r in rows:
        figure, n = r["figure"], int(r["count"])
        if figure in counts:
            counts[figure][r["name"]] = counts[figure].get(r["name"], 0) + n
        if figure == "cause":
            charts["changes_by_cause"].append((int(r["at"]), r["name"], n))
        elif figure == "notify":
            notify_buckets.setdefault(int(r["at"]), [0, 0, 0])[_NOTIFY_PARTS.index(r["name"])] += n
        elif figure == "tick":
            charts["ticks"].append((int(r["at"]), n, int(r["total"]), int(r["tally"])))
        elif figure in hists:
            hists[figure].add(float(r["bucket"]), n, r["largest"])
        elif figure == "topic":
            topics.append((-n, r["name"], int(r["total"])))
        elif figure == "slow":
            slow_groups = int(r["groups"])
            slowest.append(SlowConnection(r["name"], int(r["detail"]), n, int(r["largest"])))
    charts["changes_by_cause"].sort()
    charts["ticks"].sort()
    charts["top_topics"] = [(t, -negn, notified) for negn, t, notified in sorted(topics)]
    charts["changes_notified"] = [(b, *p) for b, p in sorted(notify_buckets.items())]
    fields: Fields = {
        "changes_by_kind": counts["kind"],
        "suppressed_by_rule": counts["rule"],
        "broker_events": counts["broker"],
        "changes_by_cause": counts["cause"],
        "changes_by_cause_count": counts["ncauses"],
        "suppressed_by_rule_count": counts["nrules"],
        "frames_per_tick": hists["frames"].distribution(),
        "frame_bytes": hists["frame_bytes"].distribution(),
        "detection": hists["detection"].distribution(),
        "slow_connections": slow_groups,
        "slowest": sorted(slowest, key=lambda c: (-c.skips, c.conn)),
        "held_changes": sum(p[1] for p in notify_buckets.values()),
    }
    return fields, charts


CHANGE_FACT = "change"
_PER_CAUSE = ("lag", "detect", "after", "ask")


def _telemetry_fact_list() -> list[Column]:
    """The telemetry's facts, one per line and figure."""
    matched, lag, cause = F.col("matched"), F.col("lag_ms"), F.col("cause")
    delivery, detected = F.col("delivery_ms"), F.col("changed_at_ms")
    after = F.col("learned_at_ms") - detected
    # Pushed (the replay models its timing): a NOTIFY brought it (a suppressed change too, when
    # a held NOTIFY of an earlier change of its topic went out after it and the fetch found it).
    pushed = matched & cause.isin(*PUSH_CAUSES) & delivery.isNotNull()
    return [
        # Every line, and the lag of its client's matched ones: one group per (client,
        # status, cause, news), few, where a fact per figure was two per line.
        fact(
            F.lit(True),
            "fetch",
            at=F.col("client"),
            name=F.col("status"),
            detail=cause,
            bucket=F.col("news").cast(T.LongType()),
            total=F.when(matched, lag),
            tally=matched.cast(T.LongType()),
            largest=F.when(matched, lag),
        ),
        fact((F.col("status") == "ok") & delivery.isNotNull(), "delivery", value=delivery),
        fact(matched, "lag", name=cause, value=lag),
        fact(matched, "after", name=cause, value=after),
        fact(matched, "ask", name=cause, value=F.col("requested_at_ms") - detected),
        fact(matched & ~F.col("notify"), "quiet", value=lag),
        # Keyed by the change's journal line and the lines' cause, and for a pushed line the
        # NOTIFY's emission less the detection (the replay's input). A change's detection is
        # the same for every line that learned it: summed in ``total``, it gives the
        # detection figure per cause from these groups, not from a fact per line.
        fact(
            matched,
            CHANGE_FACT,
            at=F.when(pushed, F.col("learned_at_ms") - delivery - detected),
            name=cause,
            bucket=F.col("change"),
            total=detected - F.col("mutated_at_ms"),
            largest=after,
            smallest=after,
        ),
    ]


@dataclass(slots=True)
class _TelemetryRows:
    """The telemetry's collected groups, read into counts and histograms."""

    status: dict[str, int]
    by_cause: dict[str, int]
    learned: int
    lags: dict[int, tuple[int, int, float]]
    """Per client: matched lines, lag sum, largest lag."""
    hists: dict[tuple[str, str], Histogram]


def _read_telemetry(rows: list[T.Row], detected: list[T.Row]) -> _TelemetryRows:
    out = _TelemetryRows({}, {}, 0, {}, {})
    hists = out.hists
    # Unpacked by position (``facts.KEYS`` then the measures): a Row looks a name up in its
    # field list on every access, and this loop reads every histogram bucket (tens of
    # thousands) after Spark is done.
    for figure, at, name, detail, bucket, n, total, tally, largest, _ in rows:
        if figure == "fetch":
            out.status[name] = out.status.get(name, 0) + n
            if name == "ok":
                out.by_cause[str(detail)] = out.by_cause.get(str(detail), 0) + n
            out.learned += n if bucket == 1 else 0
            if tally:
                seen, summed, worst = out.lags.get(at, (0, 0, float("-inf")))
                out.lags[at] = (seen + tally, summed + total, max(worst, largest))
            continue
        for cause in (str(name), "all") if figure in _PER_CAUSE else ("",):
            hists.setdefault((figure, cause), Histogram()).add(float(bucket), n, largest)
        if figure == "lag" and name not in SPREAD_CAUSES:
            hists.setdefault(("unspread", ""), Histogram()).add(float(bucket), n, largest)
    for name, bucket, n, largest in detected:
        for cause in (str(name), "all"):
            hists.setdefault(("detect", cause), Histogram()).add(float(bucket), int(n), largest)
    return out


def _telemetry_fields(read: _TelemetryRows, telemetry: Parsed) -> tuple[Fields, Fields]:
    """The summary's and the charts' fields from the telemetry's groups."""
    empty = Histogram()
    by_figure: dict[str, dict[str, Distribution]] = {}
    curves: dict[str, list[float]] = {}
    for (figure, cause), hist in sorted(read.hists.items()):
        by_figure.setdefault(figure, {})[cause] = hist.distribution()
        if figure == "lag":
            curve = hist.quantiles(CDF)
            curve[-1] = float(hist.max) if hist.max is not None else curve[-1]
            curves[cause] = curve
    propagation = by_figure.get("lag", {})
    learned = propagation["all"].count if "all" in propagation else 0
    clients = sorted(
        (-worst, telemetry.clients[client], n, summed / n)
        for client, (n, summed, worst) in read.lags.items()
    )
    fields: Fields = {
        "telemetry": InputQuality(
            telemetry.files,
            sum(read.status.values()),
            read.status.get("corrupt", 0),
            read.status.get("invalid", 0),
            oversized=telemetry.oversized,
        ),
        "fetches_by_cause": read.by_cause,
        "delivery": read.hists.get(("delivery", ""), empty).distribution(),
        "propagation_quiet": read.hists.get(("quiet", ""), empty).distribution(),
        "propagation_unspread": read.hists.get(("unspread", ""), empty).distribution(),
        "propagation": propagation,
        "propagation_detection": by_figure.get("detect", {}),
        "propagation_delivery": by_figure.get("after", {}),
        "propagation_request": by_figure.get("ask", {}),
        "learned_changes": learned,
        "learned_inline": propagation["inline"].count if "inline" in propagation else 0,
        "unmatched_fetches": read.learned - learned,
    }
    top = [(client, n, mean, -neg) for neg, client, n, mean in clients[:TOP_SHOWN]]
    return fields, {"propagation_cdf": curves, "top_clients": top}


@dataclass(frozen=True, slots=True)
class TelemetryFigures:
    fields: Fields
    charts: Fields
    per_change: DataFrame
    """The per-change groups (cached, not collected): the change table's and the replay's."""
    replay: ReplayInputs


def _telemetry_groups(
    fetches: DataFrame,
    telemetry: Parsed,
    on_groups: Callable[[DataFrame], None] = lambda per_change: None,
) -> TelemetryFigures:
    """Job 3: every telemetry figure in one aggregation, with the per-change figures the
    change table needs (returned, cached: not collected). ``on_groups`` gets those as soon as
    the aggregation is done, before the collected figures are worked through here."""
    rows, per_change = grouped(fetches, _telemetry_fact_list(), {}, kept=(CHANGE_FACT,))
    assert per_change is not None
    on_groups(per_change)
    each = F.col("total") / F.col("count")
    detected = (
        per_change.groupBy("name", histogram_bucket(each).alias("bucket"))
        .agg(F.sum("count").alias("count"), F.max(each).alias("largest"))
        .collect()
    )
    read = _read_telemetry(rows, detected)
    fields, charts = _telemetry_fields(read, telemetry)
    return TelemetryFigures(fields, charts, per_change, _replay_inputs(read.hists))


def _replay_inputs(hists: dict[tuple[str, str], Histogram]) -> ReplayInputs:
    """The replay's histograms from the telemetry's figures (no fact of their own: each fact
    per line costs every line): the client's part is the delivery of notified fetches, the
    kept lags those of every learning cause the replay does not model."""
    delivery = hists.get(("delivery", ""))
    kept: dict[float, int] = {}
    for (figure, cause), hist in hists.items():
        if figure == "lag" and cause not in (*PUSH_CAUSES, *SPREAD_CAUSES, "all"):
            for bucket, n in hist.counts.items():
                kept[bucket] = kept.get(bucket, 0) + n
    return ReplayInputs({} if delivery is None else dict(delivery.counts), kept)


STEPS = ("journal and telemetry: parsed, tied and aggregated",)


JOURNAL_POOL = "journal"
TELEMETRY_POOL = "telemetry"
"""Scheduler pools of the two passes (``spark.scheduler.mode=FAIR``,
``namesrv_pipeline.spark.session``)."""


@dataclass(frozen=True, slots=True)
class Tables:
    """What stays in Spark after the analysis: the per-change table (lazy, for writing) and
    what the replay reads."""

    changes: DataFrame
    per_change: DataFrame | None = None
    replay: ReplayInputs | None = None


def _journal_summary(journal: Parsed) -> Summary:
    """Jobs 1 and 2: the summary of the journal alone."""
    s = Summary(InputQuality(journal.files, 0, 0, 0, oversized=journal.oversized), None)
    s = replace(s, **_journal_totals(journal))
    fields, charts = _journal_groups(journal, s)
    return replace(s, **fields, charts=replace(s.charts, **charts))


def _with_telemetry(s: Summary, t: TelemetryFigures) -> Summary:
    return replace(s, **t.fields, charts=replace(s.charts, **t.charts))


def summarize(
    journal: Parsed,
    telemetry: Parsed | None = None,
    window: MatchWindow | None = None,
    on_step: Callable[[str], None] = lambda name: None,
    on_journal: Callable[[Summary], None] = lambda s: None,
    on_table: Callable[[DataFrame], None] = lambda table: None,
) -> tuple[Summary, Tables]:
    """The whole analysis: the summary, and what stays in Spark (``Tables``). ``on_step`` is
    told each of ``STEPS`` before it runs; ``on_journal`` gets the summary of the journal's
    figures as soon as they are in, while the telemetry's may still be computed; ``on_table``
    gets the per-change table (cached) once both passes are done, as it marks the changes
    held in the journal's degraded spans, while its staleness figures are aggregated here.
    The passes run side by side (the module's docstring).
    """
    on_step(STEPS[0])
    changes = journal.usable.where(F.col("event") == "route_changed")
    if telemetry is None:
        s = _journal_summary(journal)
        on_journal(s)
        table = _table(changes, None, s, on_table)
        return replace(s, **staleness_fields(table)), Tables(table)
    found: list[TelemetryFigures] = []
    failed: list[BaseException] = []
    sc = journal.frame.sparkSession.sparkContext

    def tie() -> None:
        try:
            sc.setLocalProperty("spark.scheduler.pool", TELEMETRY_POOL)
            fetches = fetch_table(changes, telemetry.frame, window or MatchWindow(), journal.named)
            found.append(_telemetry_groups(fetches, telemetry))
        except BaseException as exc:  # re-raised in the caller's thread below
            failed.append(exc)

    # Inheritable: its Spark jobs carry this thread's job group (the progress display's step).
    worker = InheritableThread(target=tie, name="telemetry")
    worker.start()
    pool = sc.getLocalProperty("spark.scheduler.pool")
    sc.setLocalProperty("spark.scheduler.pool", JOURNAL_POOL)
    try:
        s = _journal_summary(journal)
        on_journal(s)
    finally:
        sc.setLocalProperty("spark.scheduler.pool", cast(str, pool))  # None: the default
        worker.join()
    if failed:
        raise failed[0]
    t = found[0]
    # The table marks held changes, so it waits for the journal's degraded spans.
    table = _table(changes, t.per_change, s, on_table)
    s = replace(_with_telemetry(s, t), **staleness_fields(table))
    return s, Tables(table, t.per_change, t.replay)


def _table(
    changes: DataFrame,
    per_change: DataFrame | None,
    s: Summary,
    on_table: Callable[[DataFrame], None],
) -> DataFrame:
    """The per-change table (cached: it is written and its staleness aggregated), handed to
    ``on_table``."""
    spans = [] if s.last_ts_ms is None else degraded_spans(s.episodes, s.last_ts_ms)
    table = change_table(changes, per_change, spans).cache()
    on_table(table)
    return table


def staleness_fields(table: DataFrame) -> Fields:
    """The summary's staleness figures from the per-change table (``ties.change_table``):
    every change's, the held changes', and how the held ones ended (reached clients
    themselves, superseded by a later version that did, or neither: of a topic no client
    learned any version of, or after the last version clients learned of theirs)."""
    stale = F.col("staleness_ms")
    learned = F.col("clients") > 0
    topic = Window.partitionBy("namesrv", "topic")
    rows = (
        table.withColumn("topic_learned", F.max(learned).over(topic))
        .groupBy(
            "held",
            learned.alias("reached"),
            F.when(stale.isNotNull(), histogram_bucket(stale)).alias("bucket"),
            "topic_learned",
        )
        .agg(F.count(F.lit(1)).alias("count"), F.max(stale).alias("largest"))
        .collect()
    )
    every, held = Histogram(), Histogram()
    reached = superseded = unresolved = unlearned_topic = 0
    for r in rows:
        n = int(r["count"])
        if r["bucket"] is not None:
            every.add(float(r["bucket"]), n, float(r["largest"]))
            if r["held"]:
                held.add(float(r["bucket"]), n, float(r["largest"]))
        if not r["held"]:
            continue
        if r["reached"]:
            reached += n
        elif r["bucket"] is not None:
            superseded += n
        else:
            unresolved += n
            unlearned_topic += 0 if r["topic_learned"] else n
    return {
        "staleness": every.distribution(),
        "staleness_held": held.distribution(),
        "held_reached": reached,
        "held_superseded": superseded,
        "held_unresolved": unresolved,
        "held_unlearned_topic": unlearned_topic,
    }
