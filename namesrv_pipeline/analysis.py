"""The pipeline's analysis, as the command line and the demo both run it: inputs checked, Spark
started, the job run, its outputs named; every failure a message and an exit code.

Exit codes: 0 done, 2 unusable arguments or inputs (the message names which), 3 Spark could
not start (no Java, or the cluster is unreachable).
"""

from __future__ import annotations

import glob
import logging
import os
import re
import sys

from namesrv.config import ConfigError
from namesrv.config_file import load
from namesrv_pipeline.request import AnalysisRequest

log = logging.getLogger("namesrv_pipeline")

PROG = "namesrv-pipeline"


def _local(path: str) -> str | None:
    """The local file-system path of ``path``, or None for another file system (hdfs://...)."""
    if path.startswith("file:"):
        return path.removeprefix("file:").removeprefix("//")
    return None if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path) else path


def check_paths(request: AnalysisRequest) -> str | None:
    """What is wrong with the local input and output paths, found before Spark starts (it
    takes seconds); None when nothing is. Paths on other file systems are checked by the job."""
    for source in request.journals:
        directory = _local(source.directory)
        if directory is None:
            continue
        if not os.path.exists(directory):
            return f"journal directory {directory} does not exist"
        if not os.path.isdir(directory):
            return f"journal directory {directory} is not a directory"
    for text in request.telemetry:
        path = _local(text)
        if path is not None and not os.path.exists(path) and not glob.glob(path):
            return f"telemetry path {path} does not exist"
    out = _local(request.out)
    if out is not None:
        try:
            os.makedirs(out, exist_ok=True)
        except OSError as exc:
            return f"cannot create --out {out}: {exc.strerror or exc}"
        if not os.access(out, os.W_OK):
            return f"--out {out} is not writable"
    return None


def _refused(problem: str) -> int:
    print(f"{PROG}: {problem}", file=sys.stderr)
    return 2


def analyse(request: AnalysisRequest) -> int:
    """Run the job ``request`` asks for on a Spark session of its own; the exit code, with
    what went wrong said on stderr and where the outputs are logged."""
    try:
        load(request.config)
    except ConfigError as exc:
        return _refused(str(exc))
    problem = check_paths(request)
    if problem is not None:
        return _refused(problem)
    try:
        from namesrv_pipeline.spark.job import InputError, run
        from namesrv_pipeline.spark.session import spark_session
    except ImportError as exc:
        return _refused(
            f"{exc}; install the pipeline's dependencies with "
            "pip install 'rocketmq-routepush[pipeline]'"
        )
    try:
        spark = spark_session(request.master)
    except ValueError as exc:  # a setting Spark would be started with is unusable
        return _refused(str(exc))
    except Exception as exc:  # pyspark raises its own types for a JVM that will not start
        print(
            f"{PROG}: cannot start Spark ({exc}); Java 17 or newer must be on PATH "
            "or in JAVA_HOME, and a --master cluster must be reachable",
            file=sys.stderr,
        )
        return 3
    try:
        outputs = run(spark, request)
    except (InputError, ConfigError) as exc:
        return _refused(str(exc))
    except OSError as exc:  # --out not writable
        return _refused(f"cannot write the outputs: {exc}")
    finally:
        spark.stop()
    log.info("report: %s", outputs.html)
    log.info("report (Markdown): %s", outputs.report)
    log.info("summary: %s", outputs.summary)
    log.info("tuned config: %s", outputs.config)
    log.info("per-change table: %s", outputs.changes)
    return 0
