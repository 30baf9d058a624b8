"""A fixed-bucket duration histogram: constant memory, read by the metrics endpoint."""

from __future__ import annotations

from bisect import bisect_left

TICK_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Upper bounds in seconds; a tick past the last one lands in +Inf."""


class DurationHistogram:
    """Counts per bucket (not cumulative), their sum and total, as Prometheus needs them."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = TICK_BUCKETS_S) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.count += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """(upper bound, observations at or below it) pairs, ending with ``+Inf``."""
        out: list[tuple[str, int]] = []
        running = 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out
