"""Which name-server connection serves (``LinkState``), the pure rules both links follow:
current first, then one in its GoAway grace; a left connection closes once drained, except a
grace one, which its server closes."""

from __future__ import annotations

import random
from dataclasses import dataclass

from client_push.wire.backoff import Backoff
from client_push.wire.link_state import LinkState
from client_push.wire.nameserver_selector import NameServerSelector


@dataclass(eq=False)
class Conn:
    label: str
    connected: bool = True
    pending: int = 0


def state(*addrs: str) -> LinkState[Conn]:
    rng = random.Random(2)
    return LinkState(NameServerSelector(addrs, rng), Backoff(200, 10_000, rng))


def test_only_a_connection_to_the_chosen_server_is_taken_and_only_one():
    s = state("a:1")
    assert s.connecting() == "a:1"
    first, second = Conn("a:1"), Conn("a:1")
    assert s.accept(first, "a:1") and s.current is first
    assert not s.accept(second, "a:1")
    assert not s.accept(Conn("b:1"), "b:1")
    assert (s.connects, s.usable()) == (1, first)


def test_after_a_oneway_go_away_the_old_server_serves_until_another_connection_is_up():
    s = state("a:1", "b:1")
    old = Conn(s.connecting())
    s.accept(old, old.label)
    other = "b:1" if old.label == "a:1" else "a:1"
    assert s.go_away(old, [other])
    assert s.leave(fallback=True) is old
    assert s.selector.current == other
    assert s.usable() is old and not s.drained(old)  # its server closes it after the grace
    new = Conn(s.connecting())
    assert s.target == other
    assert s.accept(new, other) and s.usable() is new
    assert not s.lost(old)  # a left connection closing is no loss of push
    assert s.open == {new}


def test_a_connection_left_for_a_go_away_answer_serves_nothing_and_closes_when_drained():
    s = state("a:1", "b:1")
    old = Conn(s.connecting(), pending=1)
    s.accept(old, old.label)
    assert s.go_away(old, [])
    s.leave(fallback=False)
    assert s.usable() is None and not s.drained(old)
    old.pending = 0
    assert s.drained(old)
    assert not s.go_away(old, [])  # not current any more: nothing to move


def test_losing_the_current_connection_is_reported_and_reconnects_back_off():
    s = state("a:1")
    conn = Conn(s.connecting())
    s.accept(conn, "a:1")
    assert s.lost(conn) and s.current is None
    delays = [s.reconnect_delay_ms() for _ in range(4)]
    assert delays[-1] > delays[0]
    s.connect_failed("a:1")
    assert s.connect_failures == 1
    worked = Conn("a:1")
    assert s.accept(worked, "a:1")
    assert s.lost(worked)  # it worked: the backoff starts again
    assert s.reconnect_delay_ms() <= 200
    assert s.accept(Conn("a:1"), "a:1")
    current = s.current
    assert s.stop() == [current] and s.stopped and s.current is None
    assert not s.accept(Conn("a:1"), "a:1")


def test_connections_closed_before_their_server_answered_back_off_to_the_cap():
    """A server that accepts and closes at once (a TLS mismatch) is retried ever more slowly."""
    s = state("a:1")
    delays = []
    for _ in range(12):
        conn = Conn(s.connecting())
        assert s.accept(conn, "a:1")
        assert s.lost(conn, worked=False)
        delays.append(s.reconnect_delay_ms())
    assert delays[-1] > 20 * delays[0]
    assert all(5_000 <= d <= 10_000 for d in delays[-4:])  # drawn in [cap/2, cap]
