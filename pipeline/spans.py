"""Spark conditions on the journal's timeline: whether a record falls in one of a few spans of
its name server's time (push degraded, as ``summary.degraded_spans`` gives them)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline.summary import Span


def sql_text(value: str | None) -> str:
    """A SQL string literal of ``value`` (NULL for None)."""
    if value is None:
        return "CAST(NULL AS STRING)"
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def within(spans: Sequence[Span], ts: str = "ts_ms", namesrv: str = "namesrv") -> Column:
    """True where column ``ts`` lies in a span of the row's name server (``namesrv``, null
    for a journal given without one). The spans travel as one array literal searched per
    row, so the plan's size does not grow with their number; the lambda is SQL, its
    variable named, so the same spans give the same generated code."""
    if not spans:
        return F.lit(False)
    items = ", ".join(
        f"named_struct('ns', {sql_text(s.namesrv)}, 'lo', CAST({int(s.start_ms)} AS BIGINT),"
        f" 'hi', CAST({int(s.end_ms)} AS BIGINT))"
        for s in spans
    )
    return F.expr(
        f"exists(array({items}), span -> {ts} >= span.lo AND {ts} < span.hi"
        f" AND span.ns <=> {namesrv})"
    )
