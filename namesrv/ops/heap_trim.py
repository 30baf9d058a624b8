"""Free C-heap memory given back to the system once large register work has settled.

Applying a large register table allocates as it goes: the body's buffer, the read columns, the
broker's growing dicts (each resize frees the old table), the slices' lists. What is freed
afterwards stays with glibc's allocator as free chunks between the live ones, counted in the
process's RSS though nothing uses it: after ten brokers registered 100,000 topics each, about
as much as the routes themselves. ``malloc_trim`` hands those pages back (``MADV_DONTNEED``),
a few milliseconds for a heap of hundreds of MiB.

It runs once the register tables applied in slices have been done for ``after_ms``: not after
heartbeats, whose large bodies are read and dropped again every 30 s and are better served by
the pages the allocator keeps (see ``namesrv.cli.tune_allocator``), and not in the middle of a
burst of registers.
"""

from __future__ import annotations

import ctypes
import logging
from collections import Counter
from collections.abc import Callable

from namesrv.ops.clock import Clock, DelayedCall

log = logging.getLogger(__name__)


def malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``: whether memory went back to the system (False where the C
    library has no such call)."""
    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):
        return False


class HeapTrim:
    """Calls ``trim`` ``after_ms`` after the last :meth:`settled` (0: never), unless ``busy()``
    says register work is pending again then (the end of that work calls :meth:`settled`
    anew)."""

    def __init__(
        self,
        clock: Clock,
        after_ms: int,
        busy: Callable[[], bool],
        trim: Callable[[], bool] = malloc_trim,
        counters: Counter[str] | None = None,
    ) -> None:
        """``counters`` (the server's) counts ``heap_trims`` too."""
        self._clock = clock
        self._after = after_ms / 1000.0
        self._busy = busy
        self._trim = trim
        self._counters = counters if counters is not None else Counter()
        self._call: DelayedCall | None = None
        self.trims = 0
        """Trims run."""

    def settled(self) -> None:
        """Large register work has just finished: trim ``after_ms`` from now."""
        if self._after <= 0:
            return
        if self._call is not None and self._call.active():
            self._call.reset(self._after)
            return
        self._call = self._clock.callLater(self._after, self._fire)

    def _fire(self) -> None:
        self._call = None
        if self._busy():
            return
        self.trims += 1
        self._counters["heap_trims"] += 1
        try:
            self._trim()
        except Exception:  # giving memory back is an optimisation: never the server's end
            log.exception("heap trim failed")

    def stop(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
