"""The replay record: per access key, the highest strong-form stamp this server has accepted,
kept in a file across restarts.

A restarted server starts each key's replay floor at its recorded stamp (and at its own start
time), so a request captured before the restart is refused after it, even when it was stamped
ahead of the server's clock or the clock has since been stepped back. The file holds one number
per strong account (bounded by the accounts configured) and is rewritten by a thread of its own
(:class:`~namesrv.ops.state_file.StateFile`), coalesced, never on the event loop; a stop writes
the last stamps before the process ends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from namesrv.ops.state_file import StateFile


class ReplayRecordError(ValueError):
    """The record file cannot be read or parsed: the server must not start without it, for it
    could then accept again what it accepted before."""


class ReplayRecord:
    def __init__(self, path: str) -> None:
        """Load ``path`` (a missing file is an empty record); raises :class:`ReplayRecordError`."""
        self.path = path
        self._high = _load(path)
        self._file = StateFile(path, self._render)

    def floors(self) -> dict[str, int]:
        """Each recorded key's highest accepted stamp (ms since the epoch)."""
        return dict(self._high)

    def accepted(self, access_key: str, stamp_ms: int) -> None:
        """``stamp_ms`` is the highest stamp accepted for ``access_key`` so far: recorded."""
        if stamp_ms > self._high.get(access_key, -1):
            self._high[access_key] = stamp_ms
            self._file.changed()

    def flush(self, timeout: float | None = None) -> bool:
        return self._file.flush(timeout)

    def close(self, timeout: float | None = None) -> bool:
        return self._file.close(timeout)

    @property
    def failures(self) -> int:
        return self._file.failures

    def _render(self) -> Iterator[bytes]:
        high = self._high.copy()  # one C call: atomic against the event loop's updates
        yield json.dumps({"highestAcceptedMs": high}, sort_keys=True).encode() + b"\n"


def _load(path: str) -> dict[str, int]:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ReplayRecordError(f"replay record {path} cannot be read: {exc.strerror}") from None
    try:
        doc = json.loads(raw)
        high = doc["highestAcceptedMs"]
        if not isinstance(high, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in high.items()
        ):
            raise ValueError("highestAcceptedMs is not an object of integers")
    except (ValueError, KeyError, TypeError) as exc:
        raise ReplayRecordError(f"replay record {path} is corrupt: {exc}") from None
    return dict(high)
