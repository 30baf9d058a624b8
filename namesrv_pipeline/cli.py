"""``python -m namesrv_pipeline`` / ``namesrv-pipeline``: journal and telemetry in, report and tuned
config out.

Exit codes: 0 done, 2 unusable arguments or inputs (the message names which), 3 Spark could
not start (no Java, or the cluster is unreachable).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile

from namesrv_pipeline.analysis import analyse
from namesrv_pipeline.report.summary import MatchWindow
from namesrv_pipeline.report.tuning import Targets
from namesrv_pipeline.request import (
    DEFAULT_MAX_LINE_BYTES,
    MAX_MAX_LINE_BYTES,
    MIN_MAX_LINE_BYTES,
    AnalysisRequest,
)
from namesrv_pipeline.sources import JournalSource
from protocol.command_line import DefaultsHelpFormatter, add_version


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="namesrv-pipeline",
        usage="%(prog)s --journal DIR [--telemetry PATH ...] --out DIR [options]\n"
        "       %(prog)s demo [--out DIR] [--seconds 60] [--master URL]",
        description="Propagation statistics, a report and tuned thresholds from the name "
        "server's journal and the clients' telemetry (a PySpark job).",
        epilog="demo: run a name server, broker stand-ins and route clients on loopback for "
        "--seconds, then write this report of them (into a new directory under the system "
        "temp unless --out is given; see namesrv-pipeline demo --help).",
        formatter_class=DefaultsHelpFormatter,
    )
    add_version(p, "namesrv-pipeline")
    p.add_argument(
        "--journal",
        action="append",
        required=True,
        metavar="[HOST:PORT=]DIR",
        help="a name server's journal directory; repeat for several name servers, prefixing "
        "each with the address its clients use so fetches are tied to the right journal",
    )
    p.add_argument(
        "--telemetry",
        action="append",
        default=[],
        metavar="PATH",
        help="client telemetry: a file, a directory of files or a glob; repeatable",
    )
    p.add_argument("--out", required=True, help="directory for the report, summary and config")
    p.add_argument(
        "--tables-out",
        help="where Spark writes the per-change Parquet table [default: OUT/changes]; on a "
        "cluster, a path every executor can write (hdfs://, s3a://, a shared mount)",
    )
    p.add_argument(
        "--config", help="the name server's config file [default: the embedded defaults]"
    )
    p.add_argument("--master", help="Spark master URL [default: local[*], or spark-submit's]")
    p.add_argument(
        "--target-p99-ms",
        type=_non_negative,
        default=Targets().propagation_p99_ms,
        help="a pushed change should reach clients within this, p99 (tunes the tick)",
    )
    p.add_argument(
        "--clock-skew-ms",
        type=_non_negative,
        default=MatchWindow().clock_skew_ms,
        help="how far a client clock may run behind the name server's",
    )
    p.add_argument(
        "--max-lag-ms",
        type=_non_negative,
        default=MatchWindow().max_lag_ms,
        help="a fetch is tied only to a change detected at most this long before it",
    )
    p.add_argument(
        "--max-line-bytes",
        type=_max_line_bytes,
        default=DEFAULT_MAX_LINE_BYTES,
        help="a line this long or longer is no record: it is counted and left out unread, "
        "and never held in memory whole",
    )
    return p


def _max_line_bytes(text: str) -> int:
    value = _non_negative(text)
    if not MIN_MAX_LINE_BYTES <= value <= MAX_MAX_LINE_BYTES:
        raise argparse.ArgumentTypeError(
            f"must be between {MIN_MAX_LINE_BYTES} and {MAX_MAX_LINE_BYTES}: {value}"
        )
    return value


def request(args: argparse.Namespace) -> AnalysisRequest:
    """The analysis ``args`` (from ``parser``) ask for."""
    return AnalysisRequest(
        journals=tuple(JournalSource.parse(text) for text in args.journal),
        out=args.out,
        telemetry=tuple(args.telemetry),
        config=args.config,
        tables_out=args.tables_out,
        master=args.master,
        targets=Targets(args.target_p99_ms),
        window=MatchWindow(args.clock_skew_ms, args.max_lag_ms),
        max_line_bytes=args.max_line_bytes,
    )


def parse(argv: list[str]) -> AnalysisRequest:
    """The analysis the command line ``argv`` asks for (argparse exits on bad arguments)."""
    return request(parser().parse_args(argv))


def demo_args(argv: list[str]) -> list[str]:
    """The demo's arguments, with ``--out`` a new directory under the system temp when none
    is given (said on stdout): the demo never writes into the working directory unasked."""
    wants_help = any(a in ("-h", "--help") for a in argv)
    if wants_help or any(a == "--out" or a.startswith("--out=") for a in argv):
        return argv
    out = tempfile.mkdtemp(prefix="namesrv-pipeline-demo-")
    print(f"demo: writing into {out}", flush=True)
    return [*argv, "--out", out]


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # py4j logs each gateway connection it opens and closes at INFO: noise between the job's
    # own lines; its warnings and errors still show.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["demo"]:
        from namesrv_pipeline.demo.run import main as demo_main

        return demo_main(demo_args(argv[1:]))
    return analyse(parse(argv))
