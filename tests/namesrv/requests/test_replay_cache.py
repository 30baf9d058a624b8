"""The strong form's replay cache: the window, the count bound and its floor, expiry."""

from __future__ import annotations

import pytest

from namesrv.requests.replay_cache import ReplayCache


def test_a_nonce_is_admitted_once_within_the_window_and_stale_outside_it():
    cache = ReplayCache(skew_ms=1_000, max_entries=10)
    assert cache.admit("k", "n1", 5_000, now_ms=5_500) is None
    assert cache.admit("k", "n1", 5_000, now_ms=5_600) == "replayed"
    assert cache.admit("other", "n1", 5_000, now_ms=5_600) is None  # nonces are per key
    assert cache.admit("k", "n2", 3_999, now_ms=5_000) == "stale"
    assert cache.admit("k", "n3", 6_001, now_ms=5_000) == "stale"
    assert cache.admit("k", "n4", 6_000, now_ms=5_000) is None


def test_entries_expire_when_their_stamp_leaves_the_window():
    cache = ReplayCache(skew_ms=1_000, max_entries=10)
    for i in range(5):
        cache.admit("k", f"n{i}", 10_000 + i, now_ms=10_000)
    assert len(cache) == 5
    cache.admit("k", "late", 11_003, now_ms=11_003)
    assert len(cache) == 3  # stamps 10_000..10_002 are older than 11_003 - 1_000


def test_the_count_bound_holds_under_any_rate_and_no_dropped_nonce_is_replayable():
    cache = ReplayCache(skew_ms=60_000, max_entries=100)
    for i in range(1_000):
        assert cache.admit("k", f"n{i}", 1_000_000 + i, now_ms=1_000_000 + i) is None
        assert len(cache) <= 100
    assert cache.dropped == 900
    for i in range(1_000):
        assert cache.admit("k", f"n{i}", 1_000_000 + i, now_ms=1_001_000) is not None


def test_bounds_must_be_positive():
    with pytest.raises(ValueError):
        ReplayCache(skew_ms=0, max_entries=1)
