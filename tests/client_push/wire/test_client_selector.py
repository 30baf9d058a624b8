"""Sticky name-server choice and reconnect backoff, with an injected Random."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_push.wire.backoff import Backoff
from client_push.wire.nameserver_selector import NameServerSelector

ADDRS = ["a:9876", "b:9876", "c:9876"]


def test_choice_is_random_among_the_list_and_sticky():
    picks = {NameServerSelector(ADDRS, random.Random(seed)).current for seed in range(50)}
    assert picks == set(ADDRS)
    sel = NameServerSelector(ADDRS, random.Random(1))
    first = sel.current
    assert all(sel.current == first for _ in range(10))


def test_failure_of_the_current_moves_to_another():
    sel = NameServerSelector(ADDRS, random.Random(2))
    first = sel.current
    assert sel.on_failure(first) != first


def test_failure_of_an_address_not_in_use_keeps_the_choice():
    sel = NameServerSelector(ADDRS, random.Random(3))
    first = sel.current
    other = next(a for a in ADDRS if a != first)
    assert sel.on_failure(other) == first


def test_single_address_stays_after_failure():
    sel = NameServerSelector(["only:9876"], random.Random(0))
    assert sel.on_failure("only:9876") == "only:9876"


def test_unchanged_list_keeps_the_choice_even_reordered():
    sel = NameServerSelector(ADDRS, random.Random(4))
    first = sel.current
    assert not sel.update(list(reversed(ADDRS)))
    assert sel.current == first


def test_changed_list_picks_afresh_from_the_new_list():
    sel = NameServerSelector(ADDRS, random.Random(5))
    sel.update(["x:1", "y:2"])
    assert sel.current in {"x:1", "y:2"}


def test_changed_list_reports_whether_the_choice_moved():
    sel = NameServerSelector(["a:1"], random.Random(0))
    assert sel.update(["b:1"]) is True
    assert sel.update(["b:1", "b:1"]) is False


def test_go_away_alternatives_are_preferred_over_the_own_list():
    sel = NameServerSelector(ADDRS, random.Random(6))
    leaving = sel.current
    assert sel.prefer(["alt:9876", leaving], leaving=leaving) == "alt:9876"


def test_go_away_without_alternatives_moves_within_the_own_list():
    sel = NameServerSelector(ADDRS, random.Random(7))
    leaving = sel.current
    assert sel.prefer([], leaving=leaving) in set(ADDRS) - {leaving}


def test_empty_list_is_refused():
    with pytest.raises(ValueError):
        NameServerSelector([], random.Random())


def test_backoff_doubles_up_to_the_maximum_with_jitter_in_the_upper_half():
    backoff = Backoff(200, 10_000, random.Random(0))
    ceilings = [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]
    for ceiling in ceilings:
        delay = backoff.next_delay_ms()
        assert ceiling / 2 <= delay <= ceiling


def test_backoff_reset_starts_from_the_initial_delay():
    backoff = Backoff(200, 10_000, random.Random(0))
    for _ in range(5):
        backoff.next_delay_ms()
    backoff.reset()
    assert backoff.next_delay_ms() <= 200


@given(st.integers(min_value=1, max_value=10_000), st.integers(min_value=0, max_value=2**32))
def test_backoff_never_exceeds_its_maximum(initial, seed):
    backoff = Backoff(initial, initial * 50, random.Random(seed))
    assert all(0 < backoff.next_delay_ms() <= initial * 50 for _ in range(80))
