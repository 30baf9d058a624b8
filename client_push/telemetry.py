"""Route-refetch telemetry: one JSON line per route the client learns (docs/telemetry.md).

Off by default. It exists to measure propagation: ``fetched_at_ms - notified_at_ms`` is how
long a change took from the name server's notification to the client holding the new route.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import IO, Protocol

log = logging.getLogger(__name__)

CAUSES = frozenset({"first", "notify", "poll", "gap", "epoch", "reconnect", "subscribe"})


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
    """Appends records to a file, one line each, flushed per line so a reader may tail it."""

    def __init__(self, path: str) -> None:
        self._file: IO[str] | None = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.path = path
        self.written = 0

    def record(self, rec: RefetchRecord) -> None:
        if self._file is None:
            return
        try:
            self._file.write(json.dumps(asdict(rec), separators=(",", ":")) + "\n")
            self.written += 1
        except OSError as exc:  # telemetry must never break route handling
            log.warning("telemetry to %s switched off: %s", self.path, exc)
            self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def open_telemetry(path: str) -> TelemetrySink:
    return JsonLinesTelemetry(path) if path else NullTelemetry()
