"""Freshness of strong-form signed requests: the clock-skew window and the nonces seen in it,
kept apart for each access key.

A strong-form request (``protocol.signing``) carries its signer's timestamp and a nonce. It is
fresh when the timestamp is within ``skew_ms`` of the server's clock, either way, and its nonce
has not been seen for its access key while that timestamp was in the window. A nonce is
remembered until its timestamp leaves the window (``timestamp + skew_ms``): after that the
timestamp alone refuses the request, so the entry is no longer needed.

Each access key has its own nonces, its own bound and its own *floor*. A key holds at most
``share`` nonces (each of at most ``NONCE_MAX_CHARS`` characters, so the bytes are bounded with
the count): the per-key bound, or the total bound divided among the keys that take the strong
form, whichever is less, so the keys together never pass the total. When a key's nonces are at
its share, its entry with the oldest timestamp is dropped and *its* floor rises to that
timestamp: from then on a request of that key stamped at or before the floor is refused as
stale, so a dropped nonce can never be replayed. One key's traffic, whatever its stamps, only
ever moves its own floor: no key can make another's fresh requests stale.

A key's floor also rises to the stamp of every nonce that leaves the window, so a clock
stepped forward and back again cannot bring a forgotten nonce's request back into it; and it
starts at the moment the cache was made (``start_floor_ms``) or at the highest stamp a previous
run of the server accepted for the key (``floors``), whichever is later, so no request accepted
before a restart is accepted after it. ``on_accepted(key, stamp)`` hears every stamp that is the
highest the key has had accepted, for the caller to keep across restarts.

The caller admits a nonce only for a request whose signature verified and whose key may make
it, so a stranger, or a key without the right, stores nothing here. Pure: the caller passes the
time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from typing import Literal

Refusal = Literal["stale", "replayed"]


class _KeyNonces:
    """One access key's nonces in the window, oldest stamp first, and its floor."""

    __slots__ = ("by_time", "floor_ms", "high_ms", "seen")

    def __init__(self, floor_ms: int) -> None:
        self.seen: dict[str, int] = {}
        """nonce -> the request's timestamp."""
        self.by_time: list[tuple[int, str]] = []
        """(timestamp, nonce) of every entry of ``seen``: a heap, oldest first."""
        self.floor_ms = floor_ms
        """This key's requests stamped at or before this are refused: their nonces may have
        been dropped, have left the window, or were seen before this cache was made."""
        self.high_ms = floor_ms
        """The highest stamp accepted for this key (or its starting floor)."""

    def expire(self, horizon_ms: int) -> None:
        by_time = self.by_time
        while by_time and by_time[0][0] < horizon_ms:
            stamp, nonce = heapq.heappop(by_time)
            del self.seen[nonce]
            self.floor_ms = max(self.floor_ms, stamp)


class ReplayCache:
    def __init__(
        self,
        skew_ms: int,
        max_entries: int,
        max_entries_per_key: int,
        keys: Iterable[str],
        *,
        start_floor_ms: int = -1,
        floors: Mapping[str, int] | None = None,
        on_accepted: Callable[[str, int], None] | None = None,
    ) -> None:
        """``keys`` are the access keys that take the strong form: only they are admitted.
        Each key's requests stamped at or before ``start_floor_ms``, or its entry in
        ``floors``, are refused as stale."""
        if skew_ms <= 0 or max_entries <= 0 or max_entries_per_key <= 0:
            raise ValueError("skew_ms, max_entries and max_entries_per_key must be positive")
        floors = floors or {}
        self._keys = {key: _KeyNonces(max(start_floor_ms, floors.get(key, -1))) for key in keys}
        self._on_accepted = on_accepted
        if len(self._keys) > max_entries:
            raise ValueError("max_entries must give every key at least one entry")
        self.skew_ms = skew_ms
        self.max_entries = max_entries
        self.share = min(max_entries_per_key, max_entries // max(1, len(self._keys)))
        """Nonces one key holds at most; times the keys, at most ``max_entries``."""
        self._count = 0
        self.dropped = 0
        """Entries dropped to stay within a key's share before their window ended."""

    def __len__(self) -> int:
        return self._count

    def held_by(self, access_key: str) -> int:
        """Nonces ``access_key`` holds now."""
        return len(self._keys[access_key].seen)

    def floor_of(self, access_key: str) -> int:
        """``access_key``'s floor: its requests stamped at or before it are stale."""
        return self._keys[access_key].floor_ms

    def admit(self, access_key: str, nonce: str, timestamp_ms: int, now_ms: int) -> Refusal | None:
        """None, and the nonce remembered, when the request is fresh; else why it is not.

        Raises KeyError for a key that does not take the strong form."""
        entry = self._keys[access_key]
        before = len(entry.seen)
        entry.expire(now_ms - self.skew_ms)
        self._count -= before - len(entry.seen)
        if abs(now_ms - timestamp_ms) > self.skew_ms or timestamp_ms <= entry.floor_ms:
            return "stale"
        if nonce in entry.seen:
            return "replayed"
        if len(entry.seen) >= self.share:
            stamp, oldest = heapq.heappop(entry.by_time)
            del entry.seen[oldest]
            self._count -= 1
            self.dropped += 1
            entry.floor_ms = max(entry.floor_ms, stamp)
            if timestamp_ms <= entry.floor_ms:
                return "stale"
        entry.seen[nonce] = timestamp_ms
        heapq.heappush(entry.by_time, (timestamp_ms, nonce))
        self._count += 1
        if timestamp_ms > entry.high_ms:
            entry.high_ms = timestamp_ms
            if self._on_accepted is not None:
                self._on_accepted(access_key, timestamp_ms)
        return None
