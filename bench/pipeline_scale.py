"""How long the pipeline takes on a journal and telemetry of a given size, in local mode.

Three figures, each against its target and beside the floor of the same run, a plain Spark
line count of the same files (what any job reading them pays):

1. ``--changes`` route changes (90 % notified) with the telemetry of ``--clients`` clients
   learning every change, on ``local[*]``: target 100,000 changes / 2 M telemetry lines <= 15 s
   once the JVM is up (the first run in a JVM pays its warm-up and is shown apart, and its JIT
   compilers go on warming for a few runs more: ``--warm-runs`` says how many follow). The
   telemetry is what the current client writes, each record marked ``news``; with
   ``--old-telemetry``, what older clients wrote, without it (the job then works it out);
2. a journal of ``--events`` records alone (changes, notifications, suppressions,
   subscriptions, slow-subscriber skips, degradation episodes): target 10 M in <= 120 s;
3. the first workload on ``local[1]`` and ``local[2]``: target speed-up >= 1.6. Each master
   runs in a process of its own, pinned with ``taskset`` to as many cores as it has task
   threads (``-c 0`` and ``-c 0,1``), its JVM and Python driver included: unpinned,
   ``local[1]`` runs one task at a time but the JIT compilers, the garbage collector, the
   driver's planning and the plots still take the second core, so it is not one core. The
   speed-up compares the medians of each master's later warm runs (the JIT compilers settle
   later on one core than on two), over ``--rounds`` pairs of processes run alternately.

Every measurement runs in a fresh process of its own (generating the input leaves a large
Python heap behind in this one). Besides wall time it prints the CPU seconds this process and
its JVM used: on a machine shared with other work, wall time grows with the load and CPU time
much less.

    python bench/pipeline_scale.py --changes 100000 --clients 20 --events 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path

import psutil

from namesrv_pipeline.cli import parse
from namesrv_pipeline.spark.job import run
from namesrv_pipeline.spark.session import spark_session

T0 = 1_700_000_000_000


def generate(
    root: Path, changes: int, clients: int, rng: random.Random, news: bool = True
) -> tuple[int, int]:
    """A journal of ``changes`` route changes and the telemetry of ``clients`` learning each.

    The telemetry is what the client writes, each record marked ``news`` (docs/telemetry.md),
    or without the field as older clients wrote it (``news=False``). A file is written change
    by change, not in its records' time order (a poll's fetch may come after the notified
    fetch of the topic's next version), so ``news`` is worked out in time order, as the
    client, which writes each record when it applies it, would have marked it.
    """
    journal = root / "journal"
    journal.mkdir()
    telemetry = root / "telemetry"
    telemetry.mkdir()
    topics = max(1, changes // 10)
    versions: dict[int, int] = {}
    planned: list[tuple[int, int, int, bool, int]] = []
    lags = array("q")
    for i in range(changes):
        ts = T0 + i * 50
        t = rng.randrange(topics)
        version = versions.get(t, 0) + 1
        versions[t] = version
        notify = rng.random() > 0.1
        mutated = ts - rng.randint(0, 1_000)
        planned.append((ts, t, version, notify, mutated))
        for _ in range(clients):
            lags.append(rng.randint(1, 40) if notify else rng.randint(100, 30_000))
    # Every version of a topic differs, so a record is news unless it is the first the client
    # fetched of its topic (the earliest written first on a tie).
    first: dict[tuple[int, int], tuple[int, int]] = {}
    for i, (ts, t, _, _, _) in enumerate(planned):
        for c in range(clients):
            fetched = ts + lags[i * clients + c]
            held = first.get((c, t))
            if held is None or fetched < held[0]:
                first[(c, t)] = (fetched, i)
    lines = fetch_lines = 0
    handles = [(telemetry / f"client-{c}.jsonl").open("w") for c in range(clients)]
    with (journal / f"journal-{T0}-000001.jsonl").open("w") as out:
        for i, (ts, t, version, notify, mutated) in enumerate(planned):
            kind = "CREATED" if version == 1 else "UPDATED"
            out.write(
                f'{{"ts_ms":{ts},"event":"route_changed","topic":"topic-{t}","version":{version},'
                f'"kind":"{kind}","causes":["wipe_write_perm"],"notify":{str(notify).lower()},'
                f'"mutated_at_ms":{mutated}}}\n'
            )
            lines += 1
            if notify:
                out.write(
                    f'{{"ts_ms":{ts},"event":"notification_sent","connections":{clients},'
                    f'"frames":{clients},"topics":1,"bytes":{120 * clients},'
                    f'"topic_list":["topic-{t}"]}}\n'
                )
                lines += 1
            cause = ("notify" if notify else "poll") if version > 1 else "first"
            notified = str(ts) if notify and version > 1 else "null"
            for c, fh in enumerate(handles):
                lag = lags[i * clients + c]
                mark = f',"news":{str(first[(c, t)][1] != i).lower()}' if news else ""
                fh.write(
                    f'{{"topic":"topic-{t}","version":{version},"exists":true,"cause":"{cause}",'
                    f'"notified_at_ms":{notified},"requested_at_ms":{ts + lag - 1},'
                    f'"fetched_at_ms":{ts + lag},"namesrv":"127.0.0.1:9876"{mark}}}\n'
                )
                fetch_lines += 1
    for fh in handles:
        fh.close()
    return lines, fetch_lines


def generate_journal(root: Path, events: int, rng: random.Random) -> int:
    """A journal alone with ``events`` records of every kind, in several files."""
    journal = root / "journal"
    journal.mkdir()
    per_file = 2_000_000
    versions: dict[int, int] = {}
    written = 0
    seq = 0
    while written < events:
        seq += 1
        ts = T0 + written * 10
        with (journal / f"journal-{ts}-{seq:06d}.jsonl").open("w") as out:
            for _ in range(min(per_file, events - written)):
                ts = T0 + written * 10
                roll = rng.random()
                if roll < 0.4:
                    t = rng.randrange(100_000)
                    version = versions.get(t, 0) + 1
                    versions[t] = version
                    out.write(
                        f'{{"ts_ms":{ts},"event":"route_changed","topic":"topic-{t}",'
                        f'"version":{version},"kind":"UPDATED","causes":["register"],'
                        f'"notify":true,"mutated_at_ms":{ts - 300}}}\n'
                    )
                elif roll < 0.8:
                    out.write(
                        f'{{"ts_ms":{ts},"event":"notification_sent","connections":20,'
                        f'"frames":20,"topics":3,"bytes":{rng.randint(2_000, 9_000)},'
                        f'"topic_list":["topic-1","topic-2","topic-3"]}}\n'
                    )
                elif roll < 0.85:
                    out.write(
                        f'{{"ts_ms":{ts},"event":"suppressed","topic":"topic-1","version":1,'
                        f'"rules":["broker_startup"]}}\n'
                    )
                elif roll < 0.95:
                    out.write(
                        f'{{"ts_ms":{ts},"event":"subscribe","conn":{rng.randrange(1_000)},'
                        f'"topics":["topic-1","topic-2"]}}\n'
                    )
                elif roll < 0.99999:
                    out.write(
                        f'{{"ts_ms":{ts},"event":"slow_subscriber_skipped",'
                        f'"conn":{rng.randrange(1_000)},"pending_topics":{rng.randint(1, 50)}}}\n'
                    )
                else:
                    out.write(
                        f'{{"ts_ms":{ts},"event":"degradation","degraded":true,'
                        f'"cpu_percent":95.0,"memory_percent":40.0,"pending_connections":0}}\n'
                        f'{{"ts_ms":{ts + 5},"event":"degradation","degraded":false,'
                        f'"cpu_percent":20.0,"memory_percent":40.0,"pending_connections":30}}\n'
                    )
                    written += 1
                written += 1
    return written


def cpu_seconds() -> float:
    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def timed(call: Callable[[], object]) -> tuple[float, float]:
    cpu, start = cpu_seconds(), time.perf_counter()
    call()
    return time.perf_counter() - start, cpu_seconds() - cpu


def measure(master: str, inputs: list[str], out: Path, runs: int) -> list[tuple[float, ...]]:
    """(floor s, job s, job cpu s) per run, in one fresh JVM on ``master``."""
    spark = spark_session(master)
    args = parse([*inputs, "--out", str(out)])
    paths = [p for p in inputs if not p.startswith("--")]
    results: list[tuple[float, ...]] = []
    try:
        for _ in range(runs):
            floor, _cpu = timed(lambda: spark.read.text(paths).count())
            took, cpu = timed(lambda: run(spark, args))
            results.append((floor, took, cpu))
    finally:
        spark.stop()
    return results


def row(master: str, label: str, *figures: float) -> str:
    if not figures:
        return (
            f"{master:>9} {label:>14} {'floor s':>8} {'job s':>7} {'job cpu s':>9} {'job/floor':>9}"
        )
    floor, took, cpu = figures
    return f"{master:>9} {label:>14} {floor:>9.2f} {took:>9.2f} {cpu:>9.1f} {took / floor:>9.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=100_000, help="0 skips workloads 1 and 3")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--events", type=int, default=10_000_000, help="0 skips the journal alone")
    ap.add_argument("--no-speedup", action="store_true", help="skip local[1] / local[2]")
    ap.add_argument("--speedup-only", action="store_true", help="skip local[*] in workload 1")
    ap.add_argument(
        "--old-telemetry", action="store_true", help="telemetry without news, as older clients"
    )
    ap.add_argument(
        "--warm-runs",
        type=int,
        default=2,
        help="runs after the first in each JVM (its JIT compilers keep warming up for several)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="local[1] / local[2] processes, alternating, for the speed-up",
    )
    ap.add_argument("--one", metavar="MASTER", help=argparse.SUPPRESS)
    ap.add_argument("--inputs", default="[]", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.one:  # one master's runs, in a process pinned by the parent
        with tempfile.TemporaryDirectory() as out:
            runs = 1 + opts.warm_runs
            print(json.dumps(measure(opts.one, json.loads(opts.inputs), Path(out), runs)))
        return
    rng = random.Random(7)
    print(f"machine: {psutil.cpu_count()} cores, load average {psutil.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if opts.changes:
            changes_workload(root, opts)
        if opts.events:
            (root / "b").mkdir()
            written = generate_journal(root / "b", opts.events, rng)
            print(f"\n2. a journal alone of {written:,} events")
            for floor, took, cpu in apart("local[*]", ["--journal", str(root / "b/journal")], 0):
                print(row("local[*]", "JVM up", floor, took, cpu))
    print(f"\nload average at the end {psutil.getloadavg()}")


def changes_workload(root: Path, opts: argparse.Namespace) -> None:
    """Workloads 1 and 3."""
    rng = random.Random(7)
    (root / "a").mkdir()
    lines, fetches = generate(root / "a", opts.changes, opts.clients, rng, not opts.old_telemetry)
    inputs = ["--journal", str(root / "a/journal"), "--telemetry", str(root / "a/telemetry")]
    form = "without news (older clients)" if opts.old_telemetry else "with news"
    print(
        f"\n1. {opts.changes:,} changes: {lines:,} journal lines,"
        f" {fetches:,} telemetry lines {form}"
    )
    if not opts.speedup_only:
        print(row("master", "run"))
        runs = apart("local[*]", inputs, opts.warm_runs)
        for i, (floor, took, cpu) in enumerate(runs):
            label = "JVM warm-up" if i == 0 else f"warm {i}"
            print(row("local[*]", label, floor, took, cpu))
        warm = sorted(took for _, took, _ in runs[1:])
        if warm:
            print(
                f"warm runs within 15 s: {sum(t <= 15 for t in warm)} of {len(warm)};"
                f" median {warm[len(warm) // 2]:.2f} s, best {warm[0]:.2f} s"
            )
    if not opts.no_speedup:
        speedup(inputs, opts.warm_runs, opts.rounds)


def apart(
    master: str, inputs: list[str], warm_runs: int, prefix: list[str] | None = None
) -> list[tuple[float, ...]]:
    """``measure`` in a fresh process (``prefix``: e.g. taskset pinning it), so no run pays
    for what this one did before (generating the input leaves a large Python heap)."""
    command = [*(prefix or []), sys.executable, __file__, "--one", master]
    command += ["--warm-runs", str(warm_runs), "--inputs", json.dumps(inputs)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{master} failed:\n{done.stderr}")
    return [tuple(r) for r in json.loads(done.stdout.strip().splitlines()[-1])]


def settled(runs: list[tuple[float, ...]]) -> list[float]:
    """The job times of a process's later half of warm runs: its JIT compilers go on compiling
    for several runs (more slowly on one core, where they share it with the tasks), so the
    early ones measure the warm-up more than the job."""
    warm = [took for _, took, _ in runs[1:]]
    return warm[len(warm) // 2 :]


def speedup(inputs: list[str], warm_runs: int, rounds: int) -> None:
    """Workload 3: each master in its own process, pinned to as many cores as it has threads;
    ``rounds`` times, alternating, so a change in the machine's speed during the measurement
    falls on both masters."""
    taskset = shutil.which("taskset")
    cores = len(os.sched_getaffinity(0))
    if taskset is None or cores < 2:
        print("\n3. speed-up: skipped, it needs taskset and two cores this process may use")
        return
    first, second = sorted(os.sched_getaffinity(0))[:2]
    print(
        f"\n3. speed-up on the same input, {rounds} round(s) of {warm_runs} warm runs; each master"
        " in its own process"
        f" pinned with taskset: local[1] to core {first}, local[2] to cores {first},{second}"
        " (JVM, JIT, GC, driver and plots included)"
    )
    print(row("master", "run"))
    later: dict[str, list[float]] = {"local[1]": [], "local[2]": []}
    best: dict[str, float] = {}
    for round_ in range(1, rounds + 1):
        for master, cpus in (("local[1]", f"{first}"), ("local[2]", f"{first},{second}")):
            runs = apart(master, inputs, warm_runs, [taskset, "-c", cpus])
            for i, (floor, took, cpu) in enumerate(runs):
                label = "JVM warm-up" if i == 0 else f"warm {i}"
                print(row(master, f"{label} r{round_}" if rounds > 1 else label, floor, took, cpu))
            later[master] += settled(runs)
            best[master] = min(best.get(master, float("inf")), *(r[1] for r in runs[1:]))
    one, two = statistics.median(later["local[1]"]), statistics.median(later["local[2]"])
    print(
        f"local[2] / local[1] speed-up: {one / two:.2f} (medians of the later half of the warm"
        f" runs: {one:.2f} / {two:.2f} s); best against best:"
        f" {best['local[1]'] / best['local[2]']:.2f}"
    )


if __name__ == "__main__":
    main()
