"""Freshness of strong-form signed requests: the clock-skew window and the nonces seen in it.

A strong-form request (``protocol.signing``) carries its signer's timestamp and a nonce. It is
fresh when the timestamp is within ``skew_ms`` of the server's clock, either way, and its
(access key, nonce) has not been seen while that timestamp was in the window. A nonce is
remembered until its timestamp leaves the window (``timestamp + skew_ms``): after that the
timestamp alone refuses the request, so the entry is no longer needed.

The cache holds at most ``max_entries`` nonces (each of at most ``NONCE_MAX_CHARS`` characters,
so the bytes are bounded with the count). When it is full, the entry with the oldest timestamp
is dropped and the *floor* rises to that timestamp: from then on a request stamped at or before
the floor is refused as stale, so a dropped nonce can never be replayed. Signers with sound
clocks keep working at any rate; under a rate beyond the bound, only requests stamped older
than the dropped ones are refused (counted as ``stale``), never a replay accepted.

Only requests whose signature verified reach the cache, so a stranger cannot fill it. Pure:
the caller passes the time.
"""

from __future__ import annotations

import heapq
from typing import Literal

Refusal = Literal["stale", "replayed"]


class ReplayCache:
    def __init__(self, skew_ms: int, max_entries: int) -> None:
        if skew_ms <= 0 or max_entries <= 0:
            raise ValueError("skew_ms and max_entries must be positive")
        self.skew_ms = skew_ms
        self.max_entries = max_entries
        self._seen: dict[str, int] = {}
        """access key + NUL + nonce -> the request's timestamp."""
        self._by_time: list[tuple[int, str]] = []
        """(timestamp, key) of every entry of ``_seen``: a heap, oldest first."""
        self.floor_ms = -1
        """Requests stamped at or before this are refused: their nonces may have been dropped."""
        self.dropped = 0
        """Entries dropped to stay within ``max_entries`` before their window ended."""

    def __len__(self) -> int:
        return len(self._seen)

    def admit(self, access_key: str, nonce: str, timestamp_ms: int, now_ms: int) -> Refusal | None:
        """None, and the nonce remembered, when the request is fresh; else why it is not."""
        self._expire(now_ms)
        if abs(now_ms - timestamp_ms) > self.skew_ms or timestamp_ms <= self.floor_ms:
            return "stale"
        key = f"{access_key}\0{nonce}"
        if key in self._seen:
            return "replayed"
        if len(self._seen) >= self.max_entries:
            stamp, oldest = heapq.heappop(self._by_time)
            del self._seen[oldest]
            self.dropped += 1
            self.floor_ms = max(self.floor_ms, stamp)
            if timestamp_ms <= self.floor_ms:
                return "stale"
        self._seen[key] = timestamp_ms
        heapq.heappush(self._by_time, (timestamp_ms, key))
        return None

    def _expire(self, now_ms: int) -> None:
        horizon = now_ms - self.skew_ms
        by_time = self._by_time
        while by_time and by_time[0][0] < horizon:
            _, key = heapq.heappop(by_time)
            del self._seen[key]
