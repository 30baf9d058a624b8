"""The Spark side of the job: parsed journal and telemetry in, a ``Summary`` and a per-change
table out.

The journal is parsed once into a cache (``pipeline.inputs``); the telemetry is parsed once,
tied to the journal changes it reflects and aggregated in the same pass. Every figure comes
from three aggregations whose small results are collected:

1. the journal's totals, input quality and degradation transitions (this fills its cache);
2. the journal's grouped counts: per cause, kind, rule and time bucket, histograms, and the
   most changed topics and most skipped connections, top-N cut in Spark;
3. the telemetry's: quality, fetches per cause, histograms of delivery and of propagation per
   learning cause, lag per client (one group per telemetry file, ranked on the driver), and
   per journal change and cause how many clients learned it and how fast (and the detection
   figure per cause from those groups, not from a fact per line). Those per-change groups stay
   in Spark (cached with the others) and make the per-change table with the journal's changes.

3 runs beside 1 and 2. Only aggregates (and the few degradation records) reach the driver;
their size does not grow with the input (the per-client groups with the number of files,
which the driver lists anyway). Distributions come from histograms
(``summary.Histogram``): exact to the millisecond (or frame, or byte) below 2,048, within
0.1 % above; maxima are exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from pyspark import InheritableThread
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline.inputs import Parsed
from pipeline.spans import span_values
from pipeline.summary import (
    CDF_POINTS,
    EXACT_BELOW,
    SPREAD_CAUSES,
    Histogram,
    InputQuality,
    MatchWindow,
    SlowConnection,
    Summary,
    Transition,
    degraded_spans,
    pair_episodes,
)
from pipeline.ties import change_table, fetch_table

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


def histogram_bucket(value: Column) -> Column:
    """The histogram bucket of ``value`` (see ``summary.EXACT_BELOW``), as a long; values are
    rounded to whole units first."""
    v = F.round(value).cast(T.LongType())
    a = F.abs(v)
    step = F.pow(F.lit(2.0), F.floor(F.log2(a)) - 10)
    lower = (F.floor(a / step) * step).cast(T.LongType())
    return F.when(a < EXACT_BELOW, v).otherwise(F.signum(v).cast(T.LongType()) * lower)


_FACTS = ("fig", "bucket", "k1", "k2", "h", "v", "a", "c", "m", "lo")


def _struct(
    fig: str,
    *,
    bucket: Column | None = None,
    k1: Column | None = None,
    k2: Column | None = None,
    h: Column | None = None,
    hist: Column | None = None,
    a: Column | None = None,
    c: Column | None = None,
    m: Column | None = None,
    lo: Column | None = None,
) -> Column:
    """One fact in the common long shape: keys (time bucket, two names, histogram bucket), two
    sums ``a`` and ``c``, a maximum ``m`` and a minimum ``lo``; each fact counts once.

    ``hist`` is a value whose distribution is the figure: its histogram bucket becomes ``h``
    and the value itself ``m``. Both are worked out after the explode (``_grouped``), in one
    place for every figure: a histogram bucket per figure inside the array of facts made the
    aggregation's generated method larger than the JVM's JIT compilers take (8,000 bytes of
    bytecode), and every line of the input was then evaluated interpreted."""
    none = F.lit(None)
    if hist is not None and (h is not None or m is not None):
        raise ValueError("a fact of a distribution (hist) takes neither h nor m")
    cols = {
        "fig": F.lit(fig),
        "bucket": (bucket if bucket is not None else none).cast(T.LongType()),
        "k1": (k1 if k1 is not None else none).cast(T.StringType()),
        "k2": (k2 if k2 is not None else none).cast(T.StringType()),
        "h": (h if h is not None else none).cast(T.LongType()),
        "v": (hist if hist is not None else none).cast(T.DoubleType()),
        "a": (a if a is not None else F.lit(0)).cast(T.LongType()),
        "c": (c if c is not None else F.lit(0)).cast(T.LongType()),
        "m": (m if m is not None else none).cast(T.DoubleType()),
        "lo": (lo if lo is not None else none).cast(T.DoubleType()),
    }
    return F.struct(*(cols[name].alias(name) for name in _FACTS))


def _fact(when: Column, fig: str, **values: Column | None) -> Column:
    """The fact for rows where ``when`` holds, else null."""
    return F.when(when, _struct(fig, **values))


def _each(when: Column, items: str, fig: str, bucket: str | None = None) -> Column:
    """One fact per element of the array column ``items`` (its value as ``k1``).

    The lambda is SQL, its variable named: one written in Python gets a fresh variable name
    in every query, so Spark would generate and compile new code (and the JVM compile that
    again) on every run."""
    at = f"CAST({bucket} AS BIGINT)" if bucket is not None else "CAST(NULL AS BIGINT)"
    fact = (
        f"named_struct('fig', '{fig}', 'bucket', {at}, 'k1', CAST(item AS STRING),"
        " 'k2', CAST(NULL AS STRING), 'h', CAST(NULL AS BIGINT), 'v', CAST(NULL AS DOUBLE),"
        " 'a', CAST(0 AS BIGINT), 'c', CAST(0 AS BIGINT), 'm', CAST(NULL AS DOUBLE),"
        " 'lo', CAST(NULL AS DOUBLE))"
    )
    return F.when(when, F.expr(f"transform({items}, item -> {fact})")).otherwise(
        F.array().cast(_FACT_ARRAY)
    )


_LONG, _TEXT, _REAL = T.LongType(), T.StringType(), T.DoubleType()
_FACT_ARRAY = T.ArrayType(
    T.StructType(
        [
            T.StructField(name, kind)
            for name, kind in zip(
                _FACTS,
                (_TEXT, _LONG, _TEXT, _TEXT, _LONG, _REAL, _LONG, _LONG, _REAL, _REAL),
                strict=True,
            )
        ]
    )
)


def _grouped(
    source: DataFrame,
    facts: list[Column],
    top: dict[str, tuple[int, str]],
    kept: tuple[str, ...] = (),
    each: list[Column] | None = None,
) -> tuple[list[T.Row], DataFrame | None]:
    """Every fact of every row of ``source`` (``facts``: one per row, from ``_fact``; ``each``:
    arrays of them, from ``_each``), from one scan, in one aggregation; a figure
    named in ``top`` keeps its ``limit`` groups largest in ``column`` (``n`` or ``m``; then by
    name), with ``groups`` saying how many there were. The groups of the figures named in
    ``kept`` (per-change figures: as many as the journal has changes) stay in Spark: they come
    back as a DataFrame, cached with the rest so the aggregation runs once, and the others are
    collected."""
    # The single facts of a row go into one array, nulls where their condition fails, dropped
    # after the explode: one array per row, not one per fact joined into a new one.
    every = F.array(*facts)
    if each:
        every = F.concat(every, *each)
    facts_df = source.select(F.explode(every).alias("f")).where(F.col("f").isNotNull())
    # A distribution's histogram bucket and maximum from its value (``_struct``'s ``hist``).
    value = F.col("f.v")
    facts_df = facts_df.select(
        "f.fig",
        "f.bucket",
        "f.k1",
        "f.k2",
        F.coalesce(F.col("f.h"), histogram_bucket(value)).alias("h"),
        "f.a",
        "f.c",
        F.coalesce(F.col("f.m"), value).alias("m"),
        "f.lo",
    )
    grouped = facts_df.groupBy("fig", "bucket", "k1", "k2", "h").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum("a").alias("a"),
        F.sum("c").alias("c"),
        F.max("m").alias("m"),
        F.min("lo").alias("lo"),
    )
    rest: DataFrame | None = None
    if kept:
        grouped = grouped.cache()
        rest = grouped.where(F.col("fig").isin(*kept))
        grouped = grouped.where(~F.col("fig").isin(*kept))
    if not top:
        return grouped.collect(), rest
    score = F.col("n").cast(T.DoubleType())
    for fig, (_, column) in top.items():
        if column != "n":
            score = F.when(F.col("fig") == fig, F.col(column)).otherwise(score)
    ranked = Window.partitionBy("fig").orderBy(
        score.desc_nulls_last(), F.col("k1"), F.col("k2").try_cast(T.LongType()), F.col("k2")
    )
    cut = F.lit(False)
    for fig, (limit, _) in top.items():
        cut = cut | ((F.col("fig") == fig) & (F.col("rank") > limit))
    rows = (
        grouped.withColumns(
            {
                "rank": F.row_number().over(ranked),
                "groups": F.count(F.lit(1)).over(Window.partitionBy("fig")),
            }
        )
        .where(~cut)
        .collect()
    )
    return rows, rest


def _journal_totals(journal: Parsed, s: Summary) -> None:
    """Job 1: one aggregation over every journal line (it also fills the cache)."""
    st, ev = F.col("status"), F.col("event")
    ok = st == "ok"

    def on(event: str) -> Column:
        return ok & (ev == event)

    changed = on("route_changed")
    sent = on("notification_sent")
    row = journal.frame.agg(
        F.count(F.lit(1)).alias("lines"),
        F.count(F.when(st == "corrupt", 1)).alias("corrupt"),
        F.count(F.when(st == "invalid", 1)).alias("invalid"),
        F.count(F.when(st == "unknown", 1)).alias("unknown"),
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
        F.collect_list(
            F.when(
                ok & ev.isin("degradation", "backlog_drained"),
                F.struct(
                    "namesrv",
                    "ts_ms",
                    "event",
                    "degraded",
                    "cpu_percent",
                    "memory_percent",
                    "pending_connections",
                    "frames",
                    "duration_ms",
                ),
            )
        ).alias("transitions"),
    ).first()
    assert row is not None
    s.journal = InputQuality(
        files=journal.files,
        lines=int(row["lines"]),
        corrupt=int(row["corrupt"]),
        invalid=int(row["invalid"]),
        unknown_events=int(row["unknown"]),
        oversized=journal.oversized,
    )
    if row["first"] is not None:
        s.first_ts_ms, s.last_ts_ms = int(row["first"]), int(row["last"])
    s.changes, s.notified_changes = int(row["changes"]), int(row["notified"])
    s.changes_without_mutation_time = int(row["no_mutation"])
    s.notification_ticks = int(row["ticks"])
    s.notification_frames = int(row["frames"] or 0)
    s.notification_bytes = int(row["bytes"] or 0)
    s.subscribed_topics = int(row["sub"] or 0)
    s.unsubscribed_topics = int(row["unsub"] or 0)
    s.connections_closed = int(row["closed"])
    s.slow_skips = int(row["skips"])
    s.episodes = pair_episodes(
        Transition(
            t["namesrv"],
            int(t["ts_ms"]),
            t["event"],
            t["degraded"],
            t["cpu_percent"],
            t["memory_percent"],
            t["pending_connections"],
            t["frames"],
            t["duration_ms"],
        )
        for t in row["transitions"]
    )


_NOTIFY_PARTS = ("notified", "held", "suppressed")


def _journal_groups(journal: Parsed, s: Summary) -> None:
    """Job 2: every grouped journal figure in one aggregation."""
    if s.first_ts_ms is None or s.last_ts_ms is None:
        return
    width = bucket_ms(s.first_ts_ms, s.last_ts_ms)
    s.charts.bucket_ms = width
    u = journal.usable
    ev = F.col("event")
    bucket = (F.floor(F.col("ts_ms") / width) * width).cast(T.LongType())
    changed = ev == "route_changed"
    sent = ev == "notification_sent"
    frames = F.col("frames")
    per_frame = F.when(frames > 0, F.col("bytes") / frames)
    detection = F.col("ts_ms") - F.col("mutated_at_ms")
    # Owed a notification while push was off: it went out with the backlog at recovery.
    # Only changes look their time up (a null time finds no span).
    u = span_values(
        u.withColumn("_held_at", F.when(changed, F.col("ts_ms"))),
        {"degraded": degraded_spans(s.episodes, s.last_ts_ms)},
        "_held_at",
        lambda _: 1,
        "_held",
    )
    held = F.col("_held").isNotNull()
    rows, _ = _grouped(
        u.withColumn("time_bucket", bucket),
        [
            _fact(
                changed,
                "notify",
                bucket=F.col("time_bucket"),
                k1=F.when(~F.col("notify"), "suppressed").when(held, "held").otherwise("notified"),
            ),
            _fact(changed, "kind", k1=F.col("kind")),
            _fact(changed, "topic", k1=F.col("topic"), a=F.col("notify").cast(T.LongType())),
            _fact(sent, "tick", bucket=F.col("time_bucket"), a=frames, c=F.col("bytes")),
            _fact(sent, "frames", hist=frames),
            _fact(sent & (frames > 0), "frame_bytes", hist=per_frame),
            _fact(changed & F.col("mutated_at_ms").isNotNull(), "detection", hist=detection),
            _fact(ev == "broker_event", "broker", k1=F.concat_ws(" ", "kind", "cause")),
            _fact(
                ev == "slow_subscriber_skipped",
                "slow",
                k1=F.col("namesrv"),
                k2=F.col("conn"),
                m=F.col("pending_topics"),
            ),
        ],
        {"topic": (TOP_SHOWN, "n"), "slow": (SLOWEST_SHOWN, "n")},
        each=[
            _each(changed, "causes", "cause", "time_bucket"),
            _each(ev == "suppressed", "rules", "rule"),
        ],
    )
    hists = {"frames": Histogram(), "frame_bytes": Histogram(), "detection": Histogram()}
    notify_buckets: dict[int, list[int]] = {}
    slowest: list[tuple[int, SlowConnection]] = []
    topics: list[tuple[int, str, int]] = []
    for r in rows:
        fig, n = r["fig"], int(r["n"])
        if fig == "kind":
            s.changes_by_kind[r["k1"]] = n
        elif fig == "rule":
            s.suppressed_by_rule[r["k1"]] = n
        elif fig == "broker":
            s.broker_events[r["k1"]] = n
        elif fig == "cause":
            s.changes_by_cause[r["k1"]] = s.changes_by_cause.get(r["k1"], 0) + n
            s.charts.changes_by_cause.append((int(r["bucket"]), r["k1"], n))
        elif fig == "notify":
            parts = notify_buckets.setdefault(int(r["bucket"]), [0, 0, 0])
            parts[_NOTIFY_PARTS.index(r["k1"])] += n
        elif fig == "tick":
            s.charts.ticks.append((int(r["bucket"]), n, int(r["a"]), int(r["c"])))
        elif fig in hists:
            hists[fig].add(float(r["h"]), n, r["m"])
        elif fig == "topic":
            topics.append((-n, r["k1"], int(r["a"])))
        elif fig == "slow":
            s.slow_connections = int(r["groups"])
            conn = SlowConnection(r["k1"], int(r["k2"]), n, int(r["m"]))
            slowest.append((int(r["rank"]), conn))
    s.frames_per_tick = hists["frames"].distribution()
    s.frame_bytes = hists["frame_bytes"].distribution()
    s.detection = hists["detection"].distribution()
    s.slowest = [c for _, c in sorted(slowest, key=lambda rc: (-rc[1].skips, rc[1].conn))]
    s.charts.top_topics = [(t, -negn, notified) for negn, t, notified in sorted(topics)]
    s.charts.changes_by_cause.sort()
    s.charts.ticks.sort()
    s.charts.changes_notified = [(b, p[0], p[1], p[2]) for b, p in sorted(notify_buckets.items())]
    s.held_changes = sum(p[1] for p in notify_buckets.values())


CHANGE_FACT = "change"
_PER_CAUSE = ("lag", "detect", "after", "ask")


def _telemetry_groups(
    fetches: DataFrame,
    telemetry: Parsed,
    s: Summary,
    on_groups: Callable[[DataFrame], None] = lambda per_change: None,
) -> DataFrame:
    """Job 3: every telemetry figure in one aggregation, with the per-change figures the
    change table needs (returned, cached: not collected). ``on_groups`` gets those as soon as
    the aggregation is done, before the collected figures are worked through here."""
    matched = F.col("matched")
    lag = F.col("lag_ms")
    detection = F.col("changed_at_ms") - F.col("mutated_at_ms")
    after = F.col("learned_at_ms") - F.col("changed_at_ms")
    ask = F.col("requested_at_ms") - F.col("changed_at_ms")
    delivery = F.col("delivery_ms")
    by_cause = F.col("cause")
    ok = F.col("status") == "ok"
    rows, per_change = _grouped(
        fetches,
        [
            # Every line, and the lag of its client's matched ones: one group per (client,
            # status, cause, news), few, where a fact per figure was two per line.
            _fact(
                F.lit(True),
                "fetch",
                bucket=F.col("client"),
                k1=F.col("status"),
                k2=by_cause,
                h=F.col("news").cast(T.LongType()),
                a=F.when(matched, lag),
                c=matched.cast(T.LongType()),
                m=F.when(matched, lag),
            ),
            _fact(ok & delivery.isNotNull(), "delivery", hist=delivery),
            _fact(matched, "lag", k1=by_cause, hist=lag),
            _fact(matched, "after", k1=by_cause, hist=after),
            _fact(matched, "ask", k1=by_cause, hist=ask),
            _fact(matched & ~F.col("notify"), "quiet", hist=lag),
            # Keyed by the change's journal line (a long, where topic, version and time made a
            # longer key to hash and compare for every line) and the lines' cause. A change's
            # detection is the same for every line that learned it: summed in ``a``, it gives
            # the detection figure per cause from these groups (below), not from a fact per
            # line.
            _fact(
                matched,
                CHANGE_FACT,
                k1=by_cause,
                h=F.col("change"),
                a=detection,
                m=after,
                lo=after,
            ),
        ],
        {},
        kept=(CHANGE_FACT,),
    )
    assert per_change is not None
    on_groups(per_change)
    each = F.col("a") / F.col("n")
    detected = (
        per_change.groupBy("k1", histogram_bucket(each).alias("h"))
        .agg(F.sum("n").alias("n"), F.max(each).alias("m"))
        .collect()
    )
    status: dict[str, int] = {}
    hists: dict[tuple[str, str], Histogram] = {}
    learned = 0
    lags: dict[int, tuple[int, int, float]] = {}  # client: matched lines, lag sum, maximum
    # Unpacked by position: a Row looks a name up in its field list on every access, and
    # this loop reads every histogram bucket (tens of thousands) after Spark is done.
    for fig, bucket, k1, k2, h, n, a, c, m, _ in rows:
        if fig == "fetch":
            status[k1] = status.get(k1, 0) + n
            if k1 == "ok":
                s.fetches_by_cause[str(k2)] = s.fetches_by_cause.get(str(k2), 0) + n
            if h == 1:
                learned += n
            if c:
                seen, total, worst = lags.get(bucket, (0, 0, float("-inf")))
                lags[bucket] = (seen + c, total + a, max(worst, m))
        else:
            for cause in (str(k1), "all") if fig in _PER_CAUSE else ("",):
                hists.setdefault((fig, cause), Histogram()).add(float(h), n, m)
            if fig == "lag" and k1 not in SPREAD_CAUSES:
                hists.setdefault(("unspread", ""), Histogram()).add(float(h), n, m)
    for k1, h, n, m in detected:
        for cause in (str(k1), "all"):
            hists.setdefault(("detect", cause), Histogram()).add(float(h), int(n), m)
    s.telemetry = InputQuality(
        files=telemetry.files,
        lines=sum(status.values()),
        corrupt=status.get("corrupt", 0),
        invalid=status.get("invalid", 0),
        oversized=telemetry.oversized,
    )
    empty = Histogram()
    s.delivery = hists.get(("delivery", ""), empty).distribution()
    s.propagation_quiet = hists.get(("quiet", ""), empty).distribution()
    s.propagation_unspread = hists.get(("unspread", ""), empty).distribution()
    for (fig, cause), hist in sorted(hists.items()):
        if fig == "lag":
            s.propagation[cause] = hist.distribution()
            curve = hist.quantiles(CDF)
            curve[-1] = float(hist.max) if hist.max is not None else curve[-1]
            s.charts.propagation_cdf[cause] = curve
        elif fig == "detect":
            s.propagation_detection[cause] = hist.distribution()
        elif fig == "after":
            s.propagation_delivery[cause] = hist.distribution()
        elif fig == "ask":
            s.propagation_request[cause] = hist.distribution()
    s.learned_changes = s.propagation["all"].count if "all" in s.propagation else 0
    s.learned_inline = s.propagation["inline"].count if "inline" in s.propagation else 0
    s.unmatched_fetches = learned - s.learned_changes
    clients = sorted(
        (-worst, telemetry.clients[client], n, total / n)
        for client, (n, total, worst) in lags.items()
    )
    s.charts.top_clients = [
        (client, n, mean, -neg_max) for neg_max, client, n, mean in clients[:TOP_SHOWN]
    ]
    return per_change


STEPS = ("journal and telemetry: parsed, tied and aggregated",)


JOURNAL_POOL = "journal"
TELEMETRY_POOL = "telemetry"
"""Scheduler pools of the two passes (``spark.scheduler.mode=FAIR``, ``pipeline.session``)."""


def summarize(
    journal: Parsed,
    telemetry: Parsed | None = None,
    window: MatchWindow | None = None,
    on_step: Callable[[str], None] = lambda name: None,
    on_journal: Callable[[Summary], None] = lambda s: None,
    on_table: Callable[[DataFrame], None] = lambda table: None,
) -> tuple[Summary, DataFrame]:
    """The whole analysis: the summary, and the per-change table (lazy, for writing).
    ``on_step`` is told each of ``STEPS`` before it runs; ``on_journal`` gets the summary once
    its journal figures are in, while the telemetry's may still be computed (it must not read
    those); ``on_table`` gets the per-change table as soon as it can be computed, from the
    thread that computed it, while the rest may still run.

    The telemetry's pass runs in its own thread from the start, beside the journal's two
    (the totals, then the grouped figures, whose time buckets need the first and last
    record): each leaves the cores idle at times (planning on the driver, a stage's last
    tasks), which the other fills. The journal's cache is filled by whichever job reads it
    first; the other waits for it. They fill different fields of the summary.

    Each pass has a scheduler pool of its own: under Spark's FIFO order the journal's short
    grouped-figure stage waited behind every task of the telemetry's long one, so the
    journal's figures (and the plots drawn from them) came only after it, when one core was
    idle; with fair pools that stage takes the first free task slot.
    """
    window = window or MatchWindow()
    s = Summary(
        journal=InputQuality(journal.files, 0, 0, 0, oversized=journal.oversized), telemetry=None
    )
    on_step(STEPS[0])
    changes = journal.usable.where(F.col("event") == "route_changed")
    sc = journal.frame.sparkSession.sparkContext
    if telemetry is None:
        table = change_table(changes, None)
        on_table(table)
        _journal_totals(journal, s)
        _journal_groups(journal, s)
        on_journal(s)
        return s, table
    found: list[DataFrame] = []
    failed: list[BaseException] = []

    def tie() -> None:
        try:
            sc.setLocalProperty("spark.scheduler.pool", TELEMETRY_POOL)
            fetches = fetch_table(changes, telemetry.frame, window, journal.named)

            def groups(per_change: DataFrame) -> None:
                found.append(change_table(changes, per_change))
                on_table(found[0])

            _telemetry_groups(fetches, telemetry, s, groups)
        except BaseException as exc:  # re-raised in the caller's thread below
            failed.append(exc)

    # Inheritable: its Spark jobs carry this thread's job group (the progress display's step).
    worker = InheritableThread(target=tie, name="telemetry")
    worker.start()
    pool = sc.getLocalProperty("spark.scheduler.pool")
    sc.setLocalProperty("spark.scheduler.pool", JOURNAL_POOL)
    try:
        _journal_totals(journal, s)
        _journal_groups(journal, s)
        on_journal(s)
    finally:
        sc.setLocalProperty("spark.scheduler.pool", cast(str, pool))  # None: the default
        worker.join()
    if failed:
        raise failed[0]
    return s, found[0]
