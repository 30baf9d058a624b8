"""A journal with a long degraded episode in which topics change many times: the headline
covers every held change, those superseded before reaching any client included, and its
figures are what a computation by hand from the per-change Parquet table gives."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from support.pipeline_records import (
    T0,
    backlog_drained,
    changed,
    degradation,
    fetch,
    journal_file,
    sent,
    write_lines,
)
from support.pipeline_tables import close, held_figures

from namesrv_pipeline.report.headline import headline
from namesrv_pipeline.report.summary import Summary
from namesrv_pipeline.report.tuning import Targets
from namesrv_pipeline.request import AnalysisRequest
from namesrv_pipeline.sources import JournalSource
from namesrv_pipeline.spark.job import run

TOPICS = ("a", "b", "c")
DEGRADED_AT = T0 + 10_000
RECOVERED_AT = T0 + 22_000
DRAIN_MS = 300
CLIENT_LAG = {"client-1": 50, "client-2": 120}


def changes() -> list[tuple[int, str, int]]:
    """(detection, topic, version): every second before and after the episode, every 400 ms
    within it (30 versions per topic, of which clients learn only the last)."""
    out = []
    for topic in TOPICS:
        times = [
            *range(T0 + 1_000, DEGRADED_AT, 1_000),
            *range(DEGRADED_AT + 200, RECOVERED_AT, 400),
            *range(RECOVERED_AT + 1_000, RECOVERED_AT + 4_000, 1_000),
        ]
        out += [(ts, topic, v) for v, ts in enumerate(times, start=2)]
    return out


def held(ts: int) -> bool:
    return DEGRADED_AT <= ts < RECOVERED_AT


def journal() -> list[dict]:
    out: list[dict] = [sent(T0, 1, 300)]
    for ts, topic, version in changes():
        out.append(dict(changed(ts, topic, version), mutated_at_ms=ts - 30))
    # a topic no client holds: its changes have no staleness, the last two held
    out += [
        dict(changed(T0 + 500 + 1_000 * i, "lonely", i + 2), mutated_at_ms=T0) for i in range(3)
    ]
    out += [
        dict(changed(DEGRADED_AT + 1_000 * i, "lonely", i + 5), mutated_at_ms=DEGRADED_AT)
        for i in (1, 2)
    ]
    # a topic clients learned once, then no more: its held change follows the last learned
    out += [
        dict(changed(T0 + 2_000, "gone", 2), mutated_at_ms=T0 + 1_990),
        dict(changed(DEGRADED_AT + 3_000, "gone", 3), mutated_at_ms=DEGRADED_AT + 2_990),
    ]
    out += [
        degradation(DEGRADED_AT, True, 95.0, 40.0),
        degradation(RECOVERED_AT, False, 5.0, 40.0, 2),
    ]
    out.append(backlog_drained(RECOVERED_AT + DRAIN_MS, 2, DRAIN_MS))
    out += [sent(ts, 2, 600) for ts in range(T0 + 200, T0 + 27_000, 200) if not held(ts)]
    return sorted(out, key=lambda r: r["ts_ms"])


def telemetry(lag: int) -> list[dict]:
    """A client learns each change sent at once, and of the held ones only each topic's last,
    with the backlog after recovery."""
    out = [fetch(topic, 1, "first", T0 - 5_000) for topic in (*TOPICS, "gone")]
    out.append(fetch("gone", 2, "notify", T0 + 2_000 + lag, notified=T0 + 2_001))
    last_held = {}
    for ts, topic, version in changes():
        if held(ts):
            last_held[topic] = version
        else:
            out.append(fetch(topic, version, "notify", ts + lag, notified=ts + 1))
    drained = RECOVERED_AT + DRAIN_MS
    out += [
        fetch(topic, version, "notify", drained + lag, notified=drained)
        for topic, version in last_held.items()
    ]
    return sorted(out, key=lambda r: r["fetched_at_ms"])


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("staleness")
    journal_file(root / "j", journal())
    for client, lag in CLIENT_LAG.items():
        write_lines(root / "t" / f"{client}.jsonl", telemetry(lag))
    request = AnalysisRequest(
        journals=(JournalSource(str(root / "j")),),
        out=str(root / "out"),
        telemetry=(str(root / "t"),),
    )
    outputs = run(spark, request)
    rows = [r.asDict() for r in spark.read.parquet(outputs.changes).collect()]
    found = json.loads(outputs.summary.read_text())
    return rows, found, outputs.report.read_text()


def test_the_held_figures_equal_a_computation_by_hand_from_the_parquet_table(report):
    rows, found, _ = report
    s = found["summary"]
    by_hand, stale, held_rows = held_figures(rows, s["episodes"], s["last_ts_ms"])
    assert [r["staleness_ms"] for r in rows] == stale
    assert [r["held"] for r in rows] == held_rows
    assert by_hand.held == s["held_changes"] == 3 * 30 + 3
    assert (by_hand.reached, by_hand.superseded, by_hand.unresolved) == (3, 87, 3)
    assert (s["held_reached"], s["held_superseded"], s["held_unresolved"]) == (3, 87, 3)
    # two of a topic nobody learned, one after the last version clients learned of its own
    assert by_hand.unlearned_topic == s["held_unlearned_topic"] == 2
    for figure, spread in (("staleness_held", by_hand.staleness), ("staleness", by_hand.every)):
        job = s[figure]
        assert job["count"] == spread.count, figure
        assert close(job["p50"], spread.p50) and close(job["p99"], spread.p99), figure
        assert job["max"] == spread.max, figure
    # the first held version waited for the whole episode, the drain and the slower client
    assert by_hand.staleness.max == RECOVERED_AT + DRAIN_MS + 120 - (DEGRADED_AT + 200 - 30)
    # the lonely topic's five changes reached nobody, nor did anything after them, nor
    # anything after gone's last
    assert by_hand.every.count == len(rows) - 6


def test_the_headline_states_the_held_figures_the_table_gives(report):
    rows, found, markdown = report
    s = found["summary"]
    by_hand, _, _ = held_figures(rows, s["episodes"], s["last_ts_ms"])
    line = headline(Summary.from_json(s), None, Targets()).staleness
    assert (
        f"Held while push was degraded: {by_hand.held} changes ({by_hand.reached} reached "
        f"clients, {by_hand.superseded} were superseded before reaching any, "
        f"{by_hand.unresolved} were followed by no version any client learned: "
        f"{by_hand.unlearned_topic} of topics no client learned any version of, "
        f"{by_hand.unresolved - by_hand.unlearned_topic} after the last version clients "
        "learned of theirs)"
    ) in line
    h = s["staleness_held"]
    assert (
        f"p50 {h['p50']:,.0f} ms, p99 {h['p99']:,.0f} ms, max {by_hand.staleness.max:,} ms" in line
    )
    assert f"over the {by_hand.staleness.count} with a staleness" in line
    assert f"**{line}**" in markdown
    # the end-to-end figure counts only the held changes some client learned
    assert f"it includes only the {by_hand.reached} some client learned" in markdown
