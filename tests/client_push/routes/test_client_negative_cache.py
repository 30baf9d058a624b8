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
    assert info.value.retry_in_ms == 1
    assert "missing" in str(info.value) and "asked again in 1 ms" in str(info.value)
    assert cache.hits == 1


def test_the_message_says_how_long_until_the_retry_not_the_clock_reading():
    now = 1_795_597_887_848  # a wall-clock-like reading on the injected clock
    cache = NegativeCache(ttl_ms=30_000)
    cache.put("missing", now_ms=now)
    with pytest.raises(TopicNotExistError) as info:
        cache.check("missing", now_ms=now + 12_000)
    assert info.value.retry_at_ms == now + 30_000
    assert info.value.retry_in_ms == 18_000
    assert str(info.value) == (
        "topic 'missing' does not exist (remembered absence); the name server is asked again "
        "in 18000 ms unless a CREATED notification arrives first"
    )
    assert str(now + 30_000) not in str(info.value)


def test_without_the_current_time_the_message_labels_the_retry_moment_as_a_clock_reading():
    error = TopicNotExistError("T", 31_000)
    assert error.retry_in_ms is None
    assert "asked again from 31000 ms on the client's clock" in str(error)
    assert str(TopicNotExistError("T")) == (
        "topic 'T' does not exist (name server answered TOPIC_NOT_EXIST)"
    )


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
