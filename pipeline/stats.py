"""The Spark side of the job: journal and telemetry DataFrames in, a ``Summary`` and a per-change
table out.

Everything scales with the cluster: aggregations and one join run as Spark stages, and only
aggregates (and the few degradation records) reach the driver. Percentiles are
``percentile_approx`` with an accuracy of 10,000, exact below that many values per group.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.summary import (
    Distribution,
    InputQuality,
    MatchWindow,
    SlowConnection,
    Summary,
    Transition,
    distribution,
    pair_episodes,
)

ACCURACY = 10_000
SLOWEST_SHOWN = 10


def _dist_aggs(value: Column) -> list[Column]:
    return [
        F.count(value).alias("count"),
        F.percentile_approx(value, [0.5, 0.9, 0.99], ACCURACY).alias("pcts"),
        F.max(value).alias("max"),
    ]


def _dist(df: DataFrame, value: Column) -> Distribution:
    return distribution(df.agg(*_dist_aggs(value)).first())


def _count_tables(tables: dict[str, DataFrame]) -> dict[str, dict[str, int]]:
    """Several ``key`` columns counted in one job: {table: {key: count}}."""
    parts = [df.select(F.lit(name).alias("table"), "key") for name, df in tables.items()]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    out: dict[str, dict[str, int]] = {}
    for r in union.groupBy("table", "key").count().collect():
        out.setdefault(r["table"], {})[str(r["key"])] = int(r["count"])
    return out


def learned_versions(telemetry: DataFrame) -> DataFrame:
    """The records in which a client learned something: per client (telemetry file) and
    topic in time order, a record whose version or existence differs from the one before, or
    an ``epoch`` refetch (a restarted name server numbers versions afresh, so an equal number
    may be a new route). A topic's first record is where the client started from, not a change
    reaching it; a refetch returning what the client held (polls, mostly) is no news."""
    order = Window.partitionBy("client", "topic").orderBy("fetched_at_ms", "requested_at_ms")
    prev_version = F.lag("version").over(order)
    prev_exists = F.lag("exists").over(order)
    news = prev_version.isNotNull() & (
        (F.col("version") != prev_version)
        | (F.col("exists") != prev_exists)
        | (F.col("cause") == "epoch")
    )
    return (
        telemetry.withColumn("news", news)
        .where(F.col("news"))
        .select(
            "client",
            "namesrv",
            "topic",
            "version",
            F.col("fetched_at_ms").alias("learned_at_ms"),
            "cause",
        )
    )


def change_propagation(changes: DataFrame, learned: DataFrame, window: MatchWindow) -> DataFrame:
    """Each learned version tied to the journal change it reflects, with ``lag_ms``."""
    c = changes.select(
        F.col("namesrv").alias("c_namesrv"),
        F.col("topic").alias("c_topic"),
        F.col("version").alias("c_version"),
        F.col("ts_ms").alias("changed_at_ms"),
        "kind",
        "notify",
    )
    lv = learned.withColumn("learn_id", F.monotonically_increasing_id())
    cond = (
        (lv["topic"] == c["c_topic"])
        & (lv["version"] == c["c_version"])
        & (c["changed_at_ms"] <= lv["learned_at_ms"] + window.clock_skew_ms)
        & (c["changed_at_ms"] >= lv["learned_at_ms"] - window.max_lag_ms)
        & (c["c_namesrv"].isNull() | (c["c_namesrv"] == lv["namesrv"]))
    )
    latest = Window.partitionBy("learn_id").orderBy(F.col("changed_at_ms").desc())
    return (
        lv.join(c, cond, "inner")
        .withColumn("rank", F.row_number().over(latest))
        .where(F.col("rank") == 1)
        .select(
            "client",
            "namesrv",
            "topic",
            "version",
            "kind",
            "notify",
            "changed_at_ms",
            "learned_at_ms",
            "cause",
            (F.col("learned_at_ms") - F.col("changed_at_ms")).alias("lag_ms"),
        )
    )


def change_table(changes: DataFrame, propagation: DataFrame | None) -> DataFrame:
    """One row per journal change: how many clients learned it and how fast."""
    base = changes.select(
        "namesrv",
        "topic",
        "version",
        "kind",
        "causes",
        "notify",
        F.col("ts_ms").alias("changed_at_ms"),
    )
    if propagation is None:
        return base.withColumns(
            {
                "clients": F.lit(0).cast("long"),
                "first_learned_ms": F.lit(None).cast("long"),
                "last_learned_ms": F.lit(None).cast("long"),
            }
        )
    per_change = propagation.groupBy("topic", "version", "changed_at_ms").agg(
        F.count(F.lit(1)).alias("clients"),
        F.min("lag_ms").alias("first_learned_ms"),
        F.max("lag_ms").alias("last_learned_ms"),
    )
    return base.join(per_change, ["topic", "version", "changed_at_ms"], "left").fillna(
        0, subset=["clients"]
    )


def summarize(
    journal: DataFrame,
    journal_quality: InputQuality,
    telemetry: DataFrame | None = None,
    telemetry_quality: InputQuality | None = None,
    window: MatchWindow | None = None,
) -> tuple[Summary, DataFrame]:
    """The whole analysis: the summary, and the per-change table (lazy, for writing)."""
    window = window or MatchWindow()
    s = Summary(journal=journal_quality, telemetry=telemetry_quality)
    ev = F.col("event")

    changes = journal.where(ev == "route_changed").cache()
    sent = ev == "notification_sent"
    frames = F.when(sent, F.col("frames"))
    frame_bytes = F.when(sent & (F.col("frames") > 0), F.col("bytes") / F.col("frames"))
    # One pass over the journal for every journal-wide figure.
    row = journal.agg(
        F.min("ts_ms").alias("first"),
        F.max("ts_ms").alias("last"),
        F.count(F.when(ev == "route_changed", 1)).alias("changes"),
        F.count(F.when((ev == "route_changed") & F.col("notify"), 1)).alias("notified"),
        F.count(F.when(sent, 1)).alias("ticks"),
        F.sum(frames).alias("frames"),
        F.sum(F.when(sent, F.col("bytes"))).alias("bytes"),
        F.struct(*_dist_aggs(frames)).alias("frames_dist"),
        F.struct(*_dist_aggs(frame_bytes)).alias("bytes_dist"),
        F.sum(F.when(ev == "subscribe", F.size("topic_names"))).alias("sub"),
        F.sum(F.when(ev == "unsubscribe", F.size("topic_names"))).alias("unsub"),
        F.count(F.when(ev == "connection_closed", 1)).alias("closed"),
    ).first()
    assert row is not None
    if row["first"] is not None:
        s.first_ts_ms, s.last_ts_ms = int(row["first"]), int(row["last"])
    s.changes, s.notified_changes = int(row["changes"]), int(row["notified"])
    s.notification_ticks = int(row["ticks"])
    s.notification_frames = int(row["frames"] or 0)
    s.notification_bytes = int(row["bytes"] or 0)
    s.frames_per_tick = distribution(row["frames_dist"])
    s.frame_bytes = distribution(row["bytes_dist"])
    s.subscribed_topics = int(row["sub"] or 0)
    s.unsubscribed_topics = int(row["unsub"] or 0)
    s.connections_closed = int(row["closed"])

    tables = _count_tables(
        {
            "kind": changes.select(F.col("kind").alias("key")),
            "cause": changes.select(F.explode("causes").alias("key")),
            "rule": journal.where(ev == "suppressed").select(F.explode("rules").alias("key")),
            "broker": journal.where(ev == "broker_event").select(
                F.concat_ws(" ", "kind", "cause").alias("key")
            ),
        }
    )
    s.broker_events = tables.get("broker", {})
    s.changes_by_kind = tables.get("kind", {})
    s.changes_by_cause = tables.get("cause", {})
    s.suppressed_by_rule = tables.get("rule", {})

    per_conn = (
        journal.where(ev == "slow_subscriber_skipped")
        .groupBy("namesrv", "conn")
        .agg(F.count(F.lit(1)).alias("skips"), F.max("pending_topics").alias("pending"))
        .cache()
    )
    slow = per_conn.agg(F.sum("skips").alias("skips"), F.count(F.lit(1)).alias("conns")).first()
    assert slow is not None
    s.slow_skips, s.slow_connections = int(slow["skips"] or 0), int(slow["conns"])
    s.slowest = [
        SlowConnection(r["namesrv"], int(r["conn"]), int(r["skips"]), int(r["pending"]))
        for r in per_conn.orderBy(F.col("skips").desc(), "conn").limit(SLOWEST_SHOWN).collect()
    ]
    per_conn.unpersist()

    s.episodes = pair_episodes(
        Transition(
            r["namesrv"],
            int(r["ts_ms"]),
            r["event"],
            r["degraded"],
            r["cpu_percent"],
            r["memory_percent"],
            r["pending_connections"],
            r["frames"],
            r["duration_ms"],
        )
        for r in journal.where(ev.isin("degradation", "backlog_drained"))
        .select(
            "namesrv",
            "ts_ms",
            "event",
            "degraded",
            "cpu_percent",
            "memory_percent",
            "pending_connections",
            "frames",
            "duration_ms",
        )
        .collect()
    )

    propagation: DataFrame | None = None
    if telemetry is not None:
        s.fetches_by_cause = _count_tables(
            {"c": telemetry.select(F.col("cause").alias("key"))}
        ).get("c", {})
        s.delivery = _dist(telemetry, F.col("fetched_at_ms") - F.col("notified_at_ms"))
        learned = learned_versions(telemetry).cache()
        propagation = change_propagation(changes, learned, window).cache()
        learned_n = learned.count()
        lag = F.col("lag_ms")
        # rollup adds the row of every cause (cause null); the quiet figure rides along.
        for r in (
            propagation.rollup("cause")
            .agg(
                *_dist_aggs(lag),
                F.struct(*_dist_aggs(F.when(~F.col("notify"), lag))).alias("quiet"),
            )
            .collect()
        ):
            if r["cause"] is None:
                s.propagation["all"] = distribution(r)
                s.propagation_quiet = distribution(r["quiet"])
                s.learned_changes = int(r["count"])
            else:
                s.propagation[str(r["cause"])] = distribution(r)
        s.unmatched_fetches = learned_n - s.learned_changes
    return s, change_table(changes, propagation)
