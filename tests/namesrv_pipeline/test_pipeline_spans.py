"""Span lookups on the journal's timeline (``namesrv_pipeline.spark.spans.span_values``): the
value of the span of the row's name server that holds its time, or null."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import types as T

from namesrv_pipeline.report.replay_model import Release
from namesrv_pipeline.report.summary import Span
from namesrv_pipeline.spark.spans import MAX_TABLE_ROWS, span_values

ROWS = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("namesrv", T.StringType()),
        T.StructField("ts", T.LongType()),
        T.StructField("k", T.StringType()),
    ]
)


def looked_up(spark, rows, keyed, key=None, value=lambda s: s.start_ms):
    frame = spark.createDataFrame([(i, *r) for i, r in enumerate(rows)], ROWS)
    out = span_values(frame, keyed, "ts", value, "found", key=key)
    assert out.columns == [*frame.columns, "found"]
    return [r["found"] for r in out.orderBy("id").collect()]


def test_a_time_finds_the_span_of_its_own_name_server_start_included_end_not(spark):
    spans = [Span("a", 100, 200), Span("b", 150, 300), Span(None, 0, 50)]
    rows = [
        ("a", 99, None),
        ("a", 100, None),
        ("a", 199, None),
        ("a", 200, None),
        ("b", 199, None),
        ("b", 120, None),
        (None, 10, None),
        (None, 120, None),
        ("a", None, None),
    ]
    assert looked_up(spark, rows, {"x": spans}) == [None, 100, 100, None, 150, None, 0, None, None]


def test_where_two_spans_overlap_the_later_one_holds_the_time(spark):
    spans = [Span("a", 100, 400), Span("a", 300, 500)]
    rows = [("a", 250, None), ("a", 350, None), ("a", 450, None), ("a", 500, None)]
    assert looked_up(spark, rows, {"x": spans}) == [100, 300, 300, None]


def test_each_row_looks_in_the_spans_of_its_key(spark):
    keyed = {
        "current": [Release(None, 100, 200, 250)],
        "tuned": [Release(None, 100, 300, 350)],
        "quiet": [],
    }
    rows = [
        (None, 150, "current"),
        (None, 250, "current"),
        (None, 250, "tuned"),
        (None, 150, "quiet"),
    ]
    found = looked_up(spark, rows, keyed, key="k", value=lambda r: r.release_ms)
    assert found == [250, None, 350, None]


def test_spans_covering_more_time_than_the_table_has_rows_share_wider_buckets(spark):
    gap = 3 * MAX_TABLE_ROWS
    spans = [Span("a", i * 2 * gap, i * 2 * gap + gap) for i in range(300)]
    rows = [("a", s.start_ms + d, None) for s in spans[::37] for d in (-1, 0, gap - 1, gap)]
    expected = [
        s.start_ms if 0 <= d < gap else None for s in spans[::37] for d in (-1, 0, gap - 1, gap)
    ]
    assert looked_up(spark, rows, {"x": spans}) == expected


def test_no_spans_finds_nothing(spark):
    assert looked_up(spark, [("a", 1, None)], {"x": []}) == [None]
