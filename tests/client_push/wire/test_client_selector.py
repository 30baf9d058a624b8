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


def test_a_warming_server_is_left_for_one_up_longer_and_never_for_one_that_failed():
    sel = NameServerSelector(["a:1", "b:1"], random.Random(1), move_interval_ms=10_000)
    sel._current = "a:1"
    assert sel.server_up("a:1", 500, True, 1_000) == "b:1"  # b never heard from
    assert sel.current == "b:1"
    assert sel.server_up("b:1", 900_000, False, 1_100) is None  # up long: stay
    assert sel.on_failure("b:1") == "a:1"
    assert sel.server_up("a:1", 3_000, True, 20_000) is None  # b failed since: stay


def test_two_servers_claiming_short_uptimes_move_the_client_once_per_interval_at_most():
    """Hostile servers, each always warming and always claiming to be younger than the other:
    moves stay one per ``move_interval_ms``."""
    sel = NameServerSelector(["a:1", "b:1"], random.Random(1), move_interval_ms=10_000)
    moves = 0
    for now in range(0, 600_000, 100):  # an ack every 100 ms for ten minutes
        if sel.server_up(sel.current, 1, True, now) is not None:
            moves += 1
    assert moves <= 600_000 // 10_000 + 1
