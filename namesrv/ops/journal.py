"""An append-only JSON-lines journal of route-push events, for offline analysis.

Journaling is a side channel: it must never fail the name server. A write error (disk full,
directory gone) is logged, counted and the records of that write dropped; the file is cut back
to its last complete line, so every file stays valid JSON lines and later records are tried
again. The format is documented in ``docs/journal.md``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from namesrv.config import JournalConfig
from namesrv.ops.events import (
    TOPIC_LIST_LIMIT,
    BrokerChanged,
    ConnectionClosed,
    EventSink,
    RouteChanged,
    RouteSuppressed,
    SubscriptionsChanged,
    SuppressionsCounted,
    topic_list_fields,
)
from namesrv.ops.journal_routes import DEFAULT_MAX_TOPICS, ROUTE_CHANGES_EVENT, RouteChangeBatches

log = logging.getLogger(__name__)

WRITE_BUFFER_BYTES = 64 * 1024
"""Records are written in batches of about this size, or at ``flush()``."""

FILE_PREFIX = "journal-"
FILE_SUFFIX = ".jsonl"
_FILE_NAME = re.compile(rf"{FILE_PREFIX}(\d+)-(\d+){re.escape(FILE_SUFFIX)}")
_SEQ_DIGITS = 6
_RESERVED_FIELDS = frozenset({"ts_ms", "event"})

__all__ = ["TOPIC_LIST_LIMIT", "EventJournal", "Journal", "NullJournal", "topic_list_fields"]


class Journal(EventSink, Protocol):
    """A journal: route push's events (:class:`~namesrv.ops.events.EventSink`) and the tick's
    own records."""

    write_errors: int
    dropped_records: int
    suppressed_records: int

    def record(self, event: str, **fields: Any) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class NullJournal:
    """The journal when none is configured: accepts everything, writes nothing."""

    write_errors = dropped_records = suppressed_records = 0

    def record(self, event: str, **fields: Any) -> None: ...
    def route_changed(self, change: RouteChanged) -> None: ...
    def route_suppressed(self, suppressed: RouteSuppressed) -> None: ...
    def suppressions_counted(self, counted: SuppressionsCounted) -> None: ...
    def broker_changed(self, change: BrokerChanged) -> None: ...
    def subscriptions_changed(self, change: SubscriptionsChanged) -> None: ...
    def connection_closed(self, closed: ConnectionClosed) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


def notification_sent_fields(
    frames: int, topics: Collection[str], frame_bytes: int, broker_entries: int
) -> dict[str, Any]:
    """The fields of one tick's ``notification_sent`` record (docs/journal.md): ``frames``
    frames, one per connection, naming the distinct ``topics`` and ``broker_entries`` broker
    changes."""
    names = sorted(topics)
    return {
        "connections": frames,
        "frames": frames,
        "topics": len(names),
        "bytes": frame_bytes,
        "topic_list": names[:TOPIC_LIST_LIMIT],
        "broker_entries": broker_entries,
    }


def file_name(start_ms: int, seq: int) -> str:
    """``journal-<first record's ts_ms>-<seq within the process>.jsonl``; sorts by age."""
    return f"{FILE_PREFIX}{start_ms}-{seq:0{_SEQ_DIGITS}d}{FILE_SUFFIX}"


def _encode(entry: dict[str, Any]) -> bytes:
    """One record's line, ``\\n``-terminated."""
    line = json.dumps(entry, separators=(",", ":"), ensure_ascii=False, default=str)
    try:
        return (line + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a string no UTF-8 holds: JSON's escapes still can
        return (json.dumps(entry, separators=(",", ":"), default=str) + "\n").encode("utf-8")


def _write_all(handle: BinaryIO, data: bytes) -> None:
    """Unbuffered writes may be short (a filling disk); the next attempt then raises."""
    view = memoryview(data)
    while view:
        view = view[handle.write(view) :]


SUPPRESSED_EVENT = "journal_suppressed"

EARLY_TICK_EVENT = "early_tick"
"""A tick brought forward after a master arrived ran (at most one between two regular ticks)."""

UNLIMITED_EVENTS = frozenset(
    {"notification_sent", "degradation", "backlog_drained", EARLY_TICK_EVENT}
)
"""Records the flood limit never drops: at most one per tick or pressure transition, so their
volume follows time, not clients or topics (``route_changes`` records are exempt too)."""


class EventJournal:
    """Rotating JSON-lines files in one directory, bounded in count and total bytes.

    ``max_files`` and ``max_total_bytes`` (0: that bound off) decide which old files are
    deleted. ``max_records_per_second``, ``max_bytes_per_second`` and, for records naming a
    connection (``conn``), ``max_bytes_per_connection_per_second`` (each 0: off) cap a flood:
    records past one in a second are dropped and summarized by one ``journal_suppressed``
    record when the second is over.
    Route changes (:meth:`route_changed`) are gathered into ``route_changes`` records of at most
    ``max_topics_per_record`` topics, written at :meth:`flush`, and never cut; neither are the
    tick's own records (``UNLIMITED_EVENTS``).
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        max_file_bytes: int,
        max_files: int,
        clock_ms: Callable[[], int],
        buffer_bytes: int = WRITE_BUFFER_BYTES,
        max_total_bytes: int = 0,
        max_records_per_second: int = 0,
        max_topics_per_record: int = DEFAULT_MAX_TOPICS,
        max_bytes_per_second: int = 0,
        max_bytes_per_connection_per_second: int = 0,
    ) -> None:
        self._dir = Path(directory)
        self._routes = RouteChangeBatches(max_topics_per_record)
        self._max_file_bytes = max_file_bytes
        self._max_files = max_files
        self._max_total_bytes = max_total_bytes
        self._max_per_second = max_records_per_second
        self._second = -1
        self._second_records = 0
        self._max_bytes = max_bytes_per_second
        self._max_conn_bytes = max_bytes_per_connection_per_second
        self._second_bytes = 0
        self._conn_bytes: dict[Any, int] = {}
        """Bytes each connection's records took in this second; cleared each second."""
        self._suppressed_bytes = 0
        self._suppressed_by_conn = 0
        self._suppressed: dict[str, int] = {}
        self._suppressed_since_ms = 0
        self.suppressed_records = 0
        """Records dropped by ``max_records_per_second`` (each summarized in the journal)."""
        self._clock_ms = clock_ms
        self._buffer_bytes = buffer_bytes
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._file: BinaryIO | None = None
        self._path: Path | None = None
        self._size = 0
        self._seq = 0
        self._next_start_ms = 0
        """The first record's time, which names the file it opens."""
        self._closed = False
        self._failing = False
        self.write_errors = 0
        """Failed attempts to open, write or prune files."""
        self.dropped_records = 0
        self.files_opened = 0
        self.files_deleted = 0

    def record(self, event: str, **fields: Any) -> None:
        """Append ``{"ts_ms": now, "event": event, **fields}`` as one compact JSON line."""
        if self._closed:
            self.dropped_records += 1
            return
        reserved = _RESERVED_FIELDS.intersection(fields)
        if reserved:
            raise ValueError(f"journal fields {sorted(reserved)} are reserved")
        ts_ms = self._clock_ms()
        if event in UNLIMITED_EVENTS or not (
            self._max_per_second or self._max_bytes or self._max_conn_bytes
        ):
            self._append(ts_ms, event, fields)
            return
        second = ts_ms // 1000
        if second != self._second:
            self._summarize_suppressed(ts_ms)
            self._new_second(second)
        data = _encode({"ts_ms": ts_ms, "event": event, **fields})
        conn = fields.get("conn")
        conn_bytes = self._conn_bytes.get(conn, 0) if conn is not None else 0
        over_conn = (
            bool(self._max_conn_bytes)
            and conn is not None
            and (conn_bytes + len(data) > self._max_conn_bytes)
        )
        if (
            over_conn
            or (self._max_per_second and self._second_records >= self._max_per_second)
            or (self._max_bytes and self._second_bytes + len(data) > self._max_bytes)
        ):
            if not self._suppressed:
                self._suppressed_since_ms = ts_ms
            self._suppressed[event] = self._suppressed.get(event, 0) + 1
            self._suppressed_bytes += len(data)
            self._suppressed_by_conn += over_conn
            self.suppressed_records += 1
            return
        self._second_records += 1
        self._second_bytes += len(data)
        if conn is not None:
            self._conn_bytes[conn] = conn_bytes + len(data)
        self._append_encoded(ts_ms, data)

    def _new_second(self, second: int) -> None:
        self._second, self._second_records, self._second_bytes = second, 0, 0
        self._conn_bytes.clear()

    def route_changed(self, change: RouteChanged) -> None:
        """One settled change, detected now; it is written within a ``route_changes`` record
        at the next :meth:`flush`."""
        if self._closed:
            self.dropped_records += 1
            return
        for ts_ms, record in self._routes.add(self._clock_ms(), change):
            self._append(ts_ms, ROUTE_CHANGES_EVENT, record)

    def route_suppressed(self, suppressed: RouteSuppressed) -> None:
        """The rules of a silent change, which follows its :meth:`route_changed`: they go into
        that change's record; without one, a ``suppressed`` record."""
        if not self._routes.add_rules(suppressed.topic, suppressed.version, suppressed.rules):
            self.record("suppressed", **suppressed.fields())

    def suppressions_counted(self, counted: SuppressionsCounted) -> None:
        pass  # without per-topic events there is no journal: counted, not recorded

    def broker_changed(self, change: BrokerChanged) -> None:
        self.record("broker_event", **change.fields())

    def subscriptions_changed(self, change: SubscriptionsChanged) -> None:
        self.record(change.event, **change.fields())

    def connection_closed(self, closed: ConnectionClosed) -> None:
        self.record(
            "connection_closed", conn=closed.conn_id, released_topics=closed.released_topics
        )

    def _write_routes(self) -> None:
        for ts_ms, record in self._routes.drain():
            self._append(ts_ms, ROUTE_CHANGES_EVENT, record)

    def _summarize_suppressed(self, ts_ms: int) -> None:
        if not self._suppressed:
            return
        events, self._suppressed = self._suppressed, {}
        dropped_bytes, self._suppressed_bytes = self._suppressed_bytes, 0
        by_conn, self._suppressed_by_conn = self._suppressed_by_conn, 0
        log.warning(
            "journal: %d records (%d bytes) over journal.max_records_per_second=%d, "
            "max_bytes_per_second=%d or max_bytes_per_connection_per_second=%d dropped (%s)",
            sum(events.values()),
            dropped_bytes,
            self._max_per_second,
            self._max_bytes,
            self._max_conn_bytes,
            ", ".join(f"{k}: {v}" for k, v in sorted(events.items())),
        )
        self._append(
            ts_ms,
            SUPPRESSED_EVENT,
            {
                "dropped": sum(events.values()),
                "events": dict(sorted(events.items())),
                "since_ms": self._suppressed_since_ms,
                "dropped_bytes": dropped_bytes,
                "connection_limited": by_conn,
            },
        )

    def _append(self, ts_ms: int, event: str, fields: dict[str, Any]) -> None:
        self._append_encoded(ts_ms, _encode({"ts_ms": ts_ms, "event": event, **fields}))

    def _append_encoded(self, ts_ms: int, data: bytes) -> None:
        pending = self._size + self._buffered
        if pending and pending + len(data) > self._max_file_bytes:
            self._write_buffer()
            self._close_file()
        if self._file is None and not self._buffer:
            self._next_start_ms = ts_ms
        self._buffer.append(data)
        self._buffered += len(data)
        if self._buffered >= self._buffer_bytes:
            self._write_buffer()

    def flush(self) -> None:
        """Write the open ``route_changes`` records and hand buffered records to the OS (no
        fsync); a second over summarizes its drops."""
        if self._closed:
            return
        self._write_routes()
        if self._suppressed:
            now = self._clock_ms()
            if now // 1000 != self._second:
                self._summarize_suppressed(now)
                self._new_second(now // 1000)
        self._write_buffer()

    def close(self) -> None:
        if self._closed:
            return
        self._write_routes()
        self._summarize_suppressed(self._clock_ms())
        self._write_buffer()
        self._close_file()
        self._closed = True

    def _write_buffer(self) -> None:
        if not self._buffer:
            return
        data = b"".join(self._buffer)
        records = len(self._buffer)
        self._buffer.clear()
        self._buffered = 0
        try:
            handle = self._file if self._file is not None else self._open()
            _write_all(handle, data)
        except OSError as exc:
            self._on_error(f"writing {records} records", exc)
            self.dropped_records += records
            self._cut_back()
            return
        self._size += len(data)
        if self._failing:
            self._failing = False
            log.warning("journal writable again (%d write errors so far)", self.write_errors)

    def _open(self) -> BinaryIO:
        self._dir.mkdir(parents=True, exist_ok=True)
        self._seq += 1
        path = self._dir / file_name(self._next_start_ms, self._seq)
        handle = open(path, "ab", buffering=0)  # noqa: SIM115 - stays open across records
        self._file, self._path = handle, path
        self._size = handle.seek(0, 2)
        self.files_opened += 1
        self._prune()
        return handle

    def _cut_back(self) -> None:
        """Drop a partly written batch so the file ends on a complete line."""
        if self._file is None:
            return
        try:
            self._file.truncate(self._size)
        except OSError as exc:
            self._on_error("truncating after a failed write", exc)
            self._close_file()

    def _close_file(self) -> None:
        handle, self._file, self._path, self._size = self._file, None, None, 0
        if handle is None:
            return
        try:
            handle.close()
        except OSError as exc:
            self._on_error("closing", exc)

    def _prune(self) -> None:
        """Delete the oldest journal files beyond ``max_files`` or ``max_total_bytes``, never the
        open one; the open file is counted at its full size, so the total stays under the bound
        until the next rotation."""
        if self._max_files <= 0 and self._max_total_bytes <= 0:
            return
        aged: list[tuple[int, int, Path]] = []
        try:
            names = list(self._dir.iterdir())
        except OSError as exc:
            self._on_error("listing files for retention", exc)
            return
        for path in names:
            match = _FILE_NAME.fullmatch(path.name)
            if match is not None and path != self._path:
                aged.append((int(match.group(1)), int(match.group(2)), path))
        aged.sort()
        excess = len(aged) + 1 - self._max_files if self._max_files > 0 else 0
        doomed = aged[: max(excess, 0)]
        if self._max_total_bytes > 0:
            kept = aged[len(doomed) :]
            sizes = []
            for _, _, path in kept:
                try:
                    sizes.append(path.stat().st_size)
                except OSError:
                    sizes.append(0)
            total = sum(sizes) + self._max_file_bytes
            for entry, size in zip(kept, sizes, strict=True):
                if total <= self._max_total_bytes:
                    break
                doomed.append(entry)
                total -= size
        for _, _, path in doomed:
            try:
                path.unlink()
            except OSError as exc:
                self._on_error(f"deleting {path.name}", exc)
                continue
            self.files_deleted += 1
            log.info(
                "journal retention (max_files=%d, max_total_bytes=%d): deleted %s",
                self._max_files,
                self._max_total_bytes,
                path,
            )

    def _on_error(self, what: str, exc: OSError) -> None:
        self.write_errors += 1
        if self._failing:
            log.debug("journal %s in %s failed again: %s", what, self._dir, exc)
            return
        self._failing = True
        log.error(
            "journal %s in %s failed; dropping records until it works: %s", what, self._dir, exc
        )


def open_journal(config: JournalConfig, clock_ms: Callable[[], int]) -> EventJournal | NullJournal:
    """The journal ``config`` asks for: none without ``journal.directory``."""
    if not config.directory:
        return NullJournal()
    return EventJournal(
        config.directory,
        max_file_bytes=config.max_file_bytes,
        max_files=config.max_files,
        max_total_bytes=config.max_total_bytes,
        max_records_per_second=config.max_records_per_second,
        max_topics_per_record=config.max_topics_per_record,
        max_bytes_per_second=config.max_bytes_per_second,
        max_bytes_per_connection_per_second=config.max_bytes_per_connection_per_second,
        clock_ms=clock_ms,
    )
