"""Waiting for loopback traffic on the real reactor, in tests whose timers run on a fake clock.

Timers never move here; only sockets do. These helpers yield to the reactor until bytes in
flight have been delivered, so a test can assert on what arrived (or that nothing more did).
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet import reactor, task

STEP_S = 0.005


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Yield to the reactor until ``condition`` holds; fail after ``timeout`` seconds."""
    waited = 0.0
    while not condition():
        if waited >= timeout:
            raise AssertionError("condition not reached in time")
        await task.deferLater(reactor, STEP_S, lambda: None)
        waited += STEP_S


async def settle() -> None:
    """Let in-flight loopback exchanges finish (for asserting that nothing more is sent)."""
    for _ in range(10):
        await task.deferLater(reactor, STEP_S, lambda: None)
