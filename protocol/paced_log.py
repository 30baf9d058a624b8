"""Log lines a peer can provoke, paced per kind, their peer strings escaped: one pacer for the
name server and the client alike.

Each kind may log ``burst`` lines per ``period_s``; the lines it had to drop are counted and
reported by the next line of that kind, or by :meth:`PacedLog.release` once the period is over,
so an operator still sees how often it happened. The kinds kept are bounded: a caller may name
a kind per peer, and past ``max_kinds`` kinds in one period the new ones share one window.
Every string argument of a line is shown by :func:`protocol.peer_text.printable`: control
characters escaped (a peer's ``\\n`` cannot start a forged line) and cut to a length, so one
line costs at most a few KiB whatever the peer sent.

Pure: time comes from the ``clock`` callable it is given (seconds), so tests move it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from protocol.peer_text import DEFAULT_SHOWN_CHARS, printable

MAX_KINDS = 4_096
"""Kinds a pacer keeps a window for at once; past it, new kinds share :data:`OTHER_KINDS`."""
OTHER_KINDS = "other kinds"
"""The window shared by the kinds past ``max_kinds``."""


class PacedLog:
    def __init__(
        self,
        logger: logging.Logger,
        clock: Callable[[], float] | None = None,
        *,
        period_s: float = 10.0,
        burst: int = 5,
        shown_chars: int = DEFAULT_SHOWN_CHARS,
        max_kinds: int = MAX_KINDS,
    ) -> None:
        """``clock`` returns seconds (a reactor's ``seconds``, a runtime's clock); None: the
        monotonic clock. A string argument keeps ``shown_chars`` characters."""
        self._log = logger
        self._clock = clock if clock is not None else time.monotonic
        self._period = period_s
        self._burst = burst
        self._shown = shown_chars
        self._max_kinds = max_kinds
        self._windows: dict[str, list[float]] = {}
        """kind -> [window start, lines logged in it, lines dropped in it, level]."""
        self.dropped = 0

    def log(self, level: int, kind: str, msg: str, *args: Any, exc_info: bool = False) -> bool:
        """Log ``msg`` unless ``kind`` has used its burst in this period; True when logged."""
        now = self._clock()
        window = self._windows.get(kind)
        if window is None and len(self._windows) >= self._max_kinds:
            self._prune(now)
            if len(self._windows) >= self._max_kinds:
                kind = OTHER_KINDS
                window = self._windows.get(kind)
        if window is None or now - window[0] >= self._period:
            dropped = int(self._windows.pop(kind)[2]) if window is not None else 0
            window = self._windows[kind] = [now, 0, 0, level]  # the windows in start order
            if dropped:
                msg += f" ({dropped} more like this in the previous {self._period:g} s not logged)"
        if window[1] >= self._burst:
            window[2] += 1
            self.dropped += 1
            return False
        window[1] += 1
        shown = tuple(printable(a, self._shown) if isinstance(a, str) else a for a in args)
        self._log.log(level, msg, *shown, exc_info=exc_info)
        return True

    def warning(self, kind: str, msg: str, *args: Any) -> bool:
        return self.log(logging.WARNING, kind, msg, *args)

    @property
    def kinds(self) -> int:
        """Kinds with a window kept now (at most ``max_kinds`` and the shared one)."""
        return len(self._windows)

    def release(self) -> int:
        """Report the lines each kind dropped in a period that is over, one line per kind, and
        forget the windows that are over; returns the lines reported as dropped. Called on a
        timer, so a count is told even when no line of its kind follows."""
        return self._prune(self._clock())

    def _prune(self, now: float) -> int:
        """Forget the windows that are over (the oldest first: they are kept in start order,
        so this stops at the first that is not), reporting what each dropped."""
        windows = self._windows
        told = 0
        while windows:
            kind, (start, _, dropped, level) = next(iter(windows.items()))
            if now - start < self._period:
                break
            del windows[kind]
            if dropped:
                told += int(dropped)
                self._log.log(
                    int(level),
                    "%s: %d more lines like this in the previous %g s not logged",
                    printable(kind, self._shown),
                    int(dropped),
                    self._period,
                )
        return told
