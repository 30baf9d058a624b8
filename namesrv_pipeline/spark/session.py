"""The Spark session: embedded local mode unless a cluster was named or spark-submit chose one."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkConf
from pyspark.sql import SparkSession

APP_NAME = "routepush-pipeline"
POOLS = Path(__file__).with_name("scheduler_pools.xml")
"""The scheduler pools of ``namesrv_pipeline.spark.aggregations.summarize``."""
LOG4J = Path(__file__).with_name("log4j2.properties")
"""The driver's log config: warnings and errors, no start-up banner."""


HEAP_VARIABLE = "SPARK_DRIVER_MEMORY"
"""Spark's own variable for the driver's memory; set, it is the local JVM's heap."""
_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)b?\s*", re.IGNORECASE)
_MIB_PER_UNIT = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def local_heap_mib(env: Mapping[str, str] = os.environ) -> int:
    """The embedded JVM's heap: ``SPARK_DRIVER_MEMORY`` when set (Spark's size syntax, MiB
    without a unit), else a quarter of the machine's memory, between 1 and 8 GiB."""
    given = env.get(HEAP_VARIABLE, "")
    if given:
        match = _SIZE.fullmatch(given)
        mib = int(int(match.group(1)) * _MIB_PER_UNIT[match.group(2).lower()]) if match else 0
        if mib < 1:
            raise ValueError(
                f"{HEAP_VARIABLE}={given!r}: not a heap size such as 1g or 1536m (at least 1m)"
            )
        return mib
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system that says
        return 1024
    return max(1024, min(8192, total // 4 // 2**20))


def local_cores(master: str) -> int:
    """The task threads of a ``local`` master: ``local[N]``, ``local[*]`` (every core this
    process may run on, as the JVM counts them), ``local``, ``local-cluster[N,CORES,MiB]``."""
    args = master.partition("[")[2].partition("]")[0].split(",")
    if master.startswith("local-cluster") and len(args) == 3:
        return max(1, int(args[0]) * int(args[1])) if args[0].isdigit() and args[1].isdigit() else 1
    inside = args[0]
    if inside.isdigit():
        return max(1, int(inside))
    if inside == "*":
        return usable_cpus()
    return 1


def usable_cpus() -> int:
    """The cores this process may run on, as the JVM it starts counts them."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_JVM_OPTION_VARIABLES = (
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "SPARK_SUBMIT_OPTS",
    "PYSPARK_SUBMIT_ARGS",
)
_COLLECTOR = re.compile(r"-XX:\+Use\w+GC\b")


def throughput_collector(env: Mapping[str, str], cpus: int) -> str | None:
    """The JVM option of the parallel collector, or None to leave the JVM's choice.

    A batch job wants throughput, not short pauses: on two cores the parallel collector
    (cheaper write barriers, no concurrent threads) ran the job's warm runs 5-19 % faster than
    G1, the JVM's own choice there (docs/benchmarks.md). On one core the JVM picks the serial
    collector, which is kept. A collector named in the environment is kept too: the JVM
    refuses to start with two.
    """
    if cpus < 2 or any(_COLLECTOR.search(env.get(name, "")) for name in _JVM_OPTION_VARIABLES):
        return None
    return "-XX:+UseParallelGC"


def spark_session(master: str | None = None, shuffle_partitions: int | None = None) -> SparkSession:
    """A session for the job.

    ``master`` wins when given. Otherwise the master ``spark-submit`` was given is kept, and a
    plain ``python -m namesrv_pipeline`` gets ``local[*]``: the embedded default needs no
    cluster and no configuration.
    """
    conf = SparkConf()
    conf.setIfMissing("spark.ui.showConsoleProgress", "false")
    java_options = [f"-Dlog4j2.configurationFile={LOG4J.as_uri()}"]
    # A run generates about 90 classes; the default cache (100 entries, split into four LRU
    # segments of 25) evicts some within one run, so every run in a long-lived session
    # compiled a score of them again and the JVM's JIT compilers recompiled their code.
    conf.setIfMissing("spark.sql.codegen.cache.maxEntries", "1000")
    # PySpark records the Python call site of every column function for error messages: five
    # round trips to the JVM and a walk of the Python stack per call, about 2 s of each run's
    # driver time spent building the job's expressions.
    conf.setIfMissing("spark.python.sql.dataFrameDebugging.enabled", "false")
    # The job runs its journal and telemetry passes side by side, each in a pool of its own
    # (``namesrv_pipeline.spark.aggregations.summarize``): fair pools let the short stages of
    # one pass run between the tasks of the other's long stage.
    conf.setIfMissing("spark.scheduler.mode", "FAIR")
    conf.setIfMissing("spark.scheduler.allocation.file", str(POOLS))
    # Under spark-submit the JVM is already up (it started this process and said where to
    # reach it) and holds the master it was given.
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"
    if master is not None and master.startswith("local"):
        java_options += _local_settings(conf, master, shuffle_partitions)
    elif shuffle_partitions is not None:
        conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    conf.setIfMissing("spark.driver.extraJavaOptions", " ".join(java_options))
    builder = SparkSession.builder.appName(APP_NAME).config(conf=conf)
    if master is not None:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _local_settings(conf: SparkConf, master: str, shuffle_partitions: int | None) -> list[str]:
    """``conf`` set for a ``local`` master, where the driver and the executors are one JVM on
    this host; the JVM options that go with it."""
    java_options: list[str] = []
    # The driver and executors share this host: keep Spark off the machine's other
    # interfaces and without its web UI.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf.set("spark.ui.enabled", "false")
    # Four tasks per core, of even size, in every stage that reads the files or a shuffle:
    # a stage of three tasks on two cores runs its last task alone, and more, smaller
    # tasks keep every core busy to a stage's end. (Adaptive execution would merge the
    # shuffle's partitions back to as few as the data's size needs.)
    tasks = 4 * local_cores(master)
    conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions or tasks))
    conf.setIfMissing("spark.sql.adaptive.coalescePartitions.enabled", "false")
    conf.setIfMissing("spark.sql.files.minPartitionNum", str(tasks))
    # The one JVM is driver and executors: Spark's 1 GiB default leaves a few hundred MiB
    # for the journal's cache, and a journal of millions of events then goes to disk.
    heap = local_heap_mib()
    conf.setIfMissing("spark.driver.memory", f"{heap}m")
    # A broadcast costs no network here, only heap: the journal's changes (one row per
    # change, the telemetry's join partner) are broadcast up to 1/32 of it, so the
    # telemetry's lines are never shuffled to meet them (Spark's 10 MiB default holds
    # about 100,000 changes, depending on their topics' names).
    conf.setIfMissing("spark.sql.autoBroadcastJoinThreshold", f"{max(10, heap // 32)}m")
    collector = throughput_collector(os.environ, usable_cpus())
    if collector is not None:
        java_options.append(collector)
    return java_options
