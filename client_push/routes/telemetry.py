"""Route-refetch telemetry: one JSON line per route the client learns (docs/telemetry.md).

Off by default. It exists to measure propagation: ``fetched_at_ms - notified_at_ms`` is how
long a change took from the name server's notification to the client holding the new route.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import IO, Any, Protocol

log = logging.getLogger(__name__)

CAUSES = frozenset({"first", "notify", "inline", "poll", "gap", "epoch", "reconnect", "subscribe"})

DEFAULT_MEMORY_BYTES = 16 * 1024 * 1024
ENTRY_OVERHEAD_BYTES = 128
"""What remembering one topic's last record costs beyond its name (dict slot, tuple, ints)."""


@dataclass(frozen=True, slots=True)
class RefetchRecord:
    topic: str
    version: int
    exists: bool
    cause: str
    notified_at_ms: int | None
    requested_at_ms: int
    fetched_at_ms: int
    namesrv: str


class TelemetrySink(Protocol):
    def record(self, rec: RefetchRecord) -> None: ...

    def close(self) -> None: ...


class NullTelemetry:
    def record(self, rec: RefetchRecord) -> None:
        pass

    def close(self) -> None:
        pass


class JsonLinesTelemetry:
    """Appends records to a file, one line each, flushed per line so a reader may tail it.

    Each line says whether it is ``news``: it differs from the file's previous record of its
    topic (docs/telemetry.md). The writer remembers each topic's last record, within
    ``memory_bytes``; a file it appends to is read once first, so the records it already holds
    count as previous ones. The field is written only while it can be exact for every line of
    the file: not into a file holding records without it (an older client's), nor after the
    memory bound is reached. Without it a reader works ``news`` out itself.
    """

    def __init__(
        self,
        path: str,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        identity: Mapping[str, str] | None = None,
    ) -> None:
        self.path = path
        self._identity = dict(identity or {})
        """Written on every line: who wrote it (``client_id``, ``host``)."""
        self.written = 0
        self._memory_bytes = memory_bytes
        self._used = 0
        self._last: dict[str, tuple[int, bool]] = {}
        self._news = True
        cut = self._read_existing(path)
        self._file: IO[str] | None = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        if cut:
            # A line cut short (a crash mid-write) must not swallow the next record.
            self._file.write("\n")

    @property
    def writes_news(self) -> bool:
        return self._news

    def record(self, rec: RefetchRecord) -> None:
        if self._file is None:
            return
        line: dict[str, Any] = asdict(rec)
        line.update(self._identity)
        if self._news:
            news = self._is_news(rec.topic, rec.version, rec.exists, rec.cause)
            if self._news:
                line["news"] = news
        try:
            self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
            self.written += 1
        except OSError as exc:  # telemetry must never break route handling
            log.warning("telemetry to %s switched off: %s", self.path, exc)
            self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _is_news(self, topic: str, version: int, exists: bool, cause: str) -> bool:
        """Whether this record differs from the topic's previous one in the file (an epoch
        refetch always does: versions of a restarted name server are numbered afresh)."""
        previous = self._last.get(topic)
        if previous is None:
            self._used += len(topic) + ENTRY_OVERHEAD_BYTES
            if self._used > self._memory_bytes:
                log.warning(
                    "telemetry to %s: the last records of %d topics fill %d bytes"
                    " (telemetry_memory_bytes); the news field is left out from here on",
                    self.path,
                    len(self._last),
                    self._memory_bytes,
                )
                self._news = False
                self._last.clear()
                return False
        self._last[topic] = (version, exists)
        return previous is not None and (previous != (version, exists) or cause == "epoch")

    def _read_existing(self, path: str) -> bool:
        """Remember the last record of each topic already in the file; True when its last
        line was cut short. A line that is no usable record (cut, edited) is no previous
        record, as for the pipeline; a usable one without ``news`` switches the field off."""
        try:
            if os.path.getsize(path) == 0:
                return False
        except OSError:
            return False  # a new file (or one open() will report)
        ends_cut = False
        with open(path, "rb") as existing:
            for raw in existing:
                ends_cut = not raw.endswith(b"\n")
                rec = _usable(raw)
                if rec is None or not self._news:
                    continue
                if not isinstance(rec.get("news"), bool):
                    self._news = False
                    self._last.clear()
                    continue
                self._is_news(rec["topic"], rec["version"], rec["exists"], rec["cause"])
        return ends_cut


def _usable(raw: bytes) -> dict[str, Any] | None:
    """The record on ``raw`` if it has every field a reader needs, of the right type."""
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(rec, dict):
        return None
    for name, kind in (
        ("topic", str),
        ("version", int),
        ("exists", bool),
        ("cause", str),
        ("requested_at_ms", int),
        ("fetched_at_ms", int),
    ):
        value = rec.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return None
    return rec


def open_telemetry(
    path: str, memory_bytes: int = DEFAULT_MEMORY_BYTES, identity: Mapping[str, str] | None = None
) -> TelemetrySink:
    return JsonLinesTelemetry(path, memory_bytes, identity) if path else NullTelemetry()
