"""``python -m pipeline`` / ``namesrv-pipeline``: journal and telemetry in, report and tuned
config out.

Exit codes: 0 done, 2 unusable arguments or inputs (the message names which), 3 Spark could
not start (no Java, or the cluster is unreachable).
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import re
import sys
import tempfile

from namesrv.config import ConfigError
from namesrv.config_file import load
from pipeline.report.summary import MatchWindow
from pipeline.report.tuning import Targets
from pipeline.sources import JournalSource
from pipeline.spark.long_lines import DEFAULT_MAX_LINE_BYTES, MAX_MAX_LINE_BYTES, MIN_MAX_LINE_BYTES

log = logging.getLogger("pipeline")


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
    )
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
        help="where Spark writes the per-change Parquet table (default OUT/changes); on a "
        "cluster, a path every executor can write (hdfs://, s3a://, a shared mount)",
    )
    p.add_argument("--config", help="the name server's config file (default: embedded defaults)")
    p.add_argument("--master", help="Spark master URL (default local[*], or spark-submit's)")
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
        "and never held in memory whole (default 64 MiB)",
    )
    return p


def _max_line_bytes(text: str) -> int:
    value = _non_negative(text)
    if not MIN_MAX_LINE_BYTES <= value <= MAX_MAX_LINE_BYTES:
        raise argparse.ArgumentTypeError(
            f"must be between {MIN_MAX_LINE_BYTES} and {MAX_MAX_LINE_BYTES}: {value}"
        )
    return value


def _local(path: str) -> str | None:
    """The local file-system path of ``path``, or None for another file system (hdfs://...)."""
    if path.startswith("file:"):
        return path.removeprefix("file:").removeprefix("//")
    return None if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path) else path


def check_paths(args: argparse.Namespace) -> str | None:
    """What is wrong with the local input and output paths, found before Spark starts (it
    takes seconds); None when nothing is. Paths on other file systems are checked by the job."""
    for text in args.journal:
        directory = _local(JournalSource.parse(text).directory)
        if directory is None:
            continue
        if not os.path.exists(directory):
            return f"journal directory {directory} does not exist"
        if not os.path.isdir(directory):
            return f"journal directory {directory} is not a directory"
    for text in args.telemetry:
        path = _local(text)
        if path is not None and not os.path.exists(path) and not glob.glob(path):
            return f"telemetry path {path} does not exist"
    out = _local(args.out)
    if out is not None:
        try:
            os.makedirs(out, exist_ok=True)
        except OSError as exc:
            return f"cannot create --out {out}: {exc.strerror or exc}"
        if not os.access(out, os.W_OK):
            return f"--out {out} is not writable"
    return None


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
        from pipeline.demo.run import main as demo_main

        return demo_main(demo_args(argv[1:]))
    args = parser().parse_args(argv)
    try:
        load(args.config)
    except ConfigError as exc:
        print(f"namesrv-pipeline: {exc}", file=sys.stderr)
        return 2
    problem = check_paths(args)
    if problem is not None:
        print(f"namesrv-pipeline: {problem}", file=sys.stderr)
        return 2
    try:
        from pipeline.spark.job import InputError, run
        from pipeline.spark.session import spark_session
    except ImportError as exc:
        print(
            f"namesrv-pipeline: {exc}; install the pipeline's dependencies with "
            "pip install 'rocketmq-routepush[pipeline]'",
            file=sys.stderr,
        )
        return 2

    try:
        spark = spark_session(args.master)
    except Exception as exc:  # pyspark raises its own types for a JVM that will not start
        print(
            f"namesrv-pipeline: cannot start Spark ({exc}); Java 17 or newer must be on PATH "
            "or in JAVA_HOME, and a --master cluster must be reachable",
            file=sys.stderr,
        )
        return 3
    try:
        outputs = run(spark, args)
    except (InputError, ConfigError) as exc:
        print(f"namesrv-pipeline: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # --out not writable
        print(f"namesrv-pipeline: cannot write the outputs: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    log.info("report: %s", outputs.html)
    log.info("report (Markdown): %s", outputs.report)
    log.info("summary: %s", outputs.summary)
    log.info("tuned config: %s", outputs.config)
    log.info("per-change table: %s", outputs.changes)
    return 0
