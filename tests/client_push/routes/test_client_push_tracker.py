"""Reading NOTIFY frames: sequence gaps and new epochs mean "refetch everything"."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client_push.routes.push_tracker import PushTracker, Verdict, needs_refetch


def tracker(epoch: str = "e1") -> PushTracker:
    t = PushTracker()
    t.on_ack(epoch)
    return t


def test_consecutive_sequences_from_one_are_in_order():
    t = tracker()
    assert [t.on_notify("e1", s) for s in (1, 2, 3)] == [Verdict.IN_ORDER] * 3


def test_a_skipped_sequence_is_a_gap():
    t = tracker()
    t.on_notify("e1", 1)
    assert t.on_notify("e1", 3) is Verdict.GAP
    assert t.on_notify("e1", 4) is Verdict.IN_ORDER


def test_a_first_frame_other_than_one_is_a_gap():
    assert tracker().on_notify("e1", 2) is Verdict.GAP


def test_a_repeated_or_older_sequence_is_stale():
    t = tracker()
    t.on_notify("e1", 1)
    t.on_notify("e1", 2)
    assert t.on_notify("e1", 2) is Verdict.STALE
    assert t.on_notify("e1", 1) is Verdict.STALE


def test_sequences_restart_on_a_new_connection():
    t = tracker()
    t.on_notify("e1", 1)
    t.on_notify("e1", 2)
    t.new_connection()
    assert t.on_notify("e1", 1) is Verdict.IN_ORDER


def test_a_notify_of_another_epoch_is_a_new_epoch():
    t = tracker("e1")
    assert t.on_notify("e2", 1) is Verdict.NEW_EPOCH
    assert t.epoch == "e2"
    assert t.on_notify("e2", 2) is Verdict.IN_ORDER


def test_an_ack_of_another_epoch_reports_the_change_but_the_first_ack_does_not():
    t = PushTracker()
    assert not t.on_ack("e1")
    assert not t.on_ack("e1")
    assert t.on_ack("e2")


def test_refetch_unless_held_version_is_at_least_the_notified_one():
    assert needs_refetch(None, 1)
    assert needs_refetch(3, 4)
    assert not needs_refetch(4, 4)
    assert not needs_refetch(5, 4)


@given(st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=40))
def test_any_frame_after_a_gap_is_detected(sequences):
    """Whatever order frames come in, a jump past the next expected number is never silent."""
    t = tracker()
    last = 0
    for seq in sequences:
        verdict = t.on_notify("e1", seq)
        if seq <= last:
            assert verdict is Verdict.STALE
        elif seq == last + 1:
            assert verdict is Verdict.IN_ORDER
        else:
            assert verdict is Verdict.GAP
        last = max(last, seq)
