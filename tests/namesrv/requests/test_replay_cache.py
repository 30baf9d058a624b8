"""The strong form's replay cache: the window, each key's share and floor, expiry, and one key
unable to move another's floor."""

from __future__ import annotations

import pytest

from namesrv.requests.replay_cache import ReplayCache


def cache(skew_ms: int = 1_000, total: int = 100, per_key: int = 10, keys=("k", "other")):
    return ReplayCache(skew_ms, total, per_key, keys)


def test_a_nonce_is_admitted_once_within_the_window_and_stale_outside_it():
    c = cache()
    assert c.admit("k", "n1", 5_000, now_ms=5_500) is None
    assert c.admit("k", "n1", 5_000, now_ms=5_600) == "replayed"
    assert c.admit("other", "n1", 5_000, now_ms=5_600) is None  # nonces are per key
    assert c.admit("k", "n2", 3_999, now_ms=5_000) == "stale"
    assert c.admit("k", "n3", 6_001, now_ms=5_000) == "stale"
    assert c.admit("k", "n4", 6_000, now_ms=5_000) is None


def test_entries_expire_when_their_stamp_leaves_the_window():
    c = cache()
    for i in range(5):
        c.admit("k", f"n{i}", 10_000 + i, now_ms=10_000)
    assert len(c) == 5
    c.admit("k", "late", 11_003, now_ms=11_003)
    assert len(c) == 3  # stamps 10_000..10_002 are older than 11_003 - 1_000


def test_the_share_holds_under_any_rate_and_no_dropped_nonce_is_replayable():
    c = cache(skew_ms=60_000, total=1_000, per_key=100)
    for i in range(1_000):
        assert c.admit("k", f"n{i}", 1_000_000 + i, now_ms=1_000_000 + i) is None
        assert c.held_by("k") <= 100
    assert c.dropped == 900
    for i in range(1_000):
        assert c.admit("k", f"n{i}", 1_000_000 + i, now_ms=1_001_000) is not None


def test_the_share_is_the_total_divided_among_the_keys_when_that_is_less():
    c = ReplayCache(60_000, 30, 1_000, ["a", "b", "c"])
    assert c.share == 10
    for key in "abc":
        for i in range(50):
            c.admit(key, f"{key}{i}", 1_000_000 + i, now_ms=1_000_000)
    assert len(c) == 30 and all(c.held_by(k) == 10 for k in "abc")


def test_a_key_flooding_future_stamps_moves_only_its_own_floor():
    # The attack: 10,500 requests stamped 28 s ahead, past the key's share. Its floor rises to
    # the future; the other key's fresh requests go on being admitted all the while.
    c = cache(skew_ms=120_000, total=20_000, per_key=10_000, keys=("attacker", "admin"))
    now = 1_700_000_000_000
    for i in range(10_500):
        c.admit("attacker", f"flood-{i:05d}", now + 28_000 + i % 100, now_ms=now)
        if i % 1_000 == 0:
            assert c.admit("admin", f"fresh-{i:05d}", now, now_ms=now) is None
    assert c.floor_of("attacker") >= now + 28_000
    assert c.floor_of("admin") == -1
    assert c.admit("admin", "fresh-last", now + 1, now_ms=now + 1) is None
    assert c.admit("attacker", "own-fresh", now + 1, now_ms=now + 1) == "stale"
    assert len(c) <= 20_000


def test_a_key_that_does_not_take_the_strong_form_has_no_entries():
    with pytest.raises(KeyError):
        cache().admit("stranger", "n" * 16, 0, now_ms=0)


def test_bounds_must_be_positive_and_give_every_key_an_entry():
    with pytest.raises(ValueError):
        ReplayCache(0, 1, 1, ["k"])
    with pytest.raises(ValueError):
        ReplayCache(1, 1, 0, ["k"])
    with pytest.raises(ValueError):
        ReplayCache(1, 1, 1, ["k", "j"])
