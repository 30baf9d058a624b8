"""The pipeline's pure half: episode pairing, tuning rules, the tuned config file, the report."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from namesrv.config import NamesrvConfig
from namesrv.config_file import load
from namesrv.config_text import config_toml as to_toml
from namesrv_pipeline.report.markdown import render
from namesrv_pipeline.report.summary import (
    Distribution,
    Episode,
    InputQuality,
    Summary,
    Transition,
    pair_episodes,
)
from namesrv_pipeline.report.tuning import Targets, loosens, recommend, tuned
from namesrv_pipeline.spark.inputs import JournalSource

QUALITY = InputQuality(files=1, lines=10, corrupt=0, invalid=0)


def summary(**fields: object) -> Summary:
    return replace(Summary(journal=QUALITY, telemetry=QUALITY), **fields)


def by_key(s: Summary, config: NamesrvConfig | None = None, target: int = 1_500) -> dict:
    recs = recommend(s, config or NamesrvConfig(), Targets(target))
    return {r.key: r for r in recs}


def degraded(ts: int, cpu: float = 95.0, memory: float = 40.0, source: str | None = None):
    return Transition(source, ts, "degradation", True, cpu, memory, 0)


def recovered(ts: int, pending: int = 5, source: str | None = None):
    return Transition(source, ts, "degradation", False, 10.0, 40.0, pending)


def drained(ts: int, frames: int, duration: int, source: str | None = None):
    return Transition(source, ts, "backlog_drained", frames=frames, duration_ms=duration)


# -- episodes -------------------------------------------------------------------------------------


def test_episode_runs_from_degraded_through_recovery_to_drain():
    [ep] = pair_episodes([drained(5_000, 7, 2_000), recovered(3_000), degraded(1_000)])
    assert (ep.degraded_at_ms, ep.recovered_at_ms, ep.degraded_ms) == (1_000, 3_000, 2_000)
    assert (ep.backlog_connections, ep.drain_ms, ep.drain_frames, ep.relapsed) == (
        5,
        2_000,
        7,
        False,
    )


def test_degraded_again_before_the_drain_is_a_relapse_and_a_restart_is_not():
    eps = pair_episodes([degraded(0), recovered(1_000), degraded(1_500), degraded(9_000)])
    assert [(e.degraded_at_ms, e.relapsed, e.recovered_at_ms) for e in eps] == [
        (0, True, 1_000),
        (1_500, False, None),  # never recovered: the server restarted, or the journal ends
        (9_000, False, None),
    ]


def test_episodes_pair_per_name_server_and_skip_orphans():
    eps = pair_episodes(
        [
            recovered(100, source="a:1"),  # the journal starts mid-episode
            drained(150, 1, 50, source="a:1"),
            degraded(200, source="a:1"),
            degraded(250, source="b:2"),
            recovered(300, source="a:1"),
            recovered(900, source="b:2"),
        ]
    )
    assert [(e.namesrv, e.degraded_ms) for e in eps] == [("a:1", 100), ("b:2", 650)]


# -- tuning ---------------------------------------------------------------------------------------


def test_tick_kept_without_enough_notified_fetches():
    rec = by_key(summary(delivery=Distribution(5, 10, 10, 900, 900)))["push.tick_interval_ms"]
    assert not rec.changed and "5 notified fetches" in rec.reason


def test_tick_lowered_when_tick_plus_delivery_misses_the_target():
    rec = by_key(summary(delivery=Distribution(500, 200, 600, 734, 900)))["push.tick_interval_ms"]
    assert (rec.current, rec.suggested) == (1_000, 760)


def test_tick_kept_when_delivery_alone_misses_the_target():
    rec = by_key(summary(delivery=Distribution(500, 900, 1_400, 1_600, 2_000)))
    assert not rec["push.tick_interval_ms"].changed
    assert "cannot fix" in rec["push.tick_interval_ms"].reason


def test_tick_raised_when_a_short_tick_buys_nothing():
    cfg = NamesrvConfig(push=replace(NamesrvConfig().push, tick_interval_ms=50))
    rec = by_key(summary(delivery=Distribution(500, 20, 30, 40, 60)), cfg)["push.tick_interval_ms"]
    assert (rec.current, rec.suggested) == (50, 1_000)


def test_tick_never_raised_while_the_end_to_end_p99_misses_its_target():
    # The demo's case: delivery p99 6 ms leaves room for a 1,000 ms tick, but the end-to-end
    # p99 (held changes included) is 2,422 ms against 1,500.
    cfg = NamesrvConfig(push=replace(NamesrvConfig().push, tick_interval_ms=200))
    for e2e in (1_501, 2_422, 60_000):
        s = summary(
            delivery=Distribution(500, 3, 5, 6, 9),
            propagation={"all": Distribution(500, 300, 900, e2e, e2e)},
            held_changes=40,
        )
        rec = by_key(s, cfg)["push.tick_interval_ms"]
        assert rec.suggested <= rec.current, e2e
        assert "40 changes held" in rec.optimises


def test_a_raised_tick_keeps_the_end_to_end_p99_within_the_target():
    cfg = NamesrvConfig(push=replace(NamesrvConfig().push, tick_interval_ms=100))
    s = summary(
        delivery=Distribution(500, 3, 5, 6, 9),
        propagation={"all": Distribution(500, 300, 600, 1_000, 1_100)},
    )
    rec = by_key(s, cfg)["push.tick_interval_ms"]
    assert (rec.current, rec.suggested) == (100, 600)  # 1,000 + 500 more = the target
    assert "up to 500 ms longer" in rec.effect


def test_nothing_that_lengthens_propagation_is_suggested_while_the_target_is_missed():
    flapping = [Episode(None, i * 10_000, 95.0, 40.0, i * 10_000 + 1_000) for i in range(4)]
    relapsing = [replace(e, relapsed=True) for e in flapping]
    for episodes in (flapping, relapsing):
        calm = by_key(summary(episodes=episodes))
        assert any(r.changed for r in calm.values())  # the rules would loosen something
        missed = summary(
            episodes=episodes, propagation={"all": Distribution(50, 900, 1_800, 2_000, 2_500)}
        )
        for key, rec in by_key(missed).items():
            assert not loosens(rec), key
            if calm[key].changed and loosens(calm[key]):
                assert "misses the 1500 ms target" in rec.reason


def test_every_suggestion_names_what_it_optimises_and_a_change_its_effect():
    s = summary(
        delivery=Distribution(500, 200, 600, 734, 900),
        frame_bytes=Distribution(10, 1_000, 50_000, 200_000, 300_000),
        episodes=[Episode(None, i * 10_000, 95.0, 40.0, i * 10_000 + 1_000) for i in range(4)],
    )
    for rec in by_key(s).values():
        assert rec.optimises, rec.key
        assert bool(rec.effect) == rec.changed, rec.key


def test_output_buffer_raised_to_hold_the_largest_notifications():
    recs = by_key(summary(frame_bytes=Distribution(10, 1_000, 50_000, 200_000, 300_000)))
    rec = recs["server.output_buffer_bytes"]
    assert rec.suggested == 16 * 1024 * 1024  # 32 x 300 kB rounded up to a power of two
    small = by_key(summary(frame_bytes=Distribution(10, 100, 100, 100, 120)))
    assert not small["server.output_buffer_bytes"].changed


_NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
_EQUATION = re.compile(rf"({_NUMBER}) ([x/+-]) ({_NUMBER}) = ({_NUMBER})")


def stated_equations(text: str) -> list[tuple[float, str, float, float, int]]:
    """Each ``A op B = C`` a reason states: its numbers and C's decimals."""
    out = []
    for a, op, b, c in _EQUATION.findall(text):
        decimals = len(c.partition(".")[2])
        out.append((float(a.replace(",", "")), op, float(b.replace(",", "")),
                    float(c.replace(",", "")), decimals))  # fmt: skip
    return out


def check_arithmetic(text: str) -> int:
    """Every equation ``text`` states holds to the decimals shown; how many it states."""
    ops = {"x": lambda a, b: a * b, "/": lambda a, b: a / b,
           "+": lambda a, b: a + b, "-": lambda a, b: a - b}  # fmt: skip
    equations = stated_equations(text)
    for a, op, b, c, decimals in equations:
        assert abs(ops[op](a, b) - c) <= 0.5 * 10**-decimals + 1e-9, (a, op, b, c, text)
    return len(equations)


@pytest.mark.parametrize(
    ("current", "largest"),
    [(65_536, 1_610), (65_536, 1_000), (65_536, 3_000), (1 << 20, 40_000), (1 << 22, 2_000)],
)
def test_the_output_buffer_reason_states_the_numbers_that_chose_the_value(current, largest):
    cfg = NamesrvConfig(server=replace(NamesrvConfig().server, output_buffer_bytes=current))
    rec = by_key(summary(frame_bytes=Distribution(10, 100, 100, largest, largest)), cfg)[
        "server.output_buffer_bytes"
    ]
    stated = check_arithmetic(rec.reason) + check_arithmetic(rec.effect)
    assert stated >= (2 if not rec.changed else 4)
    holds = current // largest
    assert f"hold {holds:,} of them ({current:,} / {largest:,} = " in rec.reason
    room = 32 * largest
    assert f"32 x {largest:,} = {room:,} bytes" in rec.reason
    rounded = 1 << math.ceil(math.log2(room))
    assert rec.suggested == max(current, 1 << 20, rounded)
    assert f"the power of two {rounded:,}" in rec.reason and "1 MiB) floor" in rec.reason
    # "fewer than 32" only where it is true
    assert ("fewer than 32" in rec.reason) == (rec.changed and holds < 32)
    if rec.changed and holds >= 32:
        driver = "floor" if rec.suggested > rounded else "power of two"
        assert f"raised to the {driver} alone" in rec.reason


@pytest.mark.parametrize(
    ("current", "largest"),
    [(65_536, 3_543), (65_536, 3_277), (65_536, 2_049), (1 << 20, 3_542)],
)
def test_a_stated_quotient_has_the_whole_number_stated_beside_it(current, largest):
    # 1,048,576 / 3,543 is 295.95: "holds 295 ... = 296.0" would say two different things.
    cfg = NamesrvConfig(server=replace(NamesrvConfig().server, output_buffer_bytes=current))
    rec = by_key(summary(frame_bytes=Distribution(10, 100, 100, largest, largest)), cfg)[
        "server.output_buffer_bytes"
    ]
    stated = re.findall(r"holds? ([\d,]+) (?:of them|of the largest notification) \(([\d,]+) / "
                        r"([\d,]+) = ([\d,.]+)\)", f"{rec.reason} {rec.effect}")  # fmt: skip
    assert len(stated) == (2 if rec.changed else 1)
    for whole, a, b, quotient in stated:
        assert int(whole.replace(",", "")) == int(a.replace(",", "")) // int(b.replace(",", ""))
        assert quotient.replace(",", "").partition(".")[0] == whole.replace(",", "")
    check_arithmetic(rec.reason)
    check_arithmetic(rec.effect)


def test_the_demo_output_buffer_reason_names_the_floor_that_drives_it():
    # 65,536 bytes hold 40 notifications of 1,610 bytes: enough; the 1 MiB floor raises it.
    cfg = NamesrvConfig(server=replace(NamesrvConfig().server, output_buffer_bytes=65_536))
    rec = by_key(summary(frame_bytes=Distribution(10, 900, 1_200, 1_500, 1_610)), cfg)[
        "server.output_buffer_bytes"
    ]
    assert rec.suggested == 1_048_576
    assert "hold 40 of them (65,536 / 1,610 = 40.7), at least the 32 wanted" in rec.reason
    assert "raised to the floor alone" in rec.reason
    assert "1,048,576-byte (1 MiB) floor: 1,048,576" in rec.reason


def test_every_reason_and_effect_states_true_arithmetic():
    cases = [
        summary(
            delivery=Distribution(500, 200, 600, 734, 900),
            frame_bytes=Distribution(10, 1_000, 50_000, 200_000, 300_000),
            episodes=[Episode(None, i * 10_000, 95.0, 40.0, i * 10_000 + 1_000) for i in range(4)],
        ),
        summary(delivery=Distribution(500, 100, 200, 300, 400)),
        summary(
            delivery=Distribution(500, 10, 20, 30, 40),
            propagation_unspread=Distribution(500, 100, 200, 300, 400),
            frame_bytes=Distribution(10, 100, 100, 1_610, 1_610),
        ),
    ]
    stated = 0
    for s in cases:
        for rec in recommend(s, NamesrvConfig(), Targets(1_500)):
            stated += check_arithmetic(rec.reason) + check_arithmetic(rec.effect)
    assert stated >= 6


def test_recovery_rate_halved_when_drains_bring_pressure_back():
    eps = [
        Episode(None, i * 10_000, 95.0, 40.0, i * 10_000 + 3_000, 100, relapsed=True)
        for i in range(2)
    ]
    eps.append(Episode(None, 50_000, 95.0, 40.0, 53_000, 100, 500, 50))
    rec = by_key(summary(episodes=eps))["push.recovery_notifications_per_second"]
    assert (rec.current, rec.suggested) == (2_000, 1_000)


def test_recovery_rate_raised_when_backlogs_drain_slowly_without_relapse():
    eps = [Episode(None, 0, 95.0, 40.0, 3_000, 40_000, 20_000, 40_000)]
    rec = by_key(summary(episodes=eps))["push.recovery_notifications_per_second"]
    assert (rec.current, rec.suggested) == (2_000, 4_000)
    huge = [replace(eps[0], drain_frames=10_000_000, drain_ms=5_000_000)]
    capped = by_key(summary(episodes=huge))["push.recovery_notifications_per_second"]
    assert capped.suggested == 8_000  # never more than 4x in one step


def test_flapping_pressure_lengthens_sampling_and_widens_the_cpu_hysteresis():
    eps = [Episode(None, i * 60_000, 93.0, 40.0, i * 60_000 + 2_000) for i in range(4)]
    recs = by_key(summary(episodes=eps))
    assert recs["pressure.sample_interval_ms"].suggested == 2_000
    assert recs["pressure.cpu_low_percent"].suggested == 60.0  # 90 - 2 x (90 - 75)
    assert not recs["pressure.memory_low_percent"].changed


def test_sustained_pressure_changes_nothing():
    eps = [Episode(None, i * 60_000, 93.0, 40.0, i * 60_000 + 30_000) for i in range(4)]
    recs = by_key(summary(episodes=eps))
    assert not any(recs[k].changed for k in recs if k.startswith("pressure."))


def test_tuned_config_is_written_as_toml_the_name_server_loads(tmp_path):
    base = NamesrvConfig()
    recs = recommend(
        summary(
            delivery=Distribution(500, 200, 600, 734, 900),
            episodes=[Episode(None, i * 60_000, 93.0, 40.0, i * 60_000 + 2_000) for i in range(4)],
        ),
        base,
        Targets(),
    )
    config = tuned(base, recs)
    notes = {r.key: r.reason for r in recs if r.changed}
    path = tmp_path / "tuned.toml"
    path.write_text(to_toml(config, notes, header="tuned\nfrom tests"))
    assert load(path) == config
    text = path.read_text()
    assert text.startswith("# tuned\n# from tests\n")
    assert "# a change waits up to one tick" in text
    assert config.push.tick_interval_ms == 760
    assert config.pressure.cpu_low_percent == 60.0


def test_toml_keeps_strings_lists_and_nested_tables():
    raw = NamesrvConfig(
        server=replace(NamesrvConfig().server, go_away_alternatives=["10.0.0.2:9876", "[::1]:9"]),
        journal=replace(NamesrvConfig().journal, directory='C:\\journal "dir"'),
    )
    import tomllib

    from namesrv.config import from_mapping

    assert from_mapping(tomllib.loads(to_toml(raw))) == raw


def test_report_names_every_section_and_bolds_changed_values():
    s = summary(
        changes=3,
        notified_changes=2,
        changes_by_kind={"UPDATED": 3},
        suppressed_by_rule={"write_perm": 1},
        delivery=Distribution(500, 200, 600, 734, 900),
        episodes=[Episode("a:1", 0, 95.0, 40.0, 2_000, 7, 1_000, 7)],
    )
    text = render(s, recommend(s, NamesrvConfig(), Targets()))
    for heading in (
        "## Inputs",
        "## Route changes",
        "## Notifications",
        "## Degradation",
        "## Propagation",
        "## Tuned thresholds",
    ):
        assert heading in text
    assert "| `push.tick_interval_ms` | 1000 | **760** |" in text
    assert "## Replay of the journal" in text
    assert "| a:1 | 1970-01-01 00:00:00.000Z | 2,000 | 95 | 40 | 7 | 1,000 | 7 | no |" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/var/journal", JournalSource("/var/journal")),
        ("10.0.0.5:9876=/var/journal", JournalSource("/var/journal", "10.0.0.5:9876")),
        ("hdfs://nn:8020/j", JournalSource("hdfs://nn:8020/j")),
        ("/data/a=b", JournalSource("/data/a=b")),
    ],
)
def test_journal_source_names_its_name_server_only_when_prefixed(text, expected):
    assert JournalSource.parse(text) == expected


def test_kept_reasons_count_one_episode_in_the_singular():
    one = [Episode(None, 10_000, 95.0, 40.0, 50_000, 4, 200, 4)]
    recs = by_key(summary(episodes=one))
    assert recs["push.recovery_notifications_per_second"].reason == (
        "kept: 1 backlog drained, 0 relapses in 1 recovery"
    )
    assert recs["pressure.sample_interval_ms"].reason == (
        "kept: 1 degraded episode ended, 3 needed to judge"
    )
    two = [*one, Episode(None, 60_000, 95.0, 40.0, 70_000, 4, 200, 4)]
    assert by_key(summary(episodes=two))["push.recovery_notifications_per_second"].reason == (
        "kept: 2 backlogs drained, 0 relapses in 2 recoveries"
    )
