"""Admission on its own: connection bounds, and one error per file-descriptor episode."""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from typing import Any

from namesrv.config import ServerConfig
from namesrv.net.admission import FD_RELAPSE_S, Admission
from protocol.paced_log import PacedLog


class Peer:
    def __init__(self, conn_id: int, host: str = "10.0.0.1") -> None:
        self.conn_id = conn_id
        self.host = host
        self.peer = f"{host}:{conn_id}"


def admission(**server: Any) -> tuple[Admission, Counter[str]]:
    counters: Counter[str] = Counter()
    log = PacedLog(logging.getLogger(__name__))
    return Admission(ServerConfig(**server), counters, log), counters


def test_connections_past_a_bound_are_refused_and_a_release_makes_room():
    gate, counters = admission(max_connections=3, max_connections_per_host=2)
    a, b, c, d = Peer(1), Peer(2), Peer(3), Peer(4, "10.0.0.2")
    assert [gate.admit(p) for p in (a, b, c, d)] == [True, True, False, True]
    assert counters["connections_refused.max_connections_per_host"] == 1
    assert not gate.admit(Peer(5, "10.0.0.3"))
    assert counters["connections_refused.max_connections"] == 1
    assert gate.release(a) and not gate.release(a) and not gate.release(c)
    assert gate.admit(c) and list(gate.connections) == [2, 4, 3]
    assert counters["connections_opened"] == 4 and counters["connections_closed"] == 1


def test_running_out_of_descriptors_logs_once_per_episode(caplog):
    gate, counters = admission()
    peers = [Peer(i, f"10.0.1.{i}") for i in range(10)]
    for p in peers:
        gate.admit(p)
    refused = {"log_format": "EMFILE encountered; releasing reserved file descriptor."}
    with caplog.at_level(logging.WARNING, logger="namesrv.net.admission"):
        for _ in range(3):
            gate.twisted_log_event(refused)
        gate.twisted_log_event({"log_format": "something else"})
        gate.release(peers[0])
        gate.admit(Peer(99))  # 9 open: not below nine tenths of the 10 it began with
        gate.release(peers[1])
        gate.release(peers[2])
        gate.admit(Peer(100))  # 8 open, below 9 (nine tenths of 10): the episode ends
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert counters["accept_failures"] == 3 and len(errors) == 1
    assert "out of file descriptors" in errors[0].getMessage()
    again = [
        r.getMessage() for r in caplog.records if "accepting connections again" in r.getMessage()
    ]
    assert again == ["accepting connections again; 3 were refused while file descriptors ran out"]


def test_refusals_soon_after_an_episode_ended_resume_it_without_a_second_error(caplog):
    # Connections the kernel queued while descriptors were out are accepted as soon as some
    # close, and can run them out again at once: the same shortage, one error.
    now = [100.0]
    counters: Counter[str] = Counter()
    gate = Admission(
        ServerConfig(), counters, PacedLog(logging.getLogger(__name__)), clock=lambda: now[0]
    )
    peers = [Peer(i, f"10.0.2.{i}") for i in range(10)]
    for p in peers:
        gate.admit(p)
    refused = {"log_format": "EMFILE encountered; releasing reserved file descriptor."}
    ids = itertools.count(100)

    def episode(refusals: int) -> None:
        for _ in range(refusals):
            gate.twisted_log_event(refused)
        gate.release(peers.pop())
        gate.release(peers.pop())
        peers.append(Peer(next(ids), "10.0.3.1"))
        gate.admit(peers[-1])  # below nine tenths of the count it began with: it ends

    with caplog.at_level(logging.WARNING, logger="namesrv.net.admission"):
        episode(2)
        now[0] += FD_RELAPSE_S - 1
        episode(3)
        now[0] += FD_RELAPSE_S
        episode(1)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    again = [
        r.getMessage() for r in caplog.records if "accepting connections again" in r.getMessage()
    ]
    assert counters["accept_failures"] == 6
    assert len(errors) == 2 and all("out of file descriptors" in e for e in errors)
    assert again == [
        "accepting connections again; 2 were refused while file descriptors ran out",
        "accepting connections again; 3 were refused while file descriptors ran out",
        "accepting connections again; 1 were refused while file descriptors ran out",
    ]


# -- room at the total bound ------------------------------------------------------------------


class Idle(Peer):
    def __init__(
        self,
        conn_id: int,
        host: str,
        last_request_ms: int,
        *,
        kept: bool = False,
        subscribed: bool = False,
    ):
        super().__init__(conn_id, host)
        self.last_request_ms = last_request_ms
        self.kept = kept
        """True: a broker's channel, or a connection with a request in service (never closed
        to make room)."""
        self.subscribed = subscribed


class Evictable:
    """``may_evict`` for the gate: a connection may go unless it is marked kept; calls are
    counted (a search reads the busier hosts' connections)."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, conn: Any) -> bool:
        self.asked += 1
        return not conn.kept


def full_gate(peers: list[Idle], **server: Any) -> tuple[Admission, Counter[str], Evictable]:
    counters: Counter[str] = Counter()
    log = PacedLog(logging.getLogger(__name__))
    may_evict = Evictable()
    gate = Admission(
        ServerConfig(**server), counters, log, may_evict, subscribed=lambda c: c.subscribed
    )
    assert all(gate.admit(p) for p in peers) and gate.full
    return gate, counters, may_evict


def test_a_few_hosts_holding_the_total_bound_make_room_for_another_host():
    hog = [Idle(i, "10.0.0.1", ms) for i, ms in enumerate((10, 5, 20, 30))]
    gate, counters, _ = full_gate(
        [*hog, Idle(10, "10.0.0.2", 1), Idle(11, "10.0.0.2", 2)],
        max_connections=6,
        max_connections_per_host=5,
    )
    newcomer = Idle(20, "10.0.0.9", 100)
    victim = gate.make_room(newcomer, now_ms=100)
    assert victim is hog[1]  # the busiest host's connection idle longest, not 10.0.0.2's older
    assert counters["connections_evicted.max_connections"] == 1
    assert gate.release(victim) and gate.admit(newcomer)
    assert len(gate.connections) == 6 and counters["connections_refused.max_connections"] == 0


def test_broker_channels_and_requests_in_service_are_never_closed_to_make_room():
    kept = [Idle(i, "10.0.0.1", 1, kept=True) for i in range(3)]
    idle = Idle(3, "10.0.0.1", 50)
    gate, _counters, _ = full_gate(
        [*kept, idle, Idle(10, "10.0.0.2", 0, kept=True), Idle(11, "10.0.0.2", 0)],
        max_connections=6,
        max_connections_per_host=5,
    )
    assert gate.make_room(Idle(20, "10.0.0.9", 100), now_ms=100) is idle
    gate.release(idle)
    gate.admit(Idle(20, "10.0.0.9", 100))
    # 10.0.0.1 now holds only kept connections: the next busier host gives its idle one.
    second = gate.make_room(Idle(21, "10.0.0.8", 100), now_ms=100)
    assert second is not None and second.conn_id == 11


def test_when_every_connection_of_a_busier_host_is_kept_the_newcomer_is_refused_as_before():
    peers = [Idle(i, "10.0.0.1", 1, kept=True) for i in range(3)]
    gate, counters, may_evict = full_gate(
        [*peers, Idle(10, "10.0.0.2", 0)], max_connections=4, max_connections_per_host=4
    )
    newcomer = Idle(20, "10.0.0.9", 100)
    assert gate.make_room(newcomer, now_ms=100) is None
    assert not gate.admit(newcomer)
    assert counters["connections_refused.max_connections"] == 1
    assert "connections_evicted.max_connections" not in counters
    # 10.0.0.2 holds one, not two more than the newcomer's host: it was not searched.
    assert may_evict.asked == 3
    # Refused newcomers do not search again until the retry time has passed ...
    assert gate.make_room(Idle(21, "10.0.0.9", 500), now_ms=500) is None
    assert may_evict.asked == 3
    peers[0].kept = False
    # ... after which a search finds the connection that may now go.
    assert gate.make_room(Idle(22, "10.0.0.9", 1_100), now_ms=1_100) is peers[0]


def test_no_room_is_made_between_hosts_holding_about_as_many():
    peers = [Idle(i, "10.0.0.1", 0) for i in range(3)]
    gate, counters, _ = full_gate(
        [*peers, Idle(10, "10.0.0.2", 0), Idle(11, "10.0.0.2", 0)],
        max_connections=5,
        max_connections_per_host=3,
    )
    # 10.0.0.2 holds 2, the busiest 3: closing one would only turn the tables.
    assert gate.make_room(Idle(20, "10.0.0.2", 9), now_ms=9) is None
    # A host at its per-host bound is refused for it; no room is made for it.
    assert gate.make_room(Idle(21, "10.0.0.1", 9), now_ms=9) is None
    assert "connections_evicted.max_connections" not in counters
    # Without ``may_evict`` (the default) no room is ever made.
    plain, _ = admission(max_connections=1)
    plain.admit(Idle(1, "10.0.0.1", 0))
    plain.admit(Idle(2, "10.0.0.1", 0))
    assert plain.make_room(Idle(3, "10.0.0.9", 0), now_ms=0) is None


def test_a_subscribed_connection_goes_after_the_idle_ones_of_hosts_as_busy():
    subscriber = Idle(0, "10.0.0.1", 1, subscribed=True)
    idle = Idle(10, "10.0.0.2", 40)
    gate, counters, _ = full_gate(
        [subscriber, Idle(1, "10.0.0.1", 50, kept=True), idle, Idle(11, "10.0.0.2", 60)],
        max_connections=4,
        max_connections_per_host=4,
    )
    # Both hosts hold two: the unsubscribed one idle longest goes, not the older subscriber.
    assert gate.make_room(Idle(20, "10.0.0.9", 100), now_ms=100) is idle
    assert "subscribers_evicted" not in counters
    gate.release(idle)
    gate.admit(Idle(20, "10.0.0.9", 100))
    # 10.0.0.1 is now the only host holding two: its subscriber goes, its broker stays.
    assert gate.make_room(Idle(21, "10.0.0.8", 100), now_ms=100) is subscriber
    assert counters["subscribers_evicted"] == 1
