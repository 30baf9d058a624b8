"""``namesrv-pipeline demo``: a short recording of the whole system on loopback, its report's
plots, and its tuned config in a name server."""

from __future__ import annotations

import base64
import io
import json
import re

import pytest
import pytest_twisted
from twisted.internet import reactor

pytest.importorskip("matplotlib")

import matplotlib.image as mpimg

from namesrv.config_file import load
from namesrv.server import NameServer
from pipeline.demo.run import analysis, record
from pipeline.spark.job import run


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

    # the tuned config runs a name server as written
    server = NameServer(load(outputs.config), reactor)
    port = server.listen()
    assert port.getHost().port > 0  # type: ignore[attr-defined]
    await server.stop(grace_ms=0)
