"""The job, unchanged, on a Spark standalone cluster: a master and two workers, each a JVM of
its own (``support.spark_standalone``), reading inputs from a path every worker sees. Its
outputs must equal those of local mode on the same inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.pipeline_records import changed, fetch, journal_file, write_lines

from namesrv_pipeline.cli import parse
from namesrv_pipeline.spark.job import run

JOB_TIMEOUT_S = 420


def inputs(root: Path) -> list[str]:
    """A small journal of both forms with a degraded window, and two clients' telemetry."""
    t0 = 1_700_000_000_000
    old = [
        dict(changed(t0 + 100 * i, f"T{i % 5}", i // 5 + 1), mutated_at_ms=t0 + 100 * i - 7)
        for i in range(50)
    ]
    new = [
        {
            "ts_ms": t0 + 10_000 + 200 * tick,
            "event": "route_changes",
            "kind": "UPDATED",
            "causes": ["wipe_write_perm"],
            "notify": True,
            "topics": [f"T{i}" for i in range(5)],
            "versions": [11 + tick] * 5,
            "waited_ms": [i * 3 for i in range(5)],
        }
        for tick in range(30)
    ]
    ticks = [
        {"ts_ms": t0 + 100 * i + 1, "event": "notification_sent", "connections": 2, "frames": 2}
        | {"topics": 1, "bytes": 180, "topic_list": ["T0"], "broker_entries": 0}
        for i in range(0, 140, 2)
    ]
    degraded = [
        {"ts_ms": t0 + 4_000, "event": "degradation", "degraded": True, "cpu_percent": 95.0}
        | {"memory_percent": 20.0, "pending_connections": 0},
        {"ts_ms": t0 + 6_000, "event": "degradation", "degraded": False, "cpu_percent": 40.0}
        | {"memory_percent": 20.0, "pending_connections": 2},
        {"ts_ms": t0 + 6_400, "event": "backlog_drained", "frames": 2, "duration_ms": 400},
    ]
    journal_file(root / "journal", [*old, *ticks, *degraded], start=t0, seq=1)
    journal_file(root / "journal", new, start=t0 + 10_000, seq=2)
    for client in ("a", "b"):
        lag = 20 if client == "a" else 45
        fetches = [
            fetch(f"T{i % 5}", i // 5 + 1, "notify", t0 + 100 * i + lag, notified=t0 + 100 * i)
            for i in range(50)
        ] + [
            fetch(f"T{i}", 11 + tick, "notify", t0 + 10_000 + 200 * tick + lag)
            for tick in range(30)
            for i in range(5)
        ]
        write_lines(root / "telemetry" / f"{client}.jsonl", fetches)
    return ["--journal", str(root / "journal"), "--telemetry", str(root / "telemetry")]


def job(args: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "namesrv_pipeline", *args],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.mark.timeout(600)  # the cluster's three JVMs start within it (once per session)
def test_the_job_on_a_standalone_cluster_gives_local_modes_outputs(
    spark, spark_standalone, tmp_path
):
    cluster = spark_standalone
    shared = cluster.root / "shared"  # every worker of this machine sees it
    paths = inputs(shared)
    local = tmp_path / "local"
    run(spark, parse([*paths, "--out", str(local)]))  # the local session
    out = shared / "cluster"
    job([*paths, "--out", str(out), "--master", cluster.master_url], env=cluster.env())

    # The executors ran in the workers' JVMs: each worker's work directory holds an app's.
    apps = [p for i in range(cluster.workers) for p in (cluster.root / f"work-{i}").glob("app-*")]
    assert apps, "no executor ran on the workers"
    assert json.loads((out / "summary.json").read_text()) == json.loads(
        (local / "summary.json").read_text()
    )
    assert (out / "report.md").read_text() == (local / "report.md").read_text()
    assert (out / "namesrv-tuned.toml").read_text() == (local / "namesrv-tuned.toml").read_text()
    summary = json.loads((out / "summary.json").read_text())["summary"]
    assert summary["changes"] == 50 + 150
