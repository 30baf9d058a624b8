"""Spark conditions on the journal's timeline: which of a few spans of its name server's time
(push degraded, as ``summary.degraded_spans`` or ``replay.releases`` give them) a record's
time falls in.

The spans become one SQL expression: per name server, a binary search over its spans sorted
by start, written as nested ``CASE WHEN`` (compiled with the rest of the query, a handful of
comparisons per row whatever the number of spans), where a lambda over an array of spans
would be interpreted row by row, every span tried.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from pyspark.sql import Column
from pyspark.sql import functions as F


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


def lookup_sql(
    spans: Sequence[S], ts: str, value: Callable[[S], str], namesrv: str = "namesrv"
) -> str:
    """SQL: ``value`` of the span of the row's name server (column ``namesrv``, null for a
    journal given without one) that holds ``ts`` (a column name), else NULL. Spans of one
    name server must not overlap."""
    if not spans:
        return "NULL"
    by_source: dict[str | None, list[S]] = {}
    for span in spans:
        by_source.setdefault(span.namesrv, []).append(span)

    def search(ordered: Sequence[S]) -> str:
        if len(ordered) == 1:
            s = ordered[0]
            return f"CASE WHEN {ts} >= {s.start_ms} AND {ts} < {s.end_ms} THEN {value(s)} END"
        mid = len(ordered) // 2
        return (
            f"CASE WHEN {ts} < {ordered[mid].start_ms} THEN {search(ordered[:mid])}"
            f" ELSE {search(ordered[mid:])} END"
        )

    branches = " ".join(
        f"WHEN {namesrv} <=> {sql_text(source)} THEN "
        f"{search(sorted(group, key=lambda s: s.start_ms))}"
        for source, group in sorted(by_source.items(), key=lambda kv: kv[0] or "")
    )
    return f"CASE {branches} END"


def within(spans: Sequence[Spanned], ts: str = "ts_ms", namesrv: str = "namesrv") -> Column:
    """True where column ``ts`` lies in a span of the row's name server."""
    if not spans:
        return F.lit(False)
    return F.coalesce(F.expr(lookup_sql(spans, ts, lambda s: "TRUE", namesrv)), F.lit(False))
