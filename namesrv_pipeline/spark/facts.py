"""Facts: the one long shape every figure of an aggregation is counted in.

Each input row gives the facts it holds (a change gives one per figure it counts toward),
all in one struct shape declared by ``FACT_SPEC``, so one explode and one group-by compute
every figure of an input in one scan. The keys say which group a fact counts in; the measures
are summed, maximised or minimised per group, and each fact counts once (``count``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from namesrv_pipeline.report.summary import EXACT_BELOW


@dataclass(frozen=True, slots=True)
class FactField:
    name: str
    kind: T.DataType
    role: str
    """``key`` (grouped by), ``value`` (a distribution's value: its histogram bucket and
    largest are worked out from it), ``sum``, ``max`` or ``min``."""
    meaning: str


FACT_SPEC: tuple[FactField, ...] = (
    FactField("figure", T.StringType(), "key", "the figure the fact counts toward"),
    FactField(
        "at", T.LongType(), "key",
        "a long key: a time bucket's start, a telemetry file's hash, a NOTIFY's offset",
    ),
    FactField("name", T.StringType(), "key", "a name: cause, kind, rule, topic, name server"),
    FactField("detail", T.StringType(), "key", "a second name: a connection, a fetch's cause"),
    FactField(
        "bucket", T.LongType(), "key",
        "a histogram bucket, or a long naming the group (a change's journal line, a flag)",
    ),
    FactField("value", T.DoubleType(), "value", "a distribution's value (ms, frames, bytes)"),
    FactField("total", T.LongType(), "sum", "a quantity added up over the group"),
    FactField("tally", T.LongType(), "sum", "a second quantity added up over the group"),
    FactField("largest", T.DoubleType(), "max", "the group's largest value"),
    FactField("smallest", T.DoubleType(), "min", "the group's smallest value"),
)  # fmt: skip
"""The fact's fields; a group's rows add ``count`` (its facts)."""

KEYS = tuple(f.name for f in FACT_SPEC if f.role == "key")
_FIELDS = {f.name: f for f in FACT_SPEC}
FACT_ARRAY = T.ArrayType(T.StructType([T.StructField(f.name, f.kind) for f in FACT_SPEC]))


def histogram_bucket(value: Column) -> Column:
    """The histogram bucket of ``value`` (see ``summary.EXACT_BELOW``), as a long; values are
    rounded to whole units first."""
    v = F.round(value).cast(T.LongType())
    a = F.abs(v)
    step = F.pow(F.lit(2.0), F.floor(F.log2(a)) - 10)
    lower = (F.floor(a / step) * step).cast(T.LongType())
    return F.when(a < EXACT_BELOW, v).otherwise(F.signum(v).cast(T.LongType()) * lower)


def fact_struct(figure: str, **fields: Column | None) -> Column:
    """One fact of ``figure`` with ``fields`` (names of ``FACT_SPEC``); the others null (the
    sums 0).

    A distribution's ``value`` becomes its histogram bucket and its largest after the explode
    (``grouped``), in one place for every figure: a histogram bucket per figure inside the
    array of facts made the aggregation's generated method larger than the JVM's JIT
    compilers take (8,000 bytes of bytecode), and every line was then evaluated interpreted."""
    unknown = set(fields) - set(_FIELDS)
    if unknown:
        raise ValueError(f"not fact fields: {sorted(unknown)}")
    if fields.get("value") is not None and (
        fields.get("bucket") is not None or fields.get("largest") is not None
    ):
        raise ValueError("a fact of a distribution (value) takes neither bucket nor largest")
    cols: list[Column] = [F.lit(figure).alias("figure")]
    for f in FACT_SPEC[1:]:
        given = fields.get(f.name)
        default = F.lit(0) if f.role == "sum" else F.lit(None)
        cols.append((given if given is not None else default).cast(f.kind).alias(f.name))
    return F.struct(*cols)


def fact(when: Column, figure: str, **fields: Column | None) -> Column:
    """The fact for rows where ``when`` holds, else null."""
    return F.when(when, fact_struct(figure, **fields))


def each_fact(when: Column, items: str, figure: str, at: str | None = None) -> Column:
    """One fact per element of the array column ``items`` (its value as ``name``).

    The lambda is SQL, its variable named: one written in Python gets a fresh variable name
    in every query, so Spark would generate and compile new code (and the JVM compile that
    again) on every run."""
    values = {
        "figure": f"'{figure}'",
        "at": f"CAST({at} AS BIGINT)" if at is not None else "CAST(NULL AS BIGINT)",
        "name": "CAST(item AS STRING)",
    }
    parts = []
    for f in FACT_SPEC:
        sql_type = f.kind.simpleString().upper()
        default = "0" if f.role == "sum" else "NULL"
        parts.append(f"'{f.name}', {values.get(f.name, f'CAST({default} AS {sql_type})')}")
    struct = f"named_struct({', '.join(parts)})"
    return F.when(when, F.expr(f"transform({items}, item -> {struct})")).otherwise(
        F.array().cast(FACT_ARRAY)
    )


def grouped(
    source: DataFrame,
    facts: list[Column],
    top: dict[str, tuple[int, str]],
    kept: tuple[str, ...] = (),
    each: list[Column] | None = None,
) -> tuple[list[T.Row], DataFrame | None]:
    """Every fact of every row of ``source`` (``facts``: one per row, from ``fact``; ``each``:
    arrays of them, from ``each_fact``), from one scan, in one aggregation; a figure named in
    ``top`` keeps its ``limit`` groups largest in ``column`` (``count`` or ``largest``; then
    by name), with ``groups`` saying how many there were. The groups of the figures named in
    ``kept`` (per-change figures: as many as the journal has changes) stay in Spark: they come
    back as a DataFrame, cached with the rest so the aggregation runs once, and the others are
    collected."""
    # The single facts of a row go into one array, nulls where their condition fails, dropped
    # after the explode: one array per row, not one per fact joined into a new one.
    every = F.array(*facts)
    if each:
        every = F.concat(every, *each)
    exploded = source.select(F.explode(every).alias("f")).where(F.col("f").isNotNull())
    value = F.col("f.value")
    exploded = exploded.select(
        *(f"f.{k}" for k in KEYS if k != "bucket"),
        F.coalesce(F.col("f.bucket"), histogram_bucket(value)).alias("bucket"),
        "f.total",
        "f.tally",
        F.coalesce(F.col("f.largest"), value).alias("largest"),
        "f.smallest",
    )
    groups = exploded.groupBy(*KEYS).agg(
        F.count(F.lit(1)).alias("count"),
        F.sum("total").alias("total"),
        F.sum("tally").alias("tally"),
        F.max("largest").alias("largest"),
        F.min("smallest").alias("smallest"),
    )
    rest: DataFrame | None = None
    if kept:
        groups = groups.cache()
        rest = groups.where(F.col("figure").isin(*kept))
        groups = groups.where(~F.col("figure").isin(*kept))
    if not top:
        return groups.collect(), rest
    return _top(groups, top).collect(), rest


def _top(groups: DataFrame, top: dict[str, tuple[int, str]]) -> DataFrame:
    """``groups`` with the figures of ``top`` cut to their largest groups, ranked."""
    figure = F.col("figure")
    score = F.col("count").cast(T.DoubleType())
    for name, (_, column) in top.items():
        if column != "count":
            score = F.when(figure == name, F.col(column)).otherwise(score)
    ranked = Window.partitionBy("figure").orderBy(
        score.desc_nulls_last(),
        F.col("name"),
        F.col("detail").try_cast(T.LongType()),
        F.col("detail"),
    )
    cut = F.lit(False)
    for name, (limit, _) in top.items():
        cut = cut | ((figure == name) & (F.col("rank") > limit))
    return groups.withColumns(
        {
            "rank": F.row_number().over(ranked),
            "groups": F.count(F.lit(1)).over(Window.partitionBy("figure")),
        }
    ).where(~cut)
