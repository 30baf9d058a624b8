"""Where the name server's time goes, per load case: each case runs against a fresh
``python -m namesrv`` under cProfile, and the profile is summed up by package and by function.

    python bench/profile_cases.py --cases lookup changed-plain --seconds 4 --out /tmp/profiles

Cases (the loads of ``bench/vs_upstream.py``): ``lookup`` (GET_ROUTEINFO_BY_TOPIC over 100
connections), ``changed-plain`` / ``changed-compressed`` (1,000-topic registers, each with a new
data version), ``heartbeat-plain`` / ``heartbeat-compressed`` (the very body again),
``big-plain`` / ``big-compressed`` (``--big-brokers`` first registers of ``--big-topics``
topics each). Per case it prints the rate, the server's CPU per request measured outside the
profiler (psutil, so the profiler's own cost is in it: compare cases and trees with each
other, not with ``vs_upstream``), the share of the busy time (the wait in epoll left out) per
package, and the functions with the most time of their own. The ``.prof`` files stay in
``--out`` for ``python -m pstats`` or snakeviz.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import psutil  # noqa: E402
from local_processes import bench_home, free_port, wait_port  # noqa: E402
from vs_upstream import (  # noqa: E402
    CHANGED_VERSIONS,
    closed_loop,
    closed_loop_go,
    go_loadgen,
    lookup_frame,
    register_frame,
    response_code,
    roundtrip,
)

ROOT = HERE.parent
NAMES_1K = [f"BenchTopic{i:04d}" for i in range(1_000)]
CASES = (
    "lookup",
    "changed-plain",
    "changed-compressed",
    "heartbeat-plain",
    "heartbeat-compressed",
    "big-plain",
    "big-compressed",
)
Load = Callable[..., float]
IDLE = {"<method 'poll' of 'select.epoll' objects>", "<method 'poll' of 'select.poll' objects>"}


def start_profiled(port: int, out: Path, root: Path) -> subprocess.Popen[bytes]:
    """``python -m namesrv`` of the checkout at ``root`` under ``profiled_namesrv.py``: it
    profiles between SIGUSR1 and SIGUSR2 and then writes ``out``."""
    runner = HERE / "profiled_namesrv.py"
    args = [sys.executable, str(runner), "--out", str(out), "--"]
    args += ["--listen", f"127.0.0.1:{port}", "--log-level", "WARNING"]
    env = dict(os.environ, PYTHONPATH=str(root), HOME=str(bench_home()))
    proc = subprocess.Popen(args, env=env, cwd=root)
    wait_port(port)
    return proc


def profile_window(proc: subprocess.Popen[bytes], out: Path) -> None:
    """Ends the profiled window and waits until the profile is written."""
    done = out.with_suffix(".done")
    done.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + 60
    while not done.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"no profile written to {out}")
        time.sleep(0.05)


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def package_of(filename: str) -> str:
    """The package a profiled function belongs to, for the by-package sum."""
    path = filename.replace(os.sep, "/")
    for ours in ("protocol", "namesrv"):
        if f"/{ours}/" in path and "site-packages" not in path:
            return ours
    if "/twisted/" in path:
        return "twisted"
    if path.startswith("~") or path.startswith("<"):
        return "builtins"
    return "stdlib and others"


def run_case(case: str, args: argparse.Namespace, load: Load) -> None:
    out = args.out / f"{case}.prof"
    port = free_port()
    proc = start_profiled(port, out, args.tree.resolve())
    server = psutil.Process(proc.pid)
    keep = socket.create_connection(("127.0.0.1", port))
    try:
        for broker in (100, 101):  # the brokers whose topics the lookups ask for
            frame = register_frame(broker, NAMES_1K, 1, compressed=False)
            if response_code(roundtrip(keep, frame)) != 0:
                raise RuntimeError("the setup register was refused")
        proc.send_signal(signal.SIGUSR1)
        before = cpu_seconds(server)
        count, label = drive(case, args, load, port)
        per = (cpu_seconds(server) - before) / count
        profile_window(proc, out)
        print(f"\n== {case}: {label}; server CPU {per * 1e6:,.1f} us per request (profiled)")
    finally:
        keep.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    summarise(out, args.top)


def drive(case: str, args: argparse.Namespace, load: Load, port: int) -> tuple[float, str]:
    """Runs the case's load; the number of requests answered and a line saying how fast."""
    if case == "lookup":
        rate = load(port, [lookup_frame("BenchTopic0000")] * 100, args.seconds)
        return rate * (args.seconds + 0.5), f"{rate:,.0f} lookups/s"
    kind, _, form = case.partition("-")
    compressed = form == "compressed"
    if kind == "big":
        return big_registers(port, args, compressed)
    if kind == "changed":
        versions = range(1, CHANGED_VERSIONS + 1)
        frames = [
            register_frame(20 + b, NAMES_1K, v, compressed=compressed, opaque=v)
            for b in range(4)
            for v in versions
        ]
        cycle = CHANGED_VERSIONS
    else:
        frames = [register_frame(b, NAMES_1K, 1, compressed=compressed) for b in range(4)]
        cycle = 1
    rate = load(port, frames, args.seconds, cycle=cycle)
    return rate * (args.seconds + 0.5), f"{rate:,.0f} registers/s"


def big_registers(port: int, args: argparse.Namespace, compressed: bool) -> tuple[float, str]:
    names = [f"T{i:06d}" for i in range(args.big_topics)]
    frames = [
        register_frame(300 + b, names, 1, compressed=compressed) for b in range(args.big_brokers)
    ]
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in frames]
    times = []
    try:
        for conn, frame in zip(conns, frames, strict=True):
            started = time.perf_counter()
            if response_code(roundtrip(conn, frame)) != 0:
                raise RuntimeError("a big register was refused")
            times.append(time.perf_counter() - started)
    finally:
        for conn in conns:
            conn.close()
    median = statistics.median(times) * 1e3
    return len(
        frames
    ), f"{len(frames)} first registers of {args.big_topics:,} topics, median {median:,.0f} ms"


def summarise(path: Path, top: int) -> None:
    """Shares of the busy time: the reactor's wait in epoll is idle, so it is left out."""
    stats = pstats.Stats(str(path))
    table = {key: row for key, row in stats.stats.items() if key[2] not in IDLE}  # type: ignore[attr-defined]
    total = sum(row[2] for row in table.values()) or 1.0
    by_package: Counter[str] = Counter()
    for (filename, _line, _name), row in table.items():
        by_package[package_of(filename)] += row[2]
    shares = ", ".join(f"{name} {t / total:.0%}" for name, t in by_package.most_common())
    print(f"own time by package: {shares}")
    rows = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:top]
    print(f"{'own %':>6} {'calls':>10} {'us/call':>8}  function")
    for (filename, line, name), (_cc, calls, own, _cum, _callers) in rows:
        where = "/".join(Path(filename).parts[-2:]) if filename.startswith("/") else filename
        per_call = own / max(calls, 1) * 1e6
        print(f"{own / total:6.1%} {calls:10,} {per_call:8.2f}  {name} ({where}:{line})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--big-topics", type=int, default=100_000)
    parser.add_argument("--big-brokers", type=int, default=10)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", type=Path, default=Path("profiles"))
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to profile")
    parser.add_argument("--loadgen", choices=("python", "go"), default="python")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "rocketmq-routepush",
        help="where the Go load generator is built [default: %(default)s]",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    load: Load = closed_loop
    if args.loadgen == "go":
        binary = go_loadgen(args.cache)

        def load(port: int, requests: list[bytes], seconds: float, cycle: int = 1) -> float:
            return closed_loop_go(binary, port, requests, seconds, cycle=cycle)

    for case in args.cases:
        run_case(case, args, load)


if __name__ == "__main__":
    main()
