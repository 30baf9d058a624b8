"""The replay's pure half: the degraded spans other thresholds would have given, the scenarios
and grid it runs, the replayed distribution, the calibration that decides whether there is a
verdict, and how the report states it. No Spark here."""

from __future__ import annotations

from dataclasses import replace

import pytest

from namesrv.config import NamesrvConfig
from namesrv_pipeline.report.markdown import render
from namesrv_pipeline.report.replay_model import (
    PRESSURE_KEYS,
    Calibration,
    Curve,
    GridPoint,
    Release,
    ReplayResult,
    end_to_end,
    grid,
    missing_readings,
    releases,
    scenarios,
    unjudged,
)
from namesrv_pipeline.report.summary import Distribution, Episode, InputQuality, Summary
from namesrv_pipeline.report.tuning import Recommendation

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


def result(recorded_p99: float, replayed_p99: float, tuned_p99: float, missing=None):
    current = Distribution(1_372, 98.0, 191.0, replayed_p99, 2_400.0)
    return ReplayResult(
        1_500,
        Calibration(Distribution(1_372, 101.0, 191.0, recorded_p99, 2_401.0), current),
        {"current": current, "tuned": Distribution(1_372, 90.0, 150.0, tuned_p99, 1_500.0)},
        {"current": 200, "tuned": 100},
        [
            Curve(
                "push.tick_interval_ms",
                200,
                100,
                [
                    GridPoint(100, Distribution(1_372, 59.0, 96.0, 1_400.0, 1_500.0), 4.2),
                    GridPoint(200, current, 4.2),
                    GridPoint(1_000, Distribution(1_372, 493.0, 950.0, 2_300.0, 2_500.0), 4.8),
                ],
            )
        ],
        missing,
    )


def test_the_report_opens_with_the_targets_figure_and_the_verdict_with_its_model_error():
    s = Summary(journal=InputQuality(1, 10, 0, 0), telemetry=InputQuality(1, 10, 0, 0))
    s.propagation_unspread = Distribution(1_372, 101.0, 191.0, 2_202.0, 2_401.0)
    r = result(2_202.0, 2_199.0, 1_400.0)
    assert r.met is True and r.no_verdict is None
    text = render(s, [], r)
    head = text.split("## ", 1)[0]
    assert "**End-to-end p99 2,202 ms against the 1,500 ms target: missed**" in head
    assert "p99 1,400 ms, target met (model error -0.1% at p99)" in head
    assert "| recorded | 1,372 | 101 | 191 | 2,202 | 2,401 |" in text
    assert "| replayed, current thresholds | 1,372 | 98 | 191 | 2,199 | 2,400 |" in text
    assert "| tuned | 100 | 1,372 | 90 | 150 | 1,400 | 1,500 | met |" in text
    assert "| `push.tick_interval_ms` | 100 (suggested) | 59 | 96 | 1,400 | 4.2 |" in text
    assert "| `push.tick_interval_ms` | 200 (current) |" in text


def test_a_model_off_the_recording_by_more_than_a_tenth_gives_no_verdict():
    r = result(2_202.0, 5_624.0, 1_400.0)
    assert r.calibration.error == pytest.approx(5_624 / 2_202 - 1)
    assert r.met is None
    assert r.no_verdict is not None and "misses the recorded p99 by +155.4%" in r.no_verdict
    s = Summary(journal=InputQuality(1, 10, 0, 0), telemetry=None)
    text = render(s, [], r)
    assert (
        "Replay: no verdict (the model misses the recorded p99 by +155.4% (more than 10%)" in text
    )
    assert "model error +155.4% at p99)" in text  # one figure, one value
    assert "| tuned | 100 | 1,372 | 90 | 150 | 1,400 | 1,500 | - |" in text  # shown, not judged


def test_missing_readings_give_no_verdict_whatever_the_figures():
    r = result(2_202.0, 2_202.0, 1_400.0, missing="only 5 client-versions were recorded")
    assert r.met is None and r.no_verdict == "only 5 client-versions were recorded"


def test_the_replayed_distribution_adds_a_client_part_to_each_server_part_by_hand():
    # server parts 100 and 200 ms, client parts 0 and 10 ms (equally often): 100, 110, 200,
    # 210 ms, each a quarter; plus two kept lags of 5,000 ms
    d = end_to_end({100.0: 2, 200.0: 2}, {0.0: 1, 10.0: 1}, {})
    assert (d.count, d.p50, d.p90, d.p99, d.max) == (4, 110.0, 210.0, 210.0, 210.0)
    kept = end_to_end({100.0: 2, 200.0: 2}, {0.0: 1, 10.0: 1}, {5_000.0: 2})
    assert (kept.count, kept.p50, kept.p99, kept.max) == (6, 200.0, 5_000.0, 5_000.0)
    alone = end_to_end({100.0: 3}, {}, {})
    assert (alone.count, alone.p99) == (3, 100.0)


def test_the_grid_holds_round_values_the_current_and_the_suggested_one():
    recs = [Recommendation("push.tick_interval_ms", 1_000, 350, "")]
    points = grid(BASE, recs)
    assert list(points["push.tick_interval_ms"]) == [100, 200, 350, 500, 1_000]
    # low marks as shares of the high one (90 % CPU by default), the current one included
    assert list(points["pressure.cpu_low_percent"]) == [18.0, 36.0, 54.0, 72.0, 75.0]
    assert list(points["pressure.sample_interval_ms"]) == [500, 1_000, 2_000, 4_000]
    assert points["push.tick_interval_ms"][350].push.tick_interval_ms == 350


def test_the_replay_result_round_trips_through_json():
    r = result(2_202.0, 2_199.0, 1_400.0)
    assert ReplayResult.from_json(r.to_json()) == r
    assert r.to_json()["grid"][0]["points"][0] == {
        "value": 100,
        "end_to_end": {"count": 1_372, "p50": 59.0, "p90": 96.0, "p99": 1_400.0, "max": 1_500.0},
        "frames_per_tick": 4.2,
    }


def test_a_replay_needs_telemetry_enough_client_versions_and_mutation_times():
    s = Summary(journal=InputQuality(1, 10, 0, 0), telemetry=InputQuality(1, 10, 0, 0))
    assert "no client telemetry" in (missing_readings(s, False, []) or "")
    s.propagation_unspread = Distribution(5, 10.0, 20.0, 30.0, 30.0)
    assert missing_readings(s, True, []) == "only 5 client-versions were recorded, 20 needed"
    s.propagation_unspread = Distribution(500, 10.0, 20.0, 30.0, 30.0)
    assert missing_readings(s, True, []) is None
    s.changes_without_mutation_time = 3
    assert "3 changes lack their mutation time" in (missing_readings(s, True, []) or "")
    s.changes_without_mutation_time = 0
    s.episodes = [replace(episode(1_000, 2_000, 10.0), recovered_cpu_percent=None)]
    lower = [Recommendation("pressure.cpu_low_percent", 75.0, 40.0, "")]
    assert missing_readings(s, True, []) is None  # no low mark replayed: the gap is harmless
    assert missing_readings(s, True, lower) == (
        "`pressure.cpu_low_percent` is tuned, but 1 of 1 recoveries lack their CPU reading: "
        "where a tested low mark would have ended push's degradation is unknown"
    )


def test_a_key_whose_replay_needs_readings_the_journal_lacks_is_not_judged():
    s = Summary(journal=InputQuality(1, 10, 0, 0), telemetry=InputQuality(1, 10, 0, 0))
    # No degradation record with pressure on: push never degraded or the records were lost.
    lost = unjudged(s)
    assert sorted(lost) == sorted(PRESSURE_KEYS)
    assert all("no `degradation` record" in why for why in lost.values())
    assert unjudged(s, pressure_on=False) == {}  # push never degrades: nothing to judge
    s.episodes = [
        episode(1_000, 2_000, 10.0),
        replace(episode(5_000, 6_000, 10.0), recovered_memory_percent=None),
        replace(episode(8_000, 9_000, 10.0), recovered_memory_percent=None),
    ]
    assert unjudged(s) == {
        "pressure.memory_low_percent": "2 of 3 recoveries lack their memory reading: where a "
        "tested low mark would have ended push's degradation is unknown"
    }
    s.episodes = [episode(1_000, 2_000, 10.0)]
    assert unjudged(s) == {}
