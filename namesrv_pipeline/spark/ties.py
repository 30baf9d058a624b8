"""How client fetches are tied to the journal changes they reflect, and the per-change table
built from the telemetry's per-change groups. Spark DataFrames in and out.

The candidate changes of one (topic, version) travel as one array (versions restart with the
name server, and several journals may name the same pair). One equi-join on a 64-bit hash of
the pair, no shuffle after it: a long key is looked up in a plain array-backed map where a
(name, number) key took a generic hash map and a byte-wise compare per line. Pairs whose
hashes collide share an array, and a candidate counts only for its own pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from namesrv_pipeline.report.summary import MatchWindow, Span
from namesrv_pipeline.spark.spans import span_values


def _candidates(changes: DataFrame) -> DataFrame:
    """The journal's changes grouped by a 64-bit hash of their (topic, version)."""
    return changes.groupBy(F.xxhash64("topic", "version").alias("pair")).agg(
        F.collect_list(
            F.struct(
                F.col("topic").alias("topic"),
                F.col("version").alias("version"),
                F.col("ts_ms").alias("detected"),
                F.coalesce(F.col("mutated_at_ms"), F.col("ts_ms")).alias("mutated"),
                F.col("namesrv").alias("ns"),
                F.col("notify").alias("notify"),
                F.col("line").alias("line"),
            )
        ).alias("cands")
    )


def fetch_table(
    changes: DataFrame, telemetry: DataFrame, window: MatchWindow, named: bool = True
) -> DataFrame:
    """Every telemetry line; those with news (``inputs.read_telemetry``) tied (``matched``)
    to the journal change they reflect, or not.

    The candidate changes of one (topic, version) travel as one array (the module's
    docstring says why); the latest detected within the window wins. ``change`` names the
    change's journal line, ``changed_at_ms`` its detection, ``mutated_at_ms`` the first
    registry mutation behind it (its detection when the journal does not say), ``lag_ms`` end
    to end. Unless a journal is ``named`` for a name server, ``namesrv`` is not even parsed.
    """
    if not named:
        telemetry = telemetry.drop("namesrv").withColumn(
            "namesrv", F.lit(None).cast(T.StringType())
        )
    candidates = _candidates(changes)
    learned_at = F.col("fetched_at_ms")

    def fits(c: Column) -> Column:
        return (
            (c["topic"] == F.col("topic"))
            & (c["version"] == F.col("version"))
            & (c["detected"] <= learned_at + window.clock_skew_ms)
            & (c["detected"] >= learned_at - window.max_lag_ms)
            & (c["ns"].isNull() | (c["ns"] == F.col("namesrv")))
        )

    # Nearly always one candidate: tested as plain columns; the array functions (evaluated
    # row by row, outside Spark's generated code) only where a pair names several changes.
    only = F.col("cands")[0]
    # The lambda in SQL, with a name of its own: one built in Python gets a fresh name per
    # query, and Spark would then generate and compile new code on every run.
    latest_fitting = F.expr(
        "array_max(filter(cands, c -> c.topic = topic AND c.version = version"
        f" AND c.detected <= fetched_at_ms + {int(window.clock_skew_ms)}"
        f" AND c.detected >= fetched_at_ms - {int(window.max_lag_ms)}"
        " AND (c.ns IS NULL OR c.ns = namesrv)))"
    )
    best = F.when(F.size("cands") == 1, F.when(fits(only), only)).otherwise(latest_fitting)
    # Only lines with news look for their change: null keys are never looked up.
    pair = F.when(F.col("news"), F.xxhash64("topic", "version"))
    joined = telemetry.withColumn("pair", pair).join(candidates, "pair", "left")
    return joined.withColumn("best", best).select(
        "status",
        "client",
        "cause",
        "news",
        "topic",
        "version",
        (F.col("fetched_at_ms") - F.col("notified_at_ms")).alias("delivery_ms"),
        F.col("fetched_at_ms").alias("learned_at_ms"),
        "requested_at_ms",
        F.col("best").isNotNull().alias("matched"),
        F.col("best.line").alias("change"),
        F.col("best.notify").alias("notify"),
        F.col("best.detected").alias("changed_at_ms"),
        F.col("best.mutated").alias("mutated_at_ms"),
        (learned_at - F.col("best.mutated")).alias("lag_ms"),
    )


def change_table(
    changes: DataFrame, per_change: DataFrame | None, degraded: Sequence[Span] = ()
) -> DataFrame:
    """One row per journal change: how many clients learned it and how fast (after
    detection), from the ``change`` groups of the telemetry's aggregation (one per change and
    cause of the lines that learned it); whether it was ``held`` (owed a notification and
    detected in one of the ``degraded`` spans); and its ``staleness_ms``.

    Staleness is how long clients kept a route older than the change: from its first
    registry mutation to the earliest moment a version at or after it (of its topic and name
    server, detected no earlier) had reached every client that learned that version
    (``changed_at_ms + last_learned_ms``). A change clients learned ends no later than its
    own last client; one superseded before reaching anyone (held while push was degraded,
    then replaced) ends when its successor did. Null when no client learned it or anything
    after it."""
    base = changes.select(
        "line",
        "namesrv",
        "topic",
        "version",
        "kind",
        "causes",
        "notify",
        F.col("ts_ms").alias("changed_at_ms"),
        F.coalesce(F.col("mutated_at_ms"), F.col("ts_ms")).alias("mutated_at_ms"),
    )
    # Only a notified change looks its time up (a null time finds no span).
    base = span_values(
        base.withColumn("_held_at", F.when(F.col("notify"), F.col("changed_at_ms"))),
        {"degraded": list(degraded)},
        "_held_at",
        lambda _: 1,
        "_held",
    )
    base = base.withColumn("held", F.col("_held").isNotNull()).drop("_held_at", "_held")
    if per_change is None:
        return base.drop("line").withColumns(
            {
                "clients": F.lit(0).cast("long"),
                "first_learned_ms": F.lit(None).cast("long"),
                "last_learned_ms": F.lit(None).cast("long"),
                "staleness_ms": F.lit(None).cast("long"),
            }
        )
    learned = per_change.groupBy(F.col("bucket").alias("line")).agg(
        F.sum("count").alias("clients"),
        F.min("smallest").cast(T.LongType()).alias("first_learned_ms"),
        F.max("largest").cast(T.LongType()).alias("last_learned_ms"),
    )
    table = base.join(learned, "line", "left").drop("line").fillna(0, subset=["clients"])
    reached = F.when(F.col("clients") > 0, F.col("changed_at_ms") + F.col("last_learned_ms"))
    later = (
        Window.partitionBy("namesrv", "topic")
        .orderBy("changed_at_ms")
        .rangeBetween(Window.currentRow, Window.unboundedFollowing)
    )
    return table.withColumn("staleness_ms", F.min(reached).over(later) - F.col("mutated_at_ms"))
