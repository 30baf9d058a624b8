"""The replay's pure half: the degraded spans other thresholds would have given, the scenarios
it runs, and how the report states its verdict."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("pyspark")

from namesrv.config import NamesrvConfig
from pipeline.report.markdown import render
from pipeline.report.summary import Distribution, Episode, InputQuality, Summary
from pipeline.report.tuning import Recommendation
from pipeline.spark.replay_grid import Release, ReplayResult, releases, scenarios

BASE = NamesrvConfig()


def with_pressure(**values: object) -> NamesrvConfig:
    return replace(BASE, pressure=replace(BASE.pressure, **values))


def episode(at: int, until: int | None, cpu_after: float, drain: int = 100) -> Episode:
    return Episode(
        None, at, 95.0, 40.0, until, 3, drain if until else None, 3,
        recovered_cpu_percent=cpu_after, recovered_memory_percent=40.0,
    )  # fmt: skip


def test_the_recorded_thresholds_give_back_the_recorded_spans():
    eps = [episode(1_000, 2_000, 10.0), episode(5_000, None, 0.0)]
    assert releases(eps, BASE, BASE, 9_000) == [
        Release(None, 1_000, 2_000, 2_100),
        Release(None, 5_000, 9_001, 9_001),  # never recovered: past the journal's end
    ]


def test_a_recovery_above_the_tested_low_mark_keeps_push_off_until_one_below_it():
    eps = [episode(1_000, 2_000, 30.0), episode(3_000, 4_000, 10.0, drain=50)]
    assert releases(eps, BASE, with_pressure(cpu_low_percent=20.0), 9_000) == [
        Release(None, 1_000, 4_000, 4_050)
    ]


def test_a_longer_sample_and_a_slower_drain_release_later():
    slower = replace(
        with_pressure(sample_interval_ms=3_000),
        push=replace(BASE.push, recovery_notifications_per_second=1_000),
    )
    # recovery seen 2,000 ms later; the 100 ms drain at half the rate takes 200 ms
    assert releases([episode(1_000, 2_000, 10.0)], BASE, slower, 9_000) == [
        Release(None, 1_000, 4_000, 4_200)
    ]


def test_scenarios_are_current_tuned_and_each_replayed_suggestion_alone():
    recs = [
        Recommendation("push.tick_interval_ms", 1_000, 500, ""),
        Recommendation("server.output_buffer_bytes", 4 << 20, 8 << 20, ""),
        Recommendation("pressure.cpu_low_percent", 75.0, 75.0, "kept"),
    ]
    tested = scenarios(BASE, recs)
    assert list(tested) == ["current", "tuned", "push.tick_interval_ms alone"]
    assert BASE.server.output_buffer_bytes == 4 << 20
    assert tested["tuned"].server.output_buffer_bytes == 8 << 20
    assert tested["push.tick_interval_ms alone"].server.output_buffer_bytes == 4 << 20
    assert tested["push.tick_interval_ms alone"].push.tick_interval_ms == 500


def test_the_report_states_the_replay_verdict_per_scenario():
    s = Summary(journal=InputQuality(1, 10, 0, 0), telemetry=None)
    result = ReplayResult(
        1_500,
        6.0,
        2_422.0,
        {
            "current": Distribution(100, 300.0, 900.0, 2_400.0, 3_000.0),
            "tuned": Distribution(100, 200.0, 700.0, 1_400.0, 2_000.0),
        },
        {"current": 1_000, "tuned": 500},
    )
    assert result.met is True
    text = render(s, [], result)
    assert "the 1,500 ms end-to-end target would have been **met**" in text
    assert "| current | 1,000 | 100 | 300 | 900 | 2,400 | 3,000 | missed |" in text
    assert "| tuned | 500 | 100 | 200 | 700 | 1,400 | 2,000 | met |" in text
    assert "recorded end-to-end p99 (without the deliberate spread) was 2,422 ms" in text
