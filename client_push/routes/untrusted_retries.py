"""Held topics whose last route answer could not be trusted, and when to ask about each again.

Pure: callers pass an injected ``random.Random``. An answer cannot be trusted when it is an
error (SYSTEM_ERROR, a failed request) or comes from a name server warming up: it says nothing
about the topic, so the held route stays (stale) and the topic is asked again after a pause
that doubles per untrusted answer in a row, from ``initial_ms`` up to ``max_ms``, with jitter
so clients of one restarted server do not ask together. A trusted answer ends the run.

Bounded: one entry per held topic at most (the owner discards a topic it stops holding), and
a pause never longer than ``max_ms``.
"""

from __future__ import annotations

import random

MAX_DOUBLINGS = 30
"""Doublings counted at most: past ``max_ms`` long before, and the count stays a small int."""


class UntrustedRetries:
    def __init__(self, initial_ms: int, max_ms: int, rng: random.Random) -> None:
        self._initial = initial_ms
        self._max = max_ms
        self._rng = rng
        self._runs: dict[str, int] = {}
        """topic → untrusted answers in a row."""

    def next_delay_ms(self, topic: str) -> int:
        """One more untrusted answer for ``topic``: how long to wait before asking again,
        between half and all of ``initial_ms`` doubled per earlier one, capped at ``max_ms``."""
        run = self._runs.get(topic, 0)
        self._runs[topic] = min(run + 1, MAX_DOUBLINGS)
        full = min(self._max, self._initial * (1 << run))
        return int(full / 2 + self._rng.random() * full / 2)

    def trusted(self, topic: str) -> bool:
        """A trusted answer for ``topic``: its run ends; True when there was one."""
        return self._runs.pop(topic, None) is not None

    def discard(self, topic: str) -> None:
        self._runs.pop(topic, None)

    def clear(self) -> None:
        self._runs.clear()

    def __contains__(self, topic: object) -> bool:
        return topic in self._runs

    def __len__(self) -> int:
        return len(self._runs)
