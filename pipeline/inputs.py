"""Reading the journal (docs/journal.md) and the telemetry (docs/telemetry.md) into DataFrames.

Both are JSON Lines written by other processes, possibly cut short by a crash or edited by
hand, so nothing here trusts a line: a line that is not JSON, or whose fields have the wrong
types, is counted as corrupt and left out; a record that lacks a field its event needs is
counted as invalid and left out; an event type this job does not know is counted and ignored
(newer name servers may add some). Paths go through Hadoop's file system API, so ``hdfs://``,
``s3a://`` and local paths all work the same on a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline.sources import JournalSource

__all__ = ["InputError", "JournalSource", "Parsed", "read_journal", "read_telemetry"]

CORRUPT = "_corrupt_record"

JOURNAL_SCHEMA = T.StructType(
    [
        T.StructField("ts_ms", T.LongType()),
        T.StructField("event", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("version", T.LongType()),
        T.StructField("kind", T.StringType()),
        T.StructField("cause", T.StringType()),
        T.StructField("causes", T.ArrayType(T.StringType())),
        T.StructField("notify", T.BooleanType()),
        T.StructField("mutated_at_ms", T.LongType()),
        T.StructField("rules", T.ArrayType(T.StringType())),
        T.StructField("connections", T.LongType()),
        T.StructField("frames", T.LongType()),
        # An integer in notification_sent, a list of names in subscribe/unsubscribe: read as
        # the raw JSON text and typed per event below.
        T.StructField("topics", T.StringType()),
        T.StructField("bytes", T.LongType()),
        T.StructField("degraded", T.BooleanType()),
        T.StructField("cpu_percent", T.DoubleType()),
        T.StructField("memory_percent", T.DoubleType()),
        T.StructField("pending_connections", T.LongType()),
        T.StructField("duration_ms", T.LongType()),
        T.StructField("conn", T.LongType()),
        T.StructField("released_topics", T.LongType()),
        T.StructField("pending_topics", T.LongType()),
        T.StructField(CORRUPT, T.StringType()),
    ]
)

TELEMETRY_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("version", T.LongType()),
        T.StructField("exists", T.BooleanType()),
        T.StructField("cause", T.StringType()),
        T.StructField("notified_at_ms", T.LongType()),
        T.StructField("requested_at_ms", T.LongType()),
        T.StructField("fetched_at_ms", T.LongType()),
        T.StructField("namesrv", T.StringType()),
        T.StructField(CORRUPT, T.StringType()),
    ]
)

# The fields each event needs to be used (beyond ts_ms and event); a missing one makes the
# record invalid. `topics` is checked once typed for its event (topic_names, topic_count).
REQUIRED: dict[str, tuple[str, ...]] = {
    "route_changed": ("topic", "version", "kind", "causes", "notify"),
    "suppressed": ("topic", "version", "rules"),
    "notification_sent": ("connections", "frames", "topic_count", "bytes"),
    "degradation": ("degraded",),
    "backlog_drained": ("frames", "duration_ms"),
    "subscribe": ("conn", "topic_names"),
    "unsubscribe": ("conn", "topic_names"),
    "connection_closed": ("conn", "released_topics"),
    "slow_subscriber_skipped": ("conn", "pending_topics"),
    "broker_event": ("kind", "cause", "notify"),
}

TELEMETRY_REQUIRED = ("topic", "version", "exists", "cause", "requested_at_ms", "fetched_at_ms")


class InputError(Exception):
    """An input path that cannot be read at all (missing, not a journal directory)."""


def _files(spark: SparkSession, pattern: str) -> list[str]:
    """Files matching ``pattern`` (a glob) on whatever file system its URI names."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(pattern)
    fs = path.getFileSystem(hadoop_conf)
    statuses = fs.globStatus(path)
    if statuses is None:
        return []
    found: list[str] = []
    for status in statuses:
        if status.isDirectory():
            for child in fs.listStatus(status.getPath()):
                name = child.getPath().getName()
                if child.isFile() and not name.startswith((".", "_")):
                    found.append(child.getPath().toString())
        else:
            found.append(status.getPath().toString())
    return sorted(found)


def _kind(spark: SparkSession, path: str) -> str | None:
    """``"dir"``, ``"file"`` or None (missing), on whatever file system ``path`` names."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(hadoop_conf)
    if not fs.exists(p):
        return None
    return "dir" if fs.getFileStatus(p).isDirectory() else "file"


def _read_json(spark: SparkSession, files: Sequence[str], schema: T.StructType) -> DataFrame:
    if not files:
        return spark.createDataFrame([], schema)
    return (
        spark.read.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(list(files))
    )


def _all_present(names: Sequence[str]) -> Column:
    cond = F.lit(True)
    for name in names:
        cond = cond & F.col(name).isNotNull()
    return cond


@dataclass(frozen=True, slots=True)
class Parsed:
    """One input as compact columns, every line, with ``status``: ``ok``, ``corrupt``,
    ``invalid`` or ``unknown`` (an event type this job does not know). The journal's frame is
    cached here, filled by the first Spark job that reads it; the telemetry is read once, by
    the aggregation that ties it to the journal (``stats.summarize``), and not cached."""

    frame: DataFrame
    files: int
    named: bool = False
    """Some journal source names its name server (``HOST:PORT=DIR``)."""
    clients: Mapping[int, str] = field(default_factory=dict)
    """The telemetry's ``client`` ids and the files they stand for."""

    @property
    def usable(self) -> DataFrame:
        return self.frame.where(F.col("status") == "ok")


def _status(corrupt: Column, known: Column, valid: Column) -> Column:
    return (
        F.when(corrupt, "corrupt").when(~known, "unknown").when(~valid, "invalid").otherwise("ok")
    )


def read_journal(spark: SparkSession, sources: Sequence[JournalSource]) -> Parsed:
    """Every journal line, with ``namesrv`` naming its source (null when unnamed).

    ``topics`` comes out typed per event: ``topic_names`` (the size of the list in subscribe,
    unsubscribe) and ``topic_count`` (notification_sent).
    """
    if not sources:
        raise InputError("no journal directory given")
    frames: list[DataFrame] = []
    files = 0
    for source in sources:
        kind = _kind(spark, source.directory)
        if kind is None:
            raise InputError(f"journal directory {source.directory} does not exist")
        if kind != "dir":
            raise InputError(f"journal directory {source.directory} is not a directory")
        found = _files(spark, source.directory.rstrip("/") + "/journal-*.jsonl")
        files += len(found)
        frames.append(
            _read_json(spark, found, JOURNAL_SCHEMA).withColumn(
                "namesrv", F.lit(source.namesrv).cast(T.StringType())
            )
        )
    raw = frames[0]
    for more in frames[1:]:
        raw = raw.unionByName(more)
    names = F.from_json(F.col("topics"), T.ArrayType(T.StringType()))
    raw = raw.withColumns(
        {
            "topic_names": F.when(F.col("event").isin("subscribe", "unsubscribe"), F.size(names))
            # size() of a null list is -1: not a list
            .cast(T.LongType()),
            "topic_count": F.when(
                F.col("event") == "notification_sent", F.col("topics").cast(T.LongType())
            ),
        }
    ).withColumn("topic_names", F.when(F.col("topic_names") >= 0, F.col("topic_names")))
    valid = F.lit(False)
    for event, needs in REQUIRED.items():
        valid = valid | ((F.col("event") == event) & _all_present(needs))
    status = _status(
        F.col(CORRUPT).isNotNull(),
        F.col("event").isin(*REQUIRED),
        valid & F.col("ts_ms").isNotNull(),
    )
    frame = raw.select(
        status.alias("status"),
        "namesrv",
        "ts_ms",
        "event",
        "topic",
        "version",
        "kind",
        "cause",
        "causes",
        "notify",
        "mutated_at_ms",
        "rules",
        "frames",
        "bytes",
        "degraded",
        "cpu_percent",
        "memory_percent",
        "pending_connections",
        "duration_ms",
        "conn",
        "pending_topics",
        "topic_names",
    ).cache()
    return Parsed(frame, files, any(source.namesrv is not None for source in sources))


def read_telemetry(spark: SparkSession, paths: Sequence[str]) -> Parsed:
    """Every telemetry line; a path is a file, a directory of files or a glob.

    ``client`` names the file a record came from: each client writes its own file, so the file
    stands for the client when the job asks when a client first held a version.
    """
    found: list[str] = []
    for path in paths:
        matched = _files(spark, path)
        if not matched and _kind(spark, path) is None:
            raise InputError(f"telemetry path {path} does not exist")
        found.extend(matched)
    files = sorted(set(found))
    raw = _read_json(spark, files, TELEMETRY_SCHEMA)
    client, clients = _client_ids(spark, raw.inputFiles() if files else [])
    status = _status(F.col(CORRUPT).isNotNull(), F.lit(True), _all_present(TELEMETRY_REQUIRED))
    frame = raw.select(
        status.alias("status"),
        client.alias("client"),
        "topic",
        "version",
        "exists",
        "cause",
        "notified_at_ms",
        "requested_at_ms",
        "fetched_at_ms",
        "namesrv",
    )
    # Not cached: one aggregation reads it (``stats.summarize``).
    return Parsed(frame, len(files), clients=clients)


def _client_ids(spark: SparkSession, names: Sequence[str]) -> tuple[Column, dict[int, str]]:
    """The ``client`` column, a 64-bit hash of the file's name, and each id's file.

    Every line carries it through the per-client sort and the aggregation: a long costs far
    less there than the file's name (a long URI). ``names`` are the files as Spark names them
    (``DataFrame.inputFiles``, the same text as ``input_file_name``); should two of them hash
    alike, the hash is salted until none do, so two clients are never taken for one.
    """
    salt = 0
    while True:
        salted = [F.lit(salt), F.col("name")] if salt else [F.col("name")]
        rows = (
            spark.createDataFrame([(n,) for n in names], "name string")
            .select(F.xxhash64(*salted).alias("id"), "name")
            .collect()
        )
        ids = {int(r["id"]): str(r["name"]) for r in rows}
        if len(ids) == len(set(names)):
            file = [F.lit(salt), F.input_file_name()] if salt else [F.input_file_name()]
            return F.xxhash64(*file), ids
        salt += 1
