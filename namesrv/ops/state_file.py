"""A state file rewritten whole by one background thread, never on the event loop.

A change only marks the file stale and wakes the writer (:meth:`StateFile.changed`, a few
microseconds): the writer renders the state (``render``, called on the writer's thread), writes
it to a temporary file beside the target, fsyncs it and renames it over the target, so a reader
or a crash sees the old file or the new one, whole. Changes made while a write runs are
coalesced into the next write, so there is at most one write in flight and one owed, however
fast the state changes, and the last state is always written: :meth:`StateFile.close` (at
shutdown) waits for it.

``render`` runs on the writer's thread while the event loop goes on changing the state: it
must read the state by single C-level copies (``dict.copy()``, ``list(d.items())``), which the
interpreter lock makes atomic, and yield the file's bytes in pieces, so the writer holds the
lock only briefly at a time and the memory it takes is one copy of the state.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)


def write_atomically(path: str, chunks: Iterable[bytes]) -> None:
    """``chunks`` to ``path`` through a temporary file in its directory: fsynced, then renamed
    over ``path``. On failure the temporary file is removed and the error raised."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    name = Path(path).name
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class StateFile:
    """``path`` kept equal to what ``render`` returns, written by a thread of its own."""

    def __init__(self, path: str, render: Callable[[], Iterable[bytes]]) -> None:
        self.path = path
        self._render = render
        self._cond = threading.Condition()
        self._owed = 0
        """Changes not yet covered by a finished write (the writer zeroes it as it starts)."""
        self._writing = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.writes = 0
        """Writes finished (each one rewrote the file whole)."""
        self.failures = 0
        """Writes that failed (each is logged; the next change tries again)."""

    def changed(self) -> None:
        """The state moved: the writer rewrites the file soon (cheap; safe at any rate)."""
        with self._cond:
            if self._closed:
                return
            self._owed += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"state-file:{Path(self.path).name}", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every change made so far is written (or failed); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._owed and not self._writing, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Write what is owed, then stop the writer; False when that did not finish in time."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return done

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._owed or self._closed)
                if not self._owed:
                    return
                self._owed = 0
                self._writing = True
            try:
                write_atomically(self.path, self._render())
                self.writes += 1
            except Exception as exc:  # the state holds in memory; the operator must see why
                self.failures += 1
                log.error("could not write %s: %s", self.path, exc)
            with self._cond:
                self._writing = False
                self._cond.notify_all()
