"""How long the pipeline takes on a journal and telemetry of a given size, in local mode.

Generates a synthetic journal (route changes, their notifications, some suppressed) and the
telemetry of CLIENTS clients learning each notified change, then times ``pipeline.job.run`` on
them, twice per size (the first run in a JVM also pays for its warm-up). The baseline in the same
run is a plain Spark count of the same input lines: the floor any job reading them pays.

    python bench/pipeline_scale.py --changes 10000 100000 --clients 20
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from pipeline.cli import parser
from pipeline.job import run
from pipeline.session import spark_session


def generate(root: Path, changes: int, clients: int, rng: random.Random) -> tuple[int, int]:
    journal = root / "journal"
    journal.mkdir()
    telemetry = root / "telemetry"
    telemetry.mkdir()
    topics = max(1, changes // 10)
    versions: dict[str, int] = {}
    lines = 0
    fetch_lines = 0
    handles = [(telemetry / f"client-{c}.jsonl").open("w") for c in range(clients)]
    with (journal / "journal-1700000000000-000001.jsonl").open("w") as out:
        for i in range(changes):
            ts = 1_700_000_000_000 + i * 50
            topic = f"topic-{rng.randrange(topics)}"
            version = versions.get(topic, 0) + 1
            versions[topic] = version
            notify = rng.random() > 0.1
            rec = {
                "ts_ms": ts,
                "event": "route_changed",
                "topic": topic,
                "version": version,
                "kind": "CREATED" if version == 1 else "UPDATED",
                "causes": ["wipe_write_perm"],
                "notify": notify,
            }
            out.write(json.dumps(rec) + "\n")
            lines += 1
            if notify:
                sent = {
                    "ts_ms": ts,
                    "event": "notification_sent",
                    "connections": clients,
                    "frames": clients,
                    "topics": 1,
                    "bytes": 120 * clients,
                    "topic_list": [topic],
                }
                out.write(json.dumps(sent) + "\n")
                lines += 1
            for fh in handles:
                lag = rng.randint(1, 40) if notify else rng.randint(100, 30_000)
                fetch = {
                    "topic": topic,
                    "version": version,
                    "exists": True,
                    "cause": ("notify" if notify else "poll") if version > 1 else "first",
                    "notified_at_ms": ts if notify and version > 1 else None,
                    "requested_at_ms": ts + lag - 1,
                    "fetched_at_ms": ts + lag,
                    "namesrv": "127.0.0.1:9876",
                }
                fh.write(json.dumps(fetch) + "\n")
                fetch_lines += 1
    for fh in handles:
        fh.close()
    return lines, fetch_lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--master", default="local[*]")
    opts = ap.parse_args()
    spark = spark_session(opts.master)
    rng = random.Random(7)
    head = ("changes", "journal", "telemetry", "count s", "job s", "ratio")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (9, 9, 10, 8, 7, 6), strict=True)))
    for changes in opts.changes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            lines, fetches = generate(root, changes, opts.clients, rng)
            args = parser().parse_args(
                [
                    "--journal", str(root / "journal"),
                    "--telemetry", str(root / "telemetry"),
                    "--out", str(root / "out"),
                ]
            )  # fmt: skip
            for _ in range(2):
                start = time.perf_counter()
                spark.read.text([str(root / "journal"), str(root / "telemetry")]).count()
                floor = time.perf_counter() - start
                start = time.perf_counter()
                run(spark, args)
                took = time.perf_counter() - start
                print(
                    f"{changes:>9,} {lines:>9,} {fetches:>10,} {floor:>8.2f} {took:>7.2f} "
                    f"{took / floor:>6.1f}"
                )
    spark.stop()


if __name__ == "__main__":
    main()
