"""Spark lookups on the journal's timeline: which of the spans of its name server's time
(push degraded, as ``summary.degraded_spans`` or ``replay.releases`` give them; the mutations
an early tick detects, as ``replay_model.early_ticks`` gives them) a record's time falls in.

The spans become a small table, broadcast and joined by equality on the name server and a
time bucket (each span listed in every bucket it covers), the range tested on the few rows a
bucket holds. Buckets narrow as spans grow in number, so a bucket holds a few spans however
many there are: the cost per row is one hash lookup and a few range tests whatever the number
of spans. An expression per span (a ``CASE`` tree) grows Spark's generated code with the
spans: past a hundred or so its methods are too large for the JVM's JIT compilers, or for
Spark's compiler at all, and every row is then evaluated interpreted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

MAX_TABLE_ROWS = 16_384
"""Bound on the broadcast table's rows beyond three per span: the bucket widens with the time
the spans cover and narrows with their number (at most the spans' mean length)."""


class Spanned(Protocol):
    @property
    def namesrv(self) -> str | None: ...

    @property
    def start_ms(self) -> int: ...

    @property
    def end_ms(self) -> int: ...


S = TypeVar("S", bound=Spanned)


def sql_text(value: str | None) -> str:
    """A SQL string literal of ``value`` (NULL for None)."""
    if value is None:
        return "CAST(NULL AS STRING)"
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


_TABLE = T.StructType(
    [
        T.StructField("_span_key", T.StringType()),
        T.StructField("_span_ns", T.StringType()),
        T.StructField("_span_bucket", T.LongType()),
        T.StructField("_span_start", T.LongType()),
        T.StructField("_span_end", T.LongType()),
        T.StructField("_span_value", T.LongType()),
    ]
)


def _disjoint(spans: Sequence[S]) -> list[tuple[str | None, int, int, S]]:
    """Per name server, each span by start, its end cut at the next one's start: a time two
    spans hold belongs to the later one."""
    by_source: dict[str | None, list[S]] = {}
    for span in spans:
        by_source.setdefault(span.namesrv, []).append(span)
    out: list[tuple[str | None, int, int, S]] = []
    for source, group in by_source.items():
        ordered = sorted(group, key=lambda s: s.start_ms)
        for i, s in enumerate(ordered):
            end = s.end_ms if i + 1 == len(ordered) else min(s.end_ms, ordered[i + 1].start_ms)
            if end > s.start_ms:
                out.append((source, s.start_ms, end, s))
    return out


def span_values(
    frame: DataFrame,
    keyed: Mapping[str, Sequence[S]],
    ts: str,
    value: Callable[[S], int],
    out: str,
    key: str | None = None,
    namesrv: str = "namesrv",
) -> DataFrame:
    """``frame`` with column ``out``: ``value`` (a long) of the span that holds column ``ts``
    among ``keyed[<column key>]`` (the one list when ``key`` is None) of the row's name
    server (column ``namesrv``, null for a journal given without one), else null."""
    parts = {k: _disjoint(spans) for k, spans in keyed.items()}
    covered = sum(end - start for spans in parts.values() for _, start, end, _ in spans)
    if not covered:
        return frame.withColumn(out, F.lit(None).cast(T.LongType()))
    count = sum(len(spans) for spans in parts.values())
    width = max(1, -(-covered // (MAX_TABLE_ROWS + count)))
    rows = [
        (k, source, b, start, end, value(span))
        for k, spans in parts.items()
        for source, start, end, span in spans
        for b in range(start // width, (end - 1) // width + 1)
    ]
    table = F.broadcast(frame.sparkSession.createDataFrame(rows, _TABLE))
    bucket = F.floor(F.col(ts) / F.lit(width)).cast(T.LongType())
    probe = frame.withColumn("_span_at", bucket)
    at = probe[ts]
    holds = (
        probe[namesrv].eqNullSafe(table["_span_ns"])
        & (probe["_span_at"] == table["_span_bucket"])
        & (at >= table["_span_start"])
        & (at < table["_span_end"])
    )
    if key is not None:
        holds = holds & (probe[key] == table["_span_key"])
    elif len(keyed) != 1:
        raise ValueError("spans under several keys need a key column")
    joined = probe.join(table, holds, "left")
    return joined.select(*[probe[c] for c in frame.columns], table["_span_value"].alias(out))
