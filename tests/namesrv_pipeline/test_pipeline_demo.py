"""``namesrv-pipeline demo``: a short recording of the whole system on loopback, its report's
plots, and its tuned config in a name server."""

from __future__ import annotations

import base64
import io
import json
import re
import tomllib
from collections import Counter

import pytest
import pytest_twisted
from twisted.internet import reactor

pytest.importorskip("matplotlib")

import matplotlib.image as mpimg
from support.pipeline_tables import close, held_figures

from namesrv.config import from_mapping
from namesrv.server import NameServer
from namesrv_pipeline.demo.run import analysis, record
from namesrv_pipeline.report.markdown import causes_reconciled, rules_reconciled
from namesrv_pipeline.report.summary import Summary
from namesrv_pipeline.spark.job import run


def plot_images(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def has_content(png: bytes) -> bool:
    pixels = mpimg.imread(io.BytesIO(png), format="png")
    return float(pixels[..., :3].std()) > 0.02


@pytest_twisted.ensureDeferred
async def test_demo_records_the_system_and_its_report_shows_it(spark, tmp_path):
    said: list[str] = []
    rec = await record(reactor, tmp_path / "recording", 6.0, said.append)
    records = [
        json.loads(line)
        for path in sorted(rec.journal.glob("journal-*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    events = [r["event"] for r in records]
    changes = sum(len(r["topics"]) for r in records if r["event"] == "route_changes")
    assert changes >= 10 and "notification_sent" in events
    assert "slow_subscriber_skipped" in events, said
    assert len(list(rec.telemetry.glob("client-*.jsonl"))) == 4

    outputs = run(spark, analysis(rec, tmp_path / "out"))
    images = plot_images(outputs.html.read_text())
    assert len(images) >= 5
    assert all(has_content(png) for png in images)
    summary = json.loads(outputs.summary.read_text())["summary"]
    assert summary["propagation"]["all"]["count"] > 0
    assert summary["changes_without_mutation_time"] == 0

    # every count reconciled on the demo's own tables: causes per change from the Parquet
    # table, rules per silent change from the journal, as the report's text states them
    report = outputs.report.read_text()
    rows = [r.asDict() for r in spark.read.parquet(outputs.changes).collect()]
    assert len(rows) == summary["changes"]
    causes = sum(len(r["causes"]) for r in rows)
    assert causes == sum(summary["changes_by_cause"].values())
    per_change = Counter(str(len(r["causes"])) for r in rows)
    assert per_change == Counter(summary["changes_by_cause_count"])
    assert causes_reconciled(Summary.from_json(summary)) in report
    assert f"adds up to {causes:,} for {len(rows):,} changes" in report
    silent = [r for r in records if r["event"] == "route_changes" and not r["notify"]]
    rules = sum(len(r["rules"]) * len(r["topics"]) for r in silent)
    quiet = sum(not r["notify"] for r in rows)
    assert rules == sum(summary["suppressed_by_rule"].values())
    assert f"adds up to {rules:,} for {quiet:,} suppressed changes" in report
    assert rules_reconciled(Summary.from_json(summary)) in report
    assert any("broker operations made" in line for line in said)

    # the headline's held and staleness figures are the table's, worked out by hand
    by_hand, stale, held = held_figures(rows, summary["episodes"], summary["last_ts_ms"])
    assert [r["staleness_ms"] for r in rows] == stale and [r["held"] for r in rows] == held
    assert by_hand.held == summary["held_changes"]
    assert (by_hand.reached, by_hand.superseded, by_hand.unresolved) == (
        summary["held_reached"],
        summary["held_superseded"],
        summary["held_unresolved"],
    )
    assert by_hand.unlearned_topic == summary["held_unlearned_topic"]
    for figure, spread in (("staleness_held", by_hand.staleness), ("staleness", by_hand.every)):
        assert summary[figure]["count"] == spread.count and summary[figure]["max"] == spread.max
        assert close(summary[figure]["p99"], spread.p99), figure

    # the tuned file holds the changed keys alone; merged into the demo's config it runs a
    # name server
    keys = tomllib.loads(outputs.config.read_text())
    changed = {f"{t}.{k}" for t, values in keys.items() for k in values}
    recs = json.loads(outputs.summary.read_text())["recommendations"]
    assert changed == {r["key"] for r in recs if r["changed"]}
    assert "listen" not in outputs.config.read_text()
    base = tomllib.loads(rec.config.read_text())
    merged = {t: {**base.get(t, {}), **keys.get(t, {})} for t in {*base, *keys}}
    server = NameServer(from_mapping(merged), reactor)
    port = server.listen()
    assert port.getHost().port > 0  # type: ignore[attr-defined]
    await server.stop(grace_ms=0)
