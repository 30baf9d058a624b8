"""Warnings a peer can provoke at will, paced: at most one line per interval per kind, the
next one saying how many were held back. Every occurrence is still counted by the caller."""

from __future__ import annotations

import logging
from collections.abc import Callable

PACE_INTERVAL_S = 10.0


class PacedLog:
    def __init__(
        self, log: logging.Logger, clock: Callable[[], float], interval_s: float = PACE_INTERVAL_S
    ) -> None:
        self._log = log
        self._clock = clock
        self._interval = interval_s
        self._last: dict[str, float] = {}
        self.held_back: dict[str, int] = {}

    def warning(self, kind: str, msg: str, *args: object) -> None:
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self._interval:
            self.held_back[kind] = self.held_back.get(kind, 0) + 1
            return
        self._last[kind] = now
        held = self.held_back.pop(kind, 0)
        if held:
            msg += " (%d more like it in the last %.0f s not logged)"
            args = (*args, held, self._interval)
        self._log.warning(msg, *args)
