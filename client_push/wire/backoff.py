"""Reconnect delays: exponential growth with jitter, so many clients do not reconnect in step."""

from __future__ import annotations

import random


class Backoff:
    """Delays double from ``initial_ms`` up to ``max_ms``; each is drawn in [delay/2, delay]."""

    def __init__(self, initial_ms: int, max_ms: int, rng: random.Random) -> None:
        self._initial = initial_ms
        self._max = max_ms
        self._rng = rng
        self._attempts = 0

    @property
    def attempts(self) -> int:
        return self._attempts

    def next_delay_ms(self) -> int:
        ceiling = min(self._max, self._initial * (2 ** min(self._attempts, 32)))
        self._attempts += 1
        return max(1, int(ceiling / 2 + self._rng.uniform(0, ceiling / 2)))

    def reset(self) -> None:
        """A connection succeeded: the next failure starts from the initial delay again."""
        self._attempts = 0
