"""``python -m client_push send``: send N messages and print one JSON summary.

The quick way to check a cluster, like upstream's benchmark producer: where the first attempts
went, how many retries it took, the latency percentiles and every status and failure.
A progress bar is drawn on stderr when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from typing import IO, Any

from client_push.cli.loops import (
    EXIT_TLS_MISMATCH,
    add_loop_option,
    faces,
    run,
    tls_mismatch,
    watch_tls,
)
from client_push.config import ClientConfig, ClientConfigError, parse_namesrv_addrs
from client_push.producer.config import ProducerConfig, ProducerConfigError, from_mapping
from client_push.producer.fault_table import FaultConfigError, FaultStrategyConfig
from client_push.producer.send_core import SendError
from client_push.runtime.interface import Future, Runtime, settle
from protocol.command_line import DefaultsHelpFormatter

EXIT_FAILED_SENDS = 1


def add_parser(commands: Any) -> None:
    send = commands.add_parser(
        "send",
        help="send N messages and print a JSON summary",
        description="Send N messages to a topic through the fault strategy and print one JSON "
        "object: sent_ok, failed, first_attempts_by_broker, retries, p50_ms, p99_ms, statuses. "
        "Exits 1 when a send failed, 3 on a TLS mismatch with the name server.",
        formatter_class=DefaultsHelpFormatter,
    )
    send.add_argument("--namesrv", required=True, metavar="HOST:PORT[;HOST:PORT]")
    send.add_argument("--topic", required=True)
    send.add_argument("--count", type=int, required=True, metavar="N")
    send.add_argument("--size", type=int, default=128, metavar="BYTES", help="body size")
    send.add_argument("--concurrency", type=int, default=16, metavar="C", help="sends in flight")
    send.add_argument("--keys", nargs="*", default=[], metavar="KEY", help="message keys")
    send.add_argument("--tags", default=None, metavar="TAG", help="message tag")
    send.add_argument("--group", default="client_push_send", help="producer group")
    send.add_argument(
        "--config", default=None, metavar="FILE", help="TOML file with a [producer] table"
    )
    send.add_argument(
        "--strategy",
        choices=("off", "4x", "5x"),
        default=None,
        help="fault strategy: off, upstream 4.x tiers or 5.x tiers [default: 4x]",
    )
    send.add_argument(
        "--detector",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="probe isolated brokers [default: on]",
    )
    send.add_argument(
        "--go-away",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="act on broker GoAway [default: on]",
    )
    send.add_argument("--timeout-ms", type=int, default=None, help="per send [default: 3000]")
    send.add_argument(
        "--retries", type=int, default=None, help="attempts after the first [default: 2]"
    )
    send.add_argument(
        "--tls", action="store_true", help="connect to name servers with TLS (brokers: plain)"
    )
    send.add_argument(
        "--tls-ca",
        default="",
        metavar="FILE",
        help="with --tls, verify name servers against this CA [default: do not verify]",
    )
    add_loop_option(send)
    send.add_argument("-v", "--verbose", action="store_true", help="log connection events")


def producer_config(args: argparse.Namespace) -> ProducerConfig:
    """The ``[producer]`` table of ``--config``, overridden by the flags given."""
    raw: dict[str, Any] = {}
    if args.config:
        with open(args.config, "rb") as f:
            raw = dict(tomllib.load(f).get("producer", {}))
    if args.strategy is not None:
        raw["strategy"] = args.strategy
    if args.detector is not None:
        raw["detector"] = args.detector
    if args.go_away is not None:
        raw["honour_go_away"] = args.go_away
    if args.timeout_ms is not None:
        raw["send_timeout_ms"] = args.timeout_ms
    if args.retries is not None:
        raw["retries"] = args.retries
    return from_mapping(raw)


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest rank; 0 for no values."""
    if not sorted_values:
        return 0.0
    rank = max(1, round(fraction * len(sorted_values) + 0.5 - 1e-9))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


class Progress:
    """A one-line bar redrawn at most every 100 ms; nothing unless ``stream`` is a terminal."""

    def __init__(self, total: int, stream: IO[str]) -> None:
        self.total = total
        self.stream = stream
        self.enabled = stream.isatty()
        self._drawn = 0.0

    def update(self, done: int, failed: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self._drawn < 0.1):
            return
        self._drawn = now
        width = 30
        filled = int(width * done / max(1, self.total))
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} failed {failed}"
        )
        if done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


async def run_send(
    runtime: Runtime,
    loop: str,
    client_config: ClientConfig,
    config: ProducerConfig,
    args: argparse.Namespace,
    err: IO[str],
    stop: Future[None],
) -> dict[str, Any]:
    """Send ``args.count`` messages with ``args.concurrency`` in flight; the summary. Once
    ``stop`` settles (SIGINT, SIGTERM) no new send starts; those in flight end first."""
    on = faces(loop)
    rng = random.Random()
    client = on.route_client(client_config, rng=rng)
    producer = on.producer(client, args.group, config, rng=rng)
    client.start()
    producer.start()
    namesrv = ";".join(client_config.namesrv_addrs)
    mismatch = watch_tls(runtime, client, client_config.tls, namesrv, stop)
    body = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(args.size))
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    progress = Progress(args.count, err)
    state = {"next": 0, "done": 0, "failed": 0}
    started = time.perf_counter()

    async def worker(ended: Future[None]) -> None:
        while state["next"] < args.count and not stop.done():
            state["next"] += 1
            t0 = time.perf_counter()
            try:
                await producer.send(args.topic, body, keys=args.keys, tags=args.tags)
                latencies.append((time.perf_counter() - t0) * 1000)
            except Exception as exc:
                state["failed"] += 1
                kind = type(exc).__name__
                errors[kind if isinstance(exc, SendError) else f"{kind}: {exc}"[:200]] += 1
            state["done"] += 1
            progress.update(state["done"], state["failed"])
        settle(ended, None)

    workers = [runtime.future() for _ in range(max(1, args.concurrency))]
    for ended in workers:
        runtime.spawn(worker(ended))
    for ended in workers:
        await ended
    elapsed = time.perf_counter() - started
    progress.update(state["done"], state["failed"], force=True)
    stats = producer.stats()
    # At the end a single TLS connection closed unanswered is enough: every send ended.
    found = tls_mismatch(client.stats(), client_config.tls, namesrv, failed_handshakes=1)
    await on.close(producer)
    await on.close(client)
    summary = _summary(args, config, latencies, state["failed"], dict(errors), stats, elapsed)
    if mismatch.done():
        found = await mismatch
    if found is not None:
        summary["tls_mismatch"] = found
    return summary


def _summary(
    args: argparse.Namespace,
    config: ProducerConfig,
    latencies: list[float],
    failed: int,
    errors: dict[str, int],
    stats: dict[str, Any],
    elapsed: float,
) -> dict[str, Any]:
    """The run's summary: what was sent, how long it took, what the producer counted."""
    latencies.sort()
    return {
        "topic": args.topic,
        "count": args.count,
        "sent_ok": len(latencies),
        "failed": failed,
        "first_attempts_by_broker": stats["first_attempts_by_broker"],
        "retries": stats.get("retries", 0),
        "busy_answers": stats.get("answers_busy", 0),
        "go_away_received": stats.get("go_away_received", 0),
        "p50_ms": round(percentile(latencies, 0.50), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "max_ms": round(latencies[-1], 2) if latencies else 0.0,
        "elapsed_s": round(elapsed, 3),
        "statuses": stats["statuses"],
        "errors": errors,
        "strategy": "off" if not config.fault.enabled else _tiers(config.fault),
        "detector": config.fault.enabled and config.fault.detector_enabled,
    }


def _tiers(fault: FaultStrategyConfig) -> str:
    return (
        "5x"
        if fault.latency_levels_ms == FaultStrategyConfig.preset("5x").latency_levels_ms
        else "4x"
    )


def main(parser: argparse.ArgumentParser, args: argparse.Namespace, out: IO[str]) -> int:
    try:
        tls: dict[str, Any] = {}
        if args.tls or args.tls_ca:
            tls = {"tls": True, "tls_ca_file": args.tls_ca}
        client_config = ClientConfig(namesrv_addrs=parse_namesrv_addrs(args.namesrv), **tls)
        config = producer_config(args)
    except (ClientConfigError, ProducerConfigError, FaultConfigError, OSError) as exc:
        parser.error(str(exc))
    except tomllib.TOMLDecodeError as exc:
        parser.error(f"--config: {exc}")
    if args.count <= 0 or args.size <= 0 or args.concurrency <= 0:
        parser.error("--count, --size and --concurrency must be positive")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    async def go(runtime: Runtime, stop: Future[None]) -> dict[str, Any]:
        return await run_send(runtime, args.loop, client_config, config, args, sys.stderr, stop)

    summary = run(args.loop, go)
    out.write(json.dumps(summary, sort_keys=True) + "\n")
    out.flush()
    if summary.get("tls_mismatch"):
        print(f"python -m client_push send: {summary['tls_mismatch']}", file=sys.stderr)
        return EXIT_TLS_MISMATCH
    return EXIT_FAILED_SENDS if summary.get("failed") else 0
