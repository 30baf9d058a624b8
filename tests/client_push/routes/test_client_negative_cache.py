"""Negative cache: absences believed for a TTL, then asked again; CREATED clears at once."""

from __future__ import annotations

import pytest

from client_push.errors import TopicNotExistError
from client_push.routes.negative_cache import NegativeCache


def test_lookup_inside_ttl_fails_fast_naming_topic_and_retry_time():
    cache = NegativeCache(ttl_ms=30_000)
    cache.put("missing", now_ms=1_000)
    with pytest.raises(TopicNotExistError) as info:
        cache.check("missing", now_ms=30_999)
    assert info.value.topic == "missing"
    assert info.value.retry_at_ms == 31_000
    assert info.value.cached
    assert "missing" in str(info.value) and "31000" in str(info.value)
    assert cache.hits == 1


def test_lookup_after_ttl_passes_and_forgets_the_entry():
    cache = NegativeCache(ttl_ms=30_000)
    cache.put("missing", now_ms=0)
    cache.check("missing", now_ms=30_000)
    assert "missing" not in cache


def test_clear_forgets_an_absence_before_its_ttl():
    cache = NegativeCache(ttl_ms=30_000)
    cache.put("T", 0)
    assert cache.clear("T")
    cache.check("T", 1)
    assert not cache.clear("T")


def test_zero_ttl_remembers_nothing():
    cache = NegativeCache(ttl_ms=0)
    cache.put("T", 0)
    cache.check("T", 0)
    assert len(cache) == 0


def test_is_absent_does_not_count_a_hit():
    cache = NegativeCache(ttl_ms=10)
    cache.put("T", 0)
    assert cache.is_absent("T", 9) and not cache.is_absent("T", 10)
    assert cache.hits == 0
