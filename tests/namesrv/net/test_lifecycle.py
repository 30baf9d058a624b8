"""Timers and stopping: a timer's call that raises is counted and runs again at its next
interval, beside the others, and stopping stops every timer; every close step runs whatever the
one before raised (counted), a second stop is the first, and with nobody connected there is no
grace period to wait through."""

from __future__ import annotations

from collections import Counter

from twisted.internet import task

from namesrv.config import ServerConfig
from namesrv.net.hub import ConnectionHub
from namesrv.net.lifecycle import ListeningPorts, Shutdown, Timers
from namesrv.requests.route_response_cache import RouteResponseCache


def test_a_failing_call_is_counted_and_its_timer_runs_on() -> None:
    clock = task.Clock()
    counters: Counter[str] = Counter()
    timers = Timers(clock, counters)
    slow: list[float] = []
    fast: list[float] = []

    def fails_once() -> None:
        slow.append(clock.seconds())
        if len(slow) == 1:
            raise RuntimeError("the first call fails")

    timers.every(1_000, fails_once)
    timers.every(250, lambda: fast.append(clock.seconds()))
    clock.pump([0.25] * 4)
    assert counters["timer_errors"] == 1
    clock.pump([0.25] * 4)
    assert slow == [1.0, 2.0]
    assert fast == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    timers.stop()
    clock.pump([0.25] * 20)
    assert (slow, len(fast)) == ([1.0, 2.0], 8)
    assert counters["timer_errors"] == 1


def shutdown_of(clock: task.Clock, counters: Counter[str]) -> Shutdown:
    config = ServerConfig(shutdown_grace_ms=5_000)
    hub = ConnectionHub(
        config,
        reactor=clock,
        clock=clock,
        counters=counters,
        route_cache=RouteResponseCache(),
        frame_received=lambda conn, command, frame: None,
        departed=lambda conn: None,
        keeps_idle=lambda conn: False,
        never_evict=lambda conn: False,
    )
    return Shutdown(config, hub, ListeningPorts(clock, hub, counters, clock), clock, counters)


def test_a_failing_step_is_counted_and_the_later_steps_still_run() -> None:
    clock, counters = task.Clock(), Counter[str]()
    ran: list[str] = []

    def fails() -> None:
        ran.append("fails")
        raise OSError("the disk is gone")

    stopped = shutdown_of(clock, counters).stop(
        None, [lambda: ran.append("first"), fails, lambda: ran.append("last")]
    )
    assert ran == ["first", "fails", "last"]  # nobody connected: no grace to wait through
    assert counters["shutdown_errors"] == 1
    assert stopped.called


def test_stopping_twice_is_one_stop() -> None:
    clock, counters = task.Clock(), Counter[str]()
    ran: list[str] = []
    shutdown = shutdown_of(clock, counters)
    first = shutdown.stop(0, [lambda: ran.append("close")])
    assert shutdown.stop(0, [lambda: ran.append("again")]) is first
    assert ran == ["close"]
