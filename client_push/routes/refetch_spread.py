"""Refetches spread evenly over a jittered window, so many clients never ask in the same second.

Pure: callers pass the time and an injected ``random.Random``. A batch of T topics over a window
W is laid out at a spacing of W / T from a random offset inside the first slot, in a random
order. Any one-second interval then holds at most ceil(T / W) of one client's requests, whatever
the offset, so N clients send at most about N x T / W requests in any second (the uniform jitter
of independent timers would bunch some seconds well above the mean). A topic already queued
keeps its earlier time: overlapping batches coalesce instead of asking twice.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable


class SpreadQueue:
    """Topics due for a refetch at spread-out times (milliseconds as floats)."""

    def __init__(self) -> None:
        self._due: dict[str, tuple[float, str, int | None]] = {}
        """topic → (due_ms, cause, wanted version or None)."""
        self._heap: list[tuple[float, str]] = []

    def spread(
        self,
        topics: Iterable[tuple[str, int | None]],
        cause: str,
        *,
        now_ms: float,
        delay_ms: float,
        window_ms: float,
        rng: random.Random,
    ) -> int:
        """Queue (topic, wanted version) pairs over [now + delay, now + delay + window).

        Returns how many topics were newly queued; an already queued topic keeps its time and
        takes the higher wanted version.
        """
        fresh: list[tuple[str, int | None]] = []
        for topic, wanted in topics:
            queued = self._due.get(topic)
            if queued is None:
                fresh.append((topic, wanted))
            elif wanted is not None and (queued[2] is not None and wanted > queued[2]):
                self._due[topic] = (queued[0], queued[1], wanted)
        if not fresh:
            return 0
        rng.shuffle(fresh)
        step = window_ms / len(fresh)
        start = now_ms + delay_ms + rng.random() * step
        for i, (topic, wanted) in enumerate(fresh):
            due = start + i * step
            self._due[topic] = (due, cause, wanted)
            heapq.heappush(self._heap, (due, topic))
        return len(fresh)

    def next_due_ms(self) -> float | None:
        heap = self._heap
        while heap:
            due, topic = heap[0]
            queued = self._due.get(topic)
            if queued is not None and queued[0] == due:
                return due
            heapq.heappop(heap)  # discarded or re-queued: a stale heap entry
        return None

    def pop_due(self, now_ms: float) -> list[tuple[str, str, int | None]]:
        """(topic, cause, wanted version) of every topic due by ``now_ms``, earliest first."""
        out: list[tuple[str, str, int | None]] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            due, topic = heapq.heappop(heap)
            queued = self._due.get(topic)
            if queued is not None and queued[0] == due:
                del self._due[topic]
                out.append((topic, queued[1], queued[2]))
        return out

    def discard(self, topic: str) -> None:
        self._due.pop(topic, None)

    def clear(self) -> None:
        self._due.clear()
        self._heap.clear()

    def __contains__(self, topic: object) -> bool:
        return topic in self._due

    def __len__(self) -> int:
        return len(self._due)
