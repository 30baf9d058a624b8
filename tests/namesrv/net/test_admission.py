"""Admission on its own: connection bounds, and one error per file-descriptor episode."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from namesrv.config import ServerConfig
from namesrv.net.admission import Admission
from namesrv.ops.log_limit import RateLimitedLog


class Peer:
    def __init__(self, conn_id: int, host: str = "10.0.0.1") -> None:
        self.conn_id = conn_id
        self.host = host
        self.peer = f"{host}:{conn_id}"


def admission(**server: Any) -> tuple[Admission, Counter[str]]:
    counters: Counter[str] = Counter()
    log = RateLimitedLog(logging.getLogger(__name__))
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
