"""Driving a producer's sends on loopback while its timers run on a fake clock."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, reactor, task

STEP_S = 0.02


async def drive(clock: task.Clock, d: defer.Deferred[Any], max_steps: int = 5_000) -> Any:
    """Let loopback traffic run, advancing ``clock`` by ``STEP_S`` while ``d`` waits on a
    timer; the result of ``d`` (or its error raised)."""
    for _ in range(max_steps):
        for _ in range(3):
            if d.called:
                return await d
            await task.deferLater(reactor, 0.001, lambda: None)
        clock.advance(STEP_S)
    raise AssertionError("send did not finish")


async def run_for(clock: task.Clock, seconds: float) -> None:
    """Advance ``clock`` by ``seconds`` in steps, letting loopback traffic run between them."""
    for _ in range(round(seconds / STEP_S)):
        for _ in range(3):
            await task.deferLater(reactor, 0.001, lambda: None)
        clock.advance(STEP_S)
