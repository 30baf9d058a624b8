"""Refetches due later: spread over a window, or backed off after an answer not to be trusted.

Pure: callers pass the time; randomness is an injected ``random.Random``. The push session
decides what is due when (``SpreadRefetch``, ``BackOff``: ``apply``); this table keeps it until
then.

Spreading: a batch of T topics over a window W is laid out at a spacing of W / T from a random
offset inside the first slot, in a random order. Any one second then holds at most ceil(T / W)
of one client's requests, whatever the offset, so N clients send at most about N x T / W
requests in any second (the uniform jitter of independent timers would bunch some seconds well
above the mean). A topic already queued keeps its earlier time and takes the higher wanted
version: overlapping batches coalesce instead of asking twice.

Backing off: an answer that says nothing about a held topic (an error, a failed request, a
name server warming up) asks again after a pause that doubles per such answer in a row, from
``initial_ms`` up to ``max_ms``, between half and all of it so the clients of one restarted
server do not ask together. A trusted answer ends the run.

Bounded: one entry per held topic at most (the owner discards a topic it stops holding).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable

from client_push.routes.events import CONFIRM, RETRY
from client_push.routes.push_actions import BackOff, Refetch, ScheduleAction
from client_push.routes.push_session import HeldView, needs_refetch

MAX_DOUBLINGS = 30
"""Doublings counted at most: past ``max_ms`` long before, and the count stays a small int."""


class RefetchSchedule:
    """Topics due for a refetch at set times (milliseconds as floats), and backoff runs."""

    def __init__(self, initial_ms: int, max_ms: int, rng: random.Random) -> None:
        self._initial = initial_ms
        self._max = max_ms
        self._rng = rng
        self._due: dict[str, tuple[float, str, int | None]] = {}
        """topic → (due_ms, cause, wanted version or None)."""
        self._heap: list[tuple[float, str]] = []
        self._runs: dict[str, int] = {}
        """topic → untrusted answers in a row."""

    def spread(
        self,
        topics: Iterable[tuple[str, int | None]],
        cause: str,
        now_ms: float,
        delay_ms: float,
        window_ms: float,
    ) -> int:
        """Queue (topic, wanted version) pairs over [now + delay, now + delay + window);
        how many were newly queued."""
        fresh: list[tuple[str, int | None]] = []
        for topic, wanted in topics:
            queued = self._due.get(topic)
            if queued is None:
                fresh.append((topic, wanted))
            elif wanted is not None and queued[2] is not None and wanted > queued[2]:
                self._due[topic] = (queued[0], queued[1], wanted)
        if not fresh:
            return 0
        rng = self._rng
        rng.shuffle(fresh)
        step = window_ms / len(fresh)
        start = now_ms + delay_ms + rng.random() * step
        for i, (topic, wanted) in enumerate(fresh):
            due = start + i * step
            self._due[topic] = (due, cause, wanted)
            heapq.heappush(self._heap, (due, topic))
        return len(fresh)

    def apply(self, action: ScheduleAction, now_ms: float) -> tuple[str, int]:
        """Schedule what the push session decided: (the refetches' cause, how many topics
        were newly queued)."""
        if isinstance(action, BackOff):
            delay = self.back_off_ms(action.topic)
            return RETRY, self.spread([(action.topic, None)], RETRY, now_ms, delay, 0)
        a = action
        return a.cause, self.spread(a.topics, a.cause, now_ms, a.delay_ms, a.window_ms)

    def back_off_ms(self, topic: str) -> int:
        """One more untrusted answer for ``topic``: how long to wait before asking again."""
        run = self._runs.get(topic, 0)
        self._runs[topic] = min(run + 1, MAX_DOUBLINGS)
        full = min(self._max, self._initial * (1 << run))
        return int(full / 2 + self._rng.random() * full / 2)

    def trusted(self, topic: str) -> bool:
        """A trusted answer for ``topic``: its backoff run ends; True when there was one."""
        return self._runs.pop(topic, None) is not None

    @property
    def backing_off(self) -> int:
        """Held topics whose last answer could not be trusted."""
        return len(self._runs)

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

    def due(self, now_ms: float, held: HeldView) -> tuple[list[Refetch], int]:
        """The refetches whose time has come by ``now_ms``, earliest first, and how many were
        dropped as no longer worth it: a topic no longer held, or (but for a confirmation)
        held at the version it was scheduled for already."""
        out: list[Refetch] = []
        skipped = 0
        for topic, cause, wanted in self.pop_due(now_ms):
            if not held.is_held(topic):
                continue
            entry = held.peek(topic)
            held_at = None if entry is None else entry.version
            if (
                wanted is not None
                and held_at is not None
                and cause != CONFIRM
                and not needs_refetch(held_at, wanted)
            ):
                skipped += 1  # held at that version already
                continue
            out.append(Refetch(topic, cause, wanted))
        return out, skipped

    def discard(self, topic: str) -> None:
        """``topic`` is deleted or no longer held: nothing of it stays queued or counted."""
        self._due.pop(topic, None)
        self._runs.pop(topic, None)

    def __contains__(self, topic: object) -> bool:
        return topic in self._due

    def __len__(self) -> int:
        return len(self._due)
