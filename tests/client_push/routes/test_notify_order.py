"""Reading NOTIFY frames in order: sequence gaps and new epochs mean "refetch everything"."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from client_push.config import ClientConfig
from client_push.routes.push_actions import ForgetVersions, Refetch
from client_push.routes.push_session import PushSession, needs_refetch
from client_push.routes.route_cache import RouteCache
from protocol.push_events import RouteChanged


def session(epoch: str = "e1") -> tuple[PushSession, Counter[str]]:
    """A session holding topic T, its connection acknowledged in ``epoch``."""
    config = ClientConfig(namesrv_addrs=("10.0.0.9:9876",))
    cache = RouteCache(config.topic_idle_expiry_ms)
    cache.touch("T", 1_000)
    counters: Counter[str] = Counter()
    s = PushSession(
        config,
        cache,
        clock=lambda: 1.0,
        counters=counters,
        namesrv=lambda: "ns",
    )
    assert s.epoch_acked(epoch, "subscribe") is None
    return s, counters


def order(s: PushSession, counters: Counter[str], epoch: str, sequence: int) -> str:
    """What the session made of an empty frame: in order, a gap, a new epoch, or stale."""
    stale_before = counters["notify_stale"]
    actions = s.notified(RouteChanged((), sequence, 0, epoch))
    if counters["notify_stale"] > stale_before:
        assert actions == []
        return "stale"
    if not actions:
        return "in_order"
    if ForgetVersions() in actions:
        assert Refetch("T", "epoch") in actions
        return "epoch"
    assert actions == [Refetch("T", "gap")]
    return "gap"


def test_consecutive_sequences_from_one_are_in_order():
    s, c = session()
    assert [order(s, c, "e1", n) for n in (1, 2, 3)] == ["in_order"] * 3


def test_a_skipped_sequence_is_a_gap():
    s, c = session()
    order(s, c, "e1", 1)
    assert order(s, c, "e1", 3) == "gap"
    assert order(s, c, "e1", 4) == "in_order"


def test_a_first_frame_other_than_one_is_a_gap():
    s, c = session()
    assert order(s, c, "e1", 2) == "gap"


def test_a_repeated_or_older_sequence_is_stale():
    s, c = session()
    order(s, c, "e1", 1)
    order(s, c, "e1", 2)
    assert order(s, c, "e1", 2) == "stale"
    assert order(s, c, "e1", 1) == "stale"


def test_sequences_restart_on_a_new_connection():
    s, c = session()
    order(s, c, "e1", 1)
    order(s, c, "e1", 2)
    s.connected()
    assert order(s, c, "e1", 1) == "in_order"


def test_a_notify_of_another_epoch_is_a_new_epoch_then_counts_on_in_it():
    s, c = session("e1")
    assert order(s, c, "e2", 1) == "epoch"
    assert order(s, c, "e2", 2) == "in_order"
    assert s.epoch_acked("e2", "subscribe") is None


def test_an_ack_of_another_epoch_refetches_everything_but_the_first_ack_does_not():
    s, _ = session("e1")
    assert s.epoch_acked("e1", "subscribe") is None
    assert s.epoch_acked("e2", "subscribe") == [ForgetVersions(), Refetch("T", "epoch")]
    assert s.epoch_acked("e3", "reconnect") == [ForgetVersions(), Refetch("T", "reconnect")]


def test_refetch_unless_held_version_is_at_least_the_notified_one():
    assert needs_refetch(None, 1)
    assert needs_refetch(3, 4)
    assert not needs_refetch(4, 4)
    assert not needs_refetch(5, 4)


@given(st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=40))
def test_any_frame_after_a_gap_is_detected(sequences):
    """Whatever order frames come in, a jump past the next expected number is never silent."""
    s, c = session()
    last = 0
    for seq in sequences:
        seen = order(s, c, "e1", seq)
        if seq <= last:
            assert seen == "stale"
        elif seq == last + 1:
            assert seen == "in_order"
        else:
            assert seen == "gap"
        last = max(last, seq)
