"""Reading the journal (docs/journal.md) and the telemetry (docs/telemetry.md) into DataFrames.

Both are JSON Lines written by other processes, possibly cut short by a crash or edited by
hand, so nothing here trusts a line: a line that is not JSON, or whose fields have the wrong
types, is counted as corrupt and left out; a record that lacks a field its event needs is
counted as invalid and left out; an event type this job does not know is counted and ignored
(newer name servers may add some). Paths go through Hadoop's file system API, so ``hdfs://``,
``s3a://`` and local paths all work the same on a cluster.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from namesrv.ops.journal import EARLY_TICK_EVENT
from namesrv_pipeline.request import DEFAULT_MAX_LINE_BYTES
from namesrv_pipeline.sources import JournalSource
from namesrv_pipeline.spark.long_lines import HADOOP_MAX_LINE, Reader, local_reader, oversized_lines

__all__ = ["InputError", "JournalSource", "Parsed", "read_journal", "read_telemetry"]

log = logging.getLogger(__name__)

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
        # An integer in notification_sent, a list of names in subscribe, unsubscribe and
        # route_changes: read as the raw JSON text and typed per event below.
        T.StructField("topics", T.StringType()),
        # subscribe, unsubscribe: topics the record's list left out (it names the first 100)
        T.StructField("topics_omitted", T.LongType()),
        T.StructField("bytes", T.LongType()),
        T.StructField("degraded", T.BooleanType()),
        T.StructField("cpu_percent", T.DoubleType()),
        T.StructField("memory_percent", T.DoubleType()),
        T.StructField("pending_connections", T.LongType()),
        T.StructField("duration_ms", T.LongType()),
        T.StructField("conn", T.LongType()),
        T.StructField("released_topics", T.LongType()),
        T.StructField("pending_topics", T.LongType()),
        # route_changes (one record per tick, kind and causes): per listed topic, in the
        # order of `topics`
        T.StructField("versions", T.ArrayType(T.LongType())),
        T.StructField("waited_ms", T.ArrayType(T.LongType())),
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
    EARLY_TICK_EVENT: (),  # its time is all the replay reads
}

ROUTE_CHANGES = "route_changes"
"""The compact form of ``route_changed`` (and ``suppressed``) records: read as one row per
change it lists (two for a silent change), as the older form wrote them."""

KNOWN_EVENTS = (*REQUIRED, ROUTE_CHANGES)

TELEMETRY_SCHEMA_NEWS = T.StructType(
    [*TELEMETRY_SCHEMA.fields[:-1], T.StructField("news", T.BooleanType()), TELEMETRY_SCHEMA[-1]]
)
"""Files whose client marks each record's ``news`` (docs/telemetry.md)."""

_TELEMETRY_COLUMNS = (
    "topic",
    "version",
    "exists",
    "cause",
    "notified_at_ms",
    "requested_at_ms",
    "fetched_at_ms",
    "namesrv",
)

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


def _read_json(
    spark: SparkSession, files: Sequence[str], schema: T.StructType, max_line_bytes: int
) -> DataFrame:
    """The files' lines parsed; a line of ``max_line_bytes`` or more is not held in memory
    whole (``namesrv_pipeline.spark.long_lines``)."""
    if not files:
        return spark.createDataFrame([], schema)
    return (
        spark.read.schema(schema)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option(HADOOP_MAX_LINE, str(max_line_bytes))
        .json(list(files))
    )


def _reader(spark: SparkSession, name: str) -> tuple[Reader, int, Callable[[], None]]:
    """Reads at offsets of a file Spark names (``file:`` directly, else through Hadoop), its
    size, and how to close it."""
    local = _local_path(name)
    if local is not None:
        return local_reader(local)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(name)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    size = int(fs.getFileStatus(path).getLen())
    stream = fs.open(path)
    return (lambda offset, length: _read_at(stream, offset, length)), size, stream.close


def _oversized(spark: SparkSession, files: Sequence[str], limit: int, what: str) -> int:
    """How many lines of ``files`` are ``limit`` bytes or longer: Spark leaves them out
    unread, so they are counted here, and each file that has some is named in the log."""
    total = 0
    for name in files:
        read, size, close = _reader(spark, name)
        try:
            found = oversized_lines(read, size, limit)
        finally:
            close()
        if found:
            log.warning(
                "%s file %s: %d line(s) of %d bytes or more left out (the first at byte %d); "
                "--max-line-bytes sets the bound",
                what,
                name,
                len(found),
                limit,
                found[0],
            )
            total += len(found)
    return total


def _all_present(names: Sequence[str]) -> Column:
    cond = F.lit(True)
    for name in names:
        cond = cond & F.col(name).isNotNull()
    return cond


@dataclass(frozen=True, slots=True)
class Parsed:
    """One input as compact columns, every line, with ``status``: ``ok``, ``corrupt``,
    ``invalid`` or ``unknown`` (an event type this job does not know). The journal's frame is
    cached here, filled by the first Spark job that reads it; the telemetry (with ``news``) is
    read once, by the aggregation that ties it to the journal (``aggregations.summarize``), and not
    cached."""

    frame: DataFrame
    files: int
    named: bool = False
    """Some journal source names its name server (``HOST:PORT=DIR``)."""
    clients: Mapping[int, str] = field(default_factory=dict)
    """The telemetry's ``client`` ids and the files they stand for."""
    oversized: int = 0
    """Lines too long to be records (``namesrv_pipeline.spark.long_lines``), left out unread."""

    @property
    def usable(self) -> DataFrame:
        return self.frame.where(F.col("status") == "ok")


def _status(corrupt: Column, known: Column, valid: Column) -> Column:
    return (
        F.when(corrupt, "corrupt").when(~known, "unknown").when(~valid, "invalid").otherwise("ok")
    )


_JOURNAL_COLUMNS = (
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
)


def _journal_lines(
    spark: SparkSession, sources: Sequence[JournalSource], max_line_bytes: int
) -> tuple[DataFrame, int, int]:
    """Every source's ``journal-*.jsonl`` lines, raw, with ``namesrv``; the files read and
    the lines too long to read."""
    frames: list[DataFrame] = []
    files = oversized = 0
    for source in sources:
        kind = _kind(spark, source.directory)
        if kind is None:
            raise InputError(f"journal directory {source.directory} does not exist")
        if kind != "dir":
            raise InputError(f"journal directory {source.directory} is not a directory")
        found = _files(spark, source.directory.rstrip("/") + "/journal-*.jsonl")
        files += len(found)
        oversized += _oversized(spark, found, max_line_bytes, "journal")
        frames.append(
            _read_json(spark, found, JOURNAL_SCHEMA, max_line_bytes).withColumn(
                "namesrv", F.lit(source.namesrv).cast(T.StringType())
            )
        )
    raw = frames[0]
    for more in frames[1:]:
        raw = raw.unionByName(more)
    return raw, files, oversized


def read_journal(
    spark: SparkSession,
    sources: Sequence[JournalSource],
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Parsed:
    """Every journal line, with ``namesrv`` naming its source (null when unnamed).

    ``topics`` comes out typed per event: ``topic_names`` (the size of the list in subscribe,
    unsubscribe) and ``topic_count`` (notification_sent).
    """
    if not sources:
        raise InputError("no journal directory given")
    raw, files, oversized = _journal_lines(spark, sources, max_line_bytes)
    names = F.from_json(F.col("topics"), T.ArrayType(T.StringType()))
    raw = (
        _route_changes_rows(raw, names)
        .withColumns(
            {
                "topic_names": F.when(
                    F.col("event").isin("subscribe", "unsubscribe"),
                    # size() of a null list is -1: not a list, whatever was omitted
                    F.when(
                        F.size(names) >= 0,
                        F.size(names) + F.coalesce(F.col("topics_omitted"), F.lit(0)),
                    ).otherwise(F.lit(-1)),
                ).cast(T.LongType()),
                "topic_count": F.when(
                    F.col("event") == "notification_sent", F.col("topics").cast(T.LongType())
                ),
            }
        )
        .withColumn("topic_names", F.when(F.col("topic_names") >= 0, F.col("topic_names")))
    )
    valid = F.lit(False)
    for event, needs in REQUIRED.items():
        valid = valid | ((F.col("event") == event) & _all_present(needs))
    status = _status(
        F.col(CORRUPT).isNotNull(),
        F.col("event").isin(*KNOWN_EVENTS),
        valid & F.col("ts_ms").isNotNull(),
    )
    # ``line`` names the line (so a change) uniquely within the run: the telemetry's figures
    # per change are grouped by it. Fixed once cached; recomputed alike (partition, position).
    line = F.monotonically_increasing_id().alias("line")
    frame = raw.select(status.alias("status"), line, *_JOURNAL_COLUMNS).cache()
    named = any(source.namesrv is not None for source in sources)
    return Parsed(frame, files, named, oversized=oversized)


def _route_changes_rows(raw: DataFrame, names: Column) -> DataFrame:
    """Each whole ``route_changes`` line as the rows its changes made in the older form: a
    ``route_changed`` row per listed topic (``ts_ms`` its detection, ``mutated_at_ms`` that less
    its wait) and, when ``notify`` is false, a ``suppressed`` row after them; every other line
    stays one row. A ``route_changes`` line whose lists do not match (or lacks one) stays one
    row of that event, which no figure takes: invalid."""
    batch = F.col("event") == ROUTE_CHANGES
    n = F.size(names)
    whole = (
        batch
        & (n > 0)
        & (F.size("versions") == n)
        & (F.col("waited_ms").isNull() | (F.size("waited_ms") == n))
        & F.col("notify").isNotNull()
    )
    rows = F.when(F.col("notify"), n).otherwise(2 * n)
    # One generator over every line, so the files are read once: a null array makes one row.
    slot = F.explode_outer(F.when(whole, F.sequence(F.lit(0), rows - 1))).alias("slot")
    exploded = raw.select("*", slot)
    at = F.col("slot") % n
    listed = F.col("slot").isNotNull()
    return exploded.withColumns(
        {
            "event": F.when(listed & (F.col("slot") >= n), "suppressed")
            .when(listed, "route_changed")
            .otherwise(F.col("event")),
            "topic": F.when(listed, F.get(names, at)).otherwise(F.col("topic")),
            "version": F.when(listed, F.get(F.col("versions"), at)).otherwise(F.col("version")),
            "mutated_at_ms": F.when(
                listed, F.col("ts_ms") - F.get(F.col("waited_ms"), at)
            ).otherwise(F.col("mutated_at_ms")),
        }
    ).drop("slot")


def read_telemetry(
    spark: SparkSession, paths: Sequence[str], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Parsed:
    """Every telemetry line, with ``news`` (docs/telemetry.md); a path is a file, a directory
    of files or a glob.

    ``client`` names the file a record came from: each client writes its own file, so the file
    stands for the client when the job asks when a client first held a version. A file whose
    client wrote ``news`` (its first and last lines carry it) is read with it, in one pass; in
    such a file a record without it is invalid. The others (older clients) are read apart and
    ``news`` worked out by ``learned_versions``: a shuffle and sort of their lines, which the
    field spares. Each file is read once either way.
    """
    found: list[str] = []
    for path in paths:
        matched = _files(spark, path)
        if not matched and _kind(spark, path) is None:
            raise InputError(f"telemetry path {path} does not exist")
        found.extend(matched)
    files = sorted(set(found))
    oversized = _oversized(spark, files, max_line_bytes, "telemetry")
    marked = [f for f in files if _carries_news(spark, f)]
    unmarked = sorted(set(files) - set(marked))
    with_field = (
        _read_json(spark, marked, TELEMETRY_SCHEMA_NEWS, max_line_bytes) if marked else None
    )
    without = (
        _read_json(spark, unmarked, TELEMETRY_SCHEMA, max_line_bytes)
        if unmarked or not marked
        else None
    )
    names = [
        *(with_field.inputFiles() if with_field is not None else []),
        *(without.inputFiles() if without is not None and unmarked else []),
    ]
    client, clients = _client_ids(spark, names)

    def parsed(raw: DataFrame, required: Sequence[str], *more: str) -> DataFrame:
        status = _status(F.col(CORRUPT).isNotNull(), F.lit(True), _all_present(required))
        return raw.select(
            status.alias("status"), client.alias("client"), *_TELEMETRY_COLUMNS, *more
        )

    frames: list[DataFrame] = []
    if with_field is not None:
        # As the client wrote it; a record that is not usable is no news.
        frame = parsed(with_field, (*TELEMETRY_REQUIRED, "news"), "news")
        frames.append(frame.withColumn("news", (F.col("status") == "ok") & F.col("news")))
    if without is not None:
        frames.append(learned_versions(parsed(without, TELEMETRY_REQUIRED)))
    frame = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    # Not cached: one aggregation reads it (``aggregations.summarize``).
    return Parsed(frame, len(files), clients=clients, oversized=oversized)


def learned_versions(telemetry: DataFrame) -> DataFrame:
    """Telemetry records with ``news`` worked out from the records (files written without the
    field): per client (telemetry file) and topic in time order, a usable record whose version
    or existence differs from the one before, or an ``epoch`` refetch (a restarted name server
    numbers versions afresh, so an equal number may be a new route). A topic's first record is
    where the client started from, not a change reaching it; a refetch returning what the
    client held (polls, mostly) is no news."""
    # A hash of client (an id, ``_client_ids``) and topic leads the sort: sorting starts from
    # a fixed-size prefix of the first key, and one client's rows share their id, so sorting by
    # it would compare topic names row against row. The id and name follow the hash, so two
    # clients or topics are never taken for one.
    order = Window.partitionBy(F.xxhash64("client", "topic"), "client", "topic", "status").orderBy(
        "fetched_at_ms", "requested_at_ms"
    )
    prev_version = F.lag("version").over(order)
    prev_exists = F.lag("exists").over(order)
    news = (
        (F.col("status") == "ok")
        & prev_version.isNotNull()
        & (
            (F.col("version") != prev_version)
            | (F.col("exists") != prev_exists)
            | (F.col("cause") == "epoch")
        )
    )
    return telemetry.withColumn("news", news)


HEAD_BYTES = 64 * 1024
"""How much of a telemetry file's start and end is read to find its first and last line."""


def _carries_news(spark: SparkSession, name: str) -> bool:
    """Whether the file's first and last lines both carry a boolean ``news``: a client that
    writes the field writes it on every line of the file or on none from some line on
    (docs/telemetry.md), so the two ends tell. An empty file has no records to work out."""
    read, size, close = _reader(spark, name)
    try:
        head = read(0, min(size, HEAD_BYTES))
        tail = read(max(0, size - HEAD_BYTES), min(size, HEAD_BYTES))
    finally:
        close()
    if size == 0:
        return True
    first, sep, _ = head.partition(b"\n")
    if not sep and size > len(head):
        return False  # a first line longer than the head: no record of ours
    body = tail.rstrip(b"\r\n")
    _, sep, last = body.rpartition(b"\n")
    if not sep and size > len(tail):
        return False
    return _marked(first) and _marked(last)


def _marked(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("news"), bool)


def _local_path(name: str) -> str | None:
    """The local path of a ``file:`` URI as Hadoop names it (``file:/a/b``), else None."""
    if not name.startswith("file:"):
        return None
    rest = name[len("file:") :]
    if rest.startswith("//"):
        host, _, rest = rest[2:].partition("/")
        if host not in ("", "localhost"):
            return None
        rest = "/" + rest
    return rest if os.path.isfile(rest) else None


def _read_at(stream: Any, position: int, length: int) -> bytes:
    stream.seek(position)
    # byte[] returned from the JVM arrives whole (a Java array filled in place would not).
    return bytes(stream.readNBytes(length))


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
