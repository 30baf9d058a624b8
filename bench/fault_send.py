"""Sends against a bad broker mix: no fault strategy, upstream 4.x tiers, 5.x tiers + detector.

A real name server and three broker stand-ins (``namesrv_sandbox/standin.py``) on loopback,
in this process: broker-a is a black hole (reads, never answers), broker-b answers after 800 ms,
broker-c is healthy. For each mode a fresh route client and producer send ``--count`` messages
with ``--concurrency`` in flight, and the script prints failures, total time, p50/p99 and the
share of first attempts that went to the bad brokers once the producer had seen them fail
(a retry after the black hole, an answer from the slow one). The baseline is mode ``off``.

The modes run interleaved in ``--rounds`` rounds, the order rotating each round, so a slow
stretch of a shared machine does not land on one mode only; the script prints each round's p99
per mode, the medians, and per round the ratio of the last mode's p99 to the one before it
((c) / (b) with the default modes).

    python bench/fault_send.py [--count 10000] [--concurrency 64] [--modes off,4x,5x] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from twisted.internet import defer, task  # noqa: E402

from client_push.cli.send import percentile  # noqa: E402
from client_push.config import ClientConfig  # noqa: E402
from client_push.producer.config import ProducerConfig  # noqa: E402
from client_push.producer.fault_table import FaultStrategyConfig  # noqa: E402
from client_push.producer.producer import Producer  # noqa: E402
from client_push.routes.client import RouteClient  # noqa: E402
from namesrv.config import from_mapping  # noqa: E402
from namesrv.server import NameServer  # noqa: E402
from namesrv_sandbox.standin import BrokerStandIn  # noqa: E402

BAD = ("broker-a", "broker-b")
MODES = {
    "off": ("no strategy", lambda: FaultStrategyConfig.preset("off")),
    "4x": ("upstream 4.x tiers", lambda: FaultStrategyConfig.preset("4x", detector=False)),
    "5x": ("5.x tiers + detector", lambda: FaultStrategyConfig.preset("5x", detector=True)),
}


async def run_mode(reactor: Any, namesrv: str, mode: str, args: argparse.Namespace) -> dict:
    client = RouteClient(ClientConfig(namesrv_addrs=(namesrv,)), reactor)
    client.start()
    producer = Producer(client, "bench", ProducerConfig(fault=MODES[mode][1]()), reactor=reactor)
    producer.start()
    body = b"x" * args.size
    latencies: list[float] = []
    failed: Counter[str] = Counter()
    seen = {"hole": False, "slow": False}
    snapshot: dict[str, Counter[str]] = {}
    state = {"next": 0}

    async def worker() -> None:
        while state["next"] < args.count:
            state["next"] += 1
            t0 = time.perf_counter()
            try:
                result = await producer.send("T", body)
            except Exception as exc:
                failed[type(exc).__name__] += 1
                continue
            latencies.append((time.perf_counter() - t0) * 1000)
            seen["hole"] |= result.attempts > 1
            seen["slow"] |= result.queue.broker_name == "broker-b"
            if "at" not in snapshot and seen["hole"] and seen["slow"]:
                snapshot["at"] = Counter(producer.first_attempts_by_broker)

    started = time.perf_counter()
    await defer.gatherResults(
        [defer.ensureDeferred(worker()) for _ in range(args.concurrency)], consumeErrors=True
    )
    elapsed = time.perf_counter() - started
    firsts = Counter(producer.first_attempts_by_broker)
    stats = producer.stats()
    producer.stop()
    await client.stop()
    after = firsts - snapshot.get("at", Counter())
    after_total = sum(after.values())
    latencies.sort()
    return {
        "mode": mode,
        "what": MODES[mode][0],
        "count": args.count,
        "failed": sum(failed.values()),
        "errors": dict(failed),
        "total_s": round(elapsed, 2),
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "p999_ms": round(percentile(latencies, 0.999), 1),
        "retries": stats.get("retries", 0),
        "first_attempts_by_broker": dict(sorted(firsts.items())),
        "bad_share_all": round(sum(firsts[b] for b in BAD) / max(1, sum(firsts.values())), 4),
        "bad_share_after_first_failures": round(
            sum(after[b] for b in BAD) / max(1, after_total), 4
        ),
        "first_attempts_after_first_failures": after_total,
    }


async def main(reactor: Any, args: argparse.Namespace) -> None:
    server = NameServer(
        from_mapping(
            {
                "server": {"listen": "127.0.0.1:0", "shutdown_grace_ms": 0},
                "pressure": {"enabled": False},
            }
        ),
        reactor,
        epoch=secrets.token_hex(4),
    )
    namesrv = f"127.0.0.1:{server.listen().getHost().port}"  # type: ignore[attr-defined]
    brokers = [BrokerStandIn(n, {"T": 4}, [namesrv], reactor=reactor) for n in (*BAD, "broker-c")]
    for b in brokers:
        await b.start()
    brokers[0].black_hole()
    brokers[1].slow(800)
    modes = args.modes.split(",")
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for r in range(args.rounds):
        order = modes[r % len(modes) :] + modes[: r % len(modes)]
        for mode in order:
            row = await run_mode(reactor, namesrv, mode, args)
            row["round"] = r + 1
            print(json.dumps(row), flush=True)
            runs[mode].append(row)
    for b in brokers:
        await b.kill()
    await server.stop(grace_ms=0)
    report(runs, modes, args)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def report(runs: dict[str, list[dict]], modes: list[str], args: argparse.Namespace) -> None:
    base = median([r["total_s"] for r in runs[modes[0]]])
    print(
        f"\n{args.count} sends, {args.concurrency} in flight, {args.rounds} rounds "
        f"(order rotating); baseline: mode {modes[0]}\n"
        "| mode | failed (all rounds) | total s, median (ratio) | p50 ms, median "
        "| p99 ms per round | p99 ms, median | p99.9 ms, median | retries, median "
        "| bad share (all), median | bad share after first failures, max |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in modes:
        rows = runs[mode]
        total = median([r["total_s"] for r in rows])
        p99s = " / ".join(f"{r['p99_ms']:.1f}" for r in rows)
        print(
            f"| {rows[0]['what']} | {sum(r['failed'] for r in rows)} "
            f"| {total:.2f} ({total / base:.2f}x) "
            f"| {median([r['p50_ms'] for r in rows]):.1f} "
            f"| {p99s} "
            f"| {median([r['p99_ms'] for r in rows]):.1f} "
            f"| {median([r['p999_ms'] for r in rows]):.1f} "
            f"| {median([r['retries'] for r in rows]):.0f} "
            f"| {median([r['bad_share_all'] for r in rows]):.2%} "
            f"| {max(r['bad_share_after_first_failures'] for r in rows):.2%} |"
        )
    if len(modes) >= 2:
        last, before = modes[-1], modes[-2]
        ratios = [
            c["p99_ms"] / b["p99_ms"] if b["p99_ms"] else float("inf")
            for b, c in zip(runs[before], runs[last], strict=True)
        ]
        lowest = sum(
            all(runs[last][i]["p99_ms"] < runs[m][i]["p99_ms"] for m in modes[:-1])
            for i in range(args.rounds)
        )
        print(
            f"\np99 {last} / {before} per round: {', '.join(f'{x:.2f}' for x in ratios)}; "
            f"median {median(ratios):.2f}; {last} has the lowest p99 in {lowest} of "
            f"{args.rounds} rounds"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--modes", default="off,4x,5x")
    parser.add_argument("--rounds", type=int, default=3)
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, parser.parse_args())))
