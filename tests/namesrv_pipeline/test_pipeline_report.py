"""The report's pictures and page, drawn from hand-made summaries (no Spark)."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser

import pytest

pytest.importorskip("matplotlib")

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
from PIL import Image

from namesrv_pipeline.report.html import render_html
from namesrv_pipeline.report.markdown import render
from namesrv_pipeline.report.outputs import Findings
from namesrv_pipeline.report.plot_kit import at_least_floor, figure, log_ms_axis
from namesrv_pipeline.report.plots import plots
from namesrv_pipeline.report.plots_whatif import whatif_plots
from namesrv_pipeline.report.replay_model import (
    CPU_LOW,
    TICK,
    Calibration,
    Curve,
    GridPoint,
    ReplayResult,
)
from namesrv_pipeline.report.summary import (
    CDF_POINTS,
    Charts,
    Distribution,
    Episode,
    Histogram,
    InputQuality,
    Summary,
)
from namesrv_pipeline.report.tuning import Recommendation


def embedded_images(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def not_blank(png: bytes) -> bool:
    pixels = mpimg.imread(io.BytesIO(png), format="png")
    return float(pixels[..., :3].std()) > 0.02


def full_summary() -> Summary:
    t0 = 1_700_000_000_000
    d = Distribution(10, 20.0, 30.0, 40.0, 50.0)
    s = Summary(journal=InputQuality(1, 100, 0, 0), telemetry=InputQuality(2, 50, 0, 0))
    s.first_ts_ms, s.last_ts_ms = t0, t0 + 60_000
    s.propagation = {
        "all": d,
        "notify": d,
        "poll": Distribution(3, 900.0, 1_000.0, 1_100.0, 1_200.0),
    }
    s.propagation_detection = dict.fromkeys(s.propagation, Distribution(10, 5.0, 8.0, 9.0, 9.0))
    s.propagation_delivery = dict.fromkeys(s.propagation, d)
    s.propagation_request = dict.fromkeys(s.propagation, Distribution(10, 2.0, 6.0, 15.0, 19.0))
    s.propagation["broker_arrived"] = Distribution(8, 700.0, 900.0, 990.0, 1_000.0)
    s.propagation_detection["broker_arrived"] = Distribution(8, 0.0, 3.0, 9.0, 9.0)
    s.propagation_request["broker_arrived"] = Distribution(8, 690.0, 880.0, 980.0, 990.0)
    s.propagation_delivery["broker_arrived"] = Distribution(8, 695.0, 890.0, 985.0, 995.0)
    s.episodes = [
        Episode(
            None,
            t0 + 10_000,
            97.0,
            40.0,
            t0 + 20_000,
            3,
            500,
            3,
            recovered_cpu_percent=20.0,
            recovered_memory_percent=41.0,
        )
    ]
    s.charts = Charts(
        bucket_ms=1_000,
        changes_by_cause=[(t0 + i * 1_000, "register", i % 3 + 1) for i in range(60)],
        changes_notified=[(t0 + i * 1_000, i % 3 + 1, int(10 <= i < 20), i % 2) for i in range(60)],
        ticks=[(t0 + i * 1_000, 1, 3 + i % 4, 300 + 10 * i) for i in range(60)],
        propagation_cdf={
            k: [float(i * (5 if k == "poll" else 1)) for i in range(CDF_POINTS)]
            for k in s.propagation
        },
        top_topics=[(f"topic-{i}", 10 - i, 8 - i) for i in range(8)],
        top_clients=[(f"/t/client-{i}.jsonl", 5, 10.0 + i, 100.0 - i) for i in range(5)],
    )
    return s


def test_every_plot_is_embedded_and_shows_something():
    s = full_summary()
    page = render_html(s, plots(s), render(s, []))
    images = embedded_images(page)
    assert len(images) == 7
    assert all(not_blank(png) for png in images)
    # one sentence on how to read each, and no external resources
    assert page.count("<figcaption>") == 7
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "p50 20 ms" in page  # the end-to-end headline


class _Tags(HTMLParser):
    """Every element closed in order; the figures' captions."""

    VOID = frozenset({"meta", "img", "br", "hr", "link", "input"})

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.captions: list[str] = []
        self._caption: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)
        if tag == "figcaption":
            self._caption = []

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, (tag, self.open[-3:])
        self.open.pop()
        if tag == "figcaption" and self._caption is not None:
            self.captions.append("".join(self._caption))
            self._caption = None

    def handle_data(self, data):
        if self._caption is not None:
            self._caption.append(data)


def test_the_page_is_well_formed_and_each_plot_has_its_size_and_one_sentence():
    s = full_summary()
    page = render_html(s, plots(s), render(s, []))
    tags = _Tags()
    tags.feed(page)
    assert tags.open == []
    assert len(tags.captions) == 7
    for caption in tags.captions:
        _title, _, how = caption.partition(". ")
        # one sentence: a full stop at the end and none inside
        assert how.endswith(".") and not re.search(r"\. [A-Z]", how), caption
    sizes = [Image.open(io.BytesIO(png)).size for png in embedded_images(page)]
    one, two = (900, 420), (900, 588)  # one panel, two panels (plot_kit's figure sizes)
    assert sizes == [two, one, two, two, two, one, one]


def test_the_arrival_spread_gets_a_panel_of_its_own_only_when_present():
    s = full_summary()
    [with_spread] = [p for p in plots(s) if p.key == "parts"]
    for part in (s.propagation, s.propagation_detection, s.propagation_request):
        del part["broker_arrived"]
    del s.propagation_delivery["broker_arrived"]
    [without] = [p for p in plots(s) if p.key == "parts"]
    assert (
        Image.open(io.BytesIO(with_spread.png)).size[1]
        > Image.open(io.BytesIO(without.png)).size[1]
    )


def test_log_time_axes_have_no_zero_tick():
    fig, (ax,) = figure()
    ax.step(at_least_floor([0.0, 0.0, 3.0, 40.0, 900.0]), [0, 25, 50, 75, 100])
    log_ms_axis(ax)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(label.strip("$") != "0" for label in labels), labels
    assert ax.get_xlim()[0] == 1.0
    plt.close(fig)


def test_a_summary_without_data_gives_a_page_without_plots():
    s = Summary(journal=InputQuality(0, 0, 0, 0), telemetry=None)
    page = render_html(s, plots(s), render(s, []))
    assert embedded_images(page) == []
    assert "unknown (no client telemetry tied to the journal" in page


def test_histogram_percentiles_are_the_values_of_their_rank():
    h = Histogram()
    for value in range(1, 101):
        h.add(float(value), 1, float(value))
    d = h.distribution()
    assert (d.count, d.p50, d.p90, d.p99, d.max) == (100, 50.0, 90.0, 99.0, 100.0)
    assert h.quantiles([0.0, 0.07, 1.0]) == [1.0, 7.0, 100.0]


def test_the_report_gives_the_share_of_changes_learned_inline():
    s = full_summary()
    s.learned_changes, s.learned_inline = 8, 6
    assert "75.0% of them learned inline (6: the route came in the notification" in render(s, [])
    s.learned_changes = s.learned_inline = 0
    assert "learned inline" not in render(s, [])


def replay_result() -> ReplayResult:
    current = Distribution(1_000, 100.0, 190.0, 1_700.0, 2_400.0)

    def at(p99: float) -> Distribution:
        return Distribution(1_000, 100.0, 190.0, p99, p99 + 100)

    def curve(key: str, now: float, suggested: float, points: dict[float, float]) -> Curve:
        grid = [GridPoint(v, at(p), 4.0 + v / 1000) for v, p in points.items()]
        return Curve(key, now, suggested, grid)

    return ReplayResult(
        1_500,
        Calibration(Distribution(1_000, 101.0, 191.0, 1_650.0, 2_401.0), current),
        {"current": current, "tuned": at(1_450.0)},
        {"current": 500, "tuned": 200},
        [
            curve(TICK, 500, 200, {100: 1_200.0, 200: 1_450.0, 500: 1_700.0, 1_000: 2_300.0}),
            curve(CPU_LOW, 75.0, 75.0, {18.0: 9_000.0, 36.0: 4_000.0, 75.0: 1_700.0}),
        ],
    )


def test_the_report_renders_from_a_summary_json_alone_without_spark(tmp_path):
    """The report half needs nothing of Spark: a summary.json is enough, in a process where
    importing pyspark fails."""
    found = Findings(full_summary(), [], replay_result())
    (tmp_path / "summary.json").write_text(json.dumps(found.to_json()))
    blocked = (
        "import sys, runpy; sys.modules['pyspark'] = None; sys.modules['py4j'] = None; "
        f"sys.argv = ['report', {str(tmp_path / 'summary.json')!r}, {str(tmp_path / 'out')!r}]; "
        "runpy.run_module('namesrv_pipeline.report', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "out" / "report.html").read_text()
    assert len(embedded_images(page)) == 7 + 2  # the summary's plots and two what-if curves
    assert 'id="whatif-push.tick_interval_ms"' in page
    assert "End-to-end p99 40 ms against the 1,500 ms target: met" in page
    assert "target met (model error +3.0% at p99)" in page
    again = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert Findings.from_json(again) == found


def test_each_what_if_picture_marks_the_current_and_suggested_values_and_the_target():
    r = replay_result()
    pictures = whatif_plots(r)
    assert [p.key for p in pictures] == [f"whatif-{TICK}", f"whatif-{CPU_LOW}"]
    assert all(not_blank(p.png) for p in pictures)
    assert all(p.how_to_read.count(". ") == 0 and p.how_to_read.endswith(".") for p in pictures)
    page = render_html(full_summary(), pictures, render(full_summary(), [], r), r)
    assert page.count("<figcaption>") == 2


def test_a_replay_without_verdict_draws_no_curve_and_says_why_in_their_place():
    r = replay_result()
    off = Distribution(1_000, 100.0, 190.0, 1_650.0 * 6.83, 12_000.0)
    r = replace(r, calibration=replace(r.calibration, replayed=off))
    pictures = whatif_plots(r)
    assert pictures and all(p.png == b"" for p in pictures)
    assert all(p.how_to_read.startswith("No verdict for this key: the replay gives no verdict")
               for p in pictures)  # fmt: skip
    markdown = render(full_summary(), [], r)
    why = "the model misses the recorded p99 by +583.0% (more than 10%)"
    assert f"No verdict on any key: {why}" in markdown
    assert f"| `{TICK}` | 500 (current) (no verdict) |" in markdown
    page = render_html(full_summary(), pictures, markdown, r)
    assert not any(f'id="{p.key}"><img' in page for p in pictures)


def test_a_key_the_journal_cannot_judge_gets_its_reason_in_place_of_a_picture():
    r = replay_result()
    why = "the journal has no `degradation` record while pressure thresholds are on"
    r.curves[1] = replace(r.curves[1], no_verdict=why)
    pictures = whatif_plots(r)
    assert [p.key for p in pictures] == [f"whatif-{TICK}", f"whatif-{CPU_LOW}"]
    assert not_blank(pictures[0].png) and pictures[1].png == b""
    assert pictures[1].how_to_read.startswith(f"No verdict for this key: {why}.")
    markdown = render(full_summary(), [], r)
    assert f"- `{CPU_LOW}`: **no verdict**: {why}." in markdown
    assert f"| `{CPU_LOW}` | 18 (no verdict) |" in markdown
    page = render_html(full_summary(), pictures, markdown, r)
    assert len(embedded_images(page)) == 1 and page.count("<figcaption>") == 2
    assert ReplayResult.from_json(r.to_json()) == r
    assert r.to_json()["grid"][1]["no_verdict"] == why
    assert r.to_json()["grid"][0]["no_verdict"] is None


def test_the_fetch_table_total_is_split_in_the_text():
    s = full_summary()
    s.fetches_by_cause = {"inline": 1_253, "broker_arrived": 49, "first": 47, "version_check": 1}
    s.learned_changes, s.unmatched_fetches = 1_299, 4
    assert (
        "Of the 1,350 fetches above, 1,299 brought a client-version tied to a journal change; "
        "4 brought one tied to none"
    ) in render(s, [])
    assert "47 told the client nothing new (its first route of a topic" in render(s, [])


def test_counted_nouns_agree_with_their_number():
    s = full_summary()
    s.slow_skips, s.slow_connections = 79, 1
    assert "79 skips of 1 connection." in render(s, [])
    s.slow_skips, s.slow_connections = 1, 2
    assert "1 skip of 2 connections." in render(s, [])
    buffer = Recommendation("server.output_buffer_bytes", 65_536, 1_048_576, "why")
    tick = Recommendation("push.tick_interval_ms", 200, 100, "why")
    one = render(s, [buffer])
    assert "holds only the 1 key whose value changes, under its table" in one
    assert "merge it into the config file" in one
    two = render(s, [buffer, tick])
    assert "holds only the 2 keys whose value changes, each under its table" in two
    assert "merge them into the config file" in two


def test_held_changes_no_client_learned_after_are_split_by_whether_their_topic_was_learned():
    s = full_summary()
    s.held_changes, s.held_reached, s.held_superseded, s.held_unresolved = 20, 5, 9, 6
    s.held_unlearned_topic = 4
    assert (
        "6 were followed by no version any client learned: 4 of topics no client learned any "
        "version of, 2 after the last version clients learned of theirs)"
    ) in render(s, [])
    # a summary.json written before the split says both reasons, not a split it lacks
    s.held_unlearned_topic = None
    assert (
        "6 were followed by no version any client learned: no client held their topic, or the "
        "telemetry ends first)"
    ) in render(s, [])
