"""What the report calls a client: the ``client_id`` and ``host`` its telemetry lines carry
(docs/telemetry.md), read from the first line of its file, or the file's name when they are
absent (a file written by an older client)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from urllib.parse import unquote

from pyspark.sql import SparkSession

HEAD_BYTES = 64 * 1024
"""How much of a file's start is read for its first line."""


def _first_line(spark: SparkSession, name: str) -> bytes:
    """The start of the file Spark names ``name`` up to its first line break (``file:``
    paths read directly, others through Hadoop)."""
    local = None
    if name.startswith("file:"):
        local = unquote(name.removeprefix("file://").removeprefix("file:"))
    if local is not None and os.path.isfile(local):
        with open(local, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    else:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        path = jvm.org.apache.hadoop.fs.Path(name)
        fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        stream = fs.open(path)
        try:
            head = bytes(stream.readNBytes(HEAD_BYTES))
        finally:
            stream.close()
    return head.partition(b"\n")[0]


def label(first_line: bytes, file_name: str) -> str:
    """``client_id`` (and ``host`` when the id does not already name it) from a telemetry
    line, else the file's name without its directory."""
    fallback = file_name.rsplit("/", 1)[-1]
    try:
        record = json.loads(first_line)
    except ValueError:
        return fallback
    if not isinstance(record, dict):
        return fallback
    client, host = record.get("client_id"), record.get("host")
    if not isinstance(client, str) or not client:
        return fallback
    if isinstance(host, str) and host and host not in client:
        return f"{client} ({host})"
    return client


def client_labels(spark: SparkSession, files: Iterable[str]) -> dict[str, str]:
    """Each file's label; two clients that share one (the same id in two files) are told
    apart by their file's name."""
    labels = {f: label(_first_line(spark, f), f) for f in files}
    counts: dict[str, int] = {}
    for text in labels.values():
        counts[text] = counts.get(text, 0) + 1
    return {
        f: text if counts[text] == 1 else f"{text} [{f.rsplit('/', 1)[-1]}]"
        for f, text in labels.items()
    }
