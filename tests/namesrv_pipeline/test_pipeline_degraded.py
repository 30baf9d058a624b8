"""A generated journal with a known degraded window, through the job's analysis, its plots'
data, its tuning and its replay check (``support.pipeline_records.DegradedRun``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("matplotlib")

from pyspark.sql import functions as F
from support.pipeline_records import T0, DegradedRun, journal_file, write_lines

from namesrv.config import NamesrvConfig
from namesrv_pipeline.report.plots import tick_series
from namesrv_pipeline.report.replay_model import ReplayResult
from namesrv_pipeline.report.tuning import Recommendation, Targets, recommend
from namesrv_pipeline.spark.aggregations import summarize
from namesrv_pipeline.spark.inputs import JournalSource, read_journal, read_telemetry
from namesrv_pipeline.spark.replay_grid import replay

RUN = DegradedRun()
CONFIG = NamesrvConfig(push=replace(NamesrvConfig().push, tick_interval_ms=200))


@pytest.fixture(scope="module")
def analysed(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("degraded")
    journal_file(root / "j", RUN.journal())
    write_lines(root / "t" / "client-1.jsonl", RUN.telemetry())
    journal = read_journal(spark, [JournalSource(str(root / "j"))])
    s, tables = summarize(journal, read_telemetry(spark, [str(root / "t")]))
    return s, (journal, tables)


def replayed(analysed, recs: list[Recommendation], target: int) -> ReplayResult:
    s, (journal, tables) = analysed
    changes = journal.usable.where(F.col("event") == "route_changed")
    result = replay(
        changes, journal.usable, tables.per_change, tables.replay, s, CONFIG, recs, Targets(target)
    )
    assert result is not None
    return result


def test_changes_detected_while_push_was_degraded_count_as_held(analysed):
    s, _ = analysed
    assert len(RUN.held) == 10
    assert s.held_changes == len(RUN.held)
    assert s.notified_changes == RUN.changes
    by_bucket = {b: (n, h, q) for b, n, h, q in s.charts.changes_notified}
    assert sum(h for _, h, _ in by_bucket.values()) == len(RUN.held)
    for b, (notified, held, _) in by_bucket.items():
        inside = RUN.degraded_at <= b and b + s.charts.bucket_ms <= RUN.recovered_at
        # Nothing drawn as notified inside the window, nothing held outside it.
        assert (notified == 0) if inside else (held == 0), b


def test_frames_per_tick_has_no_sample_inside_the_degraded_window(analysed):
    s, _ = analysed
    xs, frames, kib = tick_series(s)
    inside = [
        i
        for i, x in enumerate(xs)
        if RUN.degraded_at <= T0 + x and T0 + x + s.charts.bucket_ms <= RUN.recovered_at
    ]
    assert len(inside) == 10  # 1 s buckets
    assert all(math.isnan(frames[i]) and math.isnan(kib[i]) for i in inside)
    outside = [i for i in range(len(xs)) if i not in inside]
    assert all(not math.isnan(frames[i]) for i in outside)


def test_the_tick_is_not_raised_while_the_end_to_end_p99_misses_its_target(analysed):
    s, _ = analysed
    # Delivery alone (5 ms) would leave room for a 1,000 ms tick; the held changes put the
    # end-to-end p99 at 9,476 ms (rank 99 of 90 x 176 ms and 1,476 .. 10,476 ms).
    assert s.delivery.p99 == 5
    assert s.propagation["all"].p99 == pytest.approx(9_476, rel=1e-3)
    tick = {r.key: r for r in recommend(s, CONFIG, Targets(1_500))}["push.tick_interval_ms"]
    assert not tick.changed
    assert "end-to-end p99" in tick.reason
    assert "degraded windows included" in tick.optimises


def test_the_replay_verdict_matches_the_hand_computed_case(analysed):
    # Current thresholds: 90 changes wait 170 ms for the tick; the 10 held ones go out at
    # their recorded place in the drain (501 ms after the recovery at T0 + 60 s): 10,471 ..
    # 1,471 ms; plus the 5 ms the client took. Rank 99 of 100: 1,476 + 8 x 1,000, as recorded.
    result = replayed(analysed, [], 1_500)
    current = result.scenarios["current"]
    assert current.count == RUN.changes
    assert current.p50 == 175
    assert current.p99 == pytest.approx(9_476, rel=1e-3)
    assert result.calibration.recorded.p99 == pytest.approx(9_476, rel=1e-3)
    assert abs(result.calibration.error or 1) < 0.01
    assert result.met is False
    assert replayed(analysed, [], 10_000).met is True
    # A CPU low mark under the 10 % the recovering sample read: push never comes back, so
    # changes 50..99 wait to the journal's end (T0 + 99,200 ms), the recorded ones at their
    # place in the drain after it; rank 99 is change 51's.
    lower = Recommendation("pressure.cpu_low_percent", 75.0, 5.0, "test")
    lowered = replayed(analysed, [lower], 10_000)
    alone = lowered.scenarios["pressure.cpu_low_percent alone"]
    assert alone.p99 == pytest.approx(99_201 + 501 - 51_030 + 5, rel=1e-3)
    assert lowered.met is False
