"""Waiting for loopback traffic on the real reactor, in tests whose timers run on a fake clock.

Timers never move here; only sockets do. These helpers yield to the reactor until a condition
holds. They prove that something happened; to prove that something did not, a test makes a
round trip (a request whose answer comes after the bytes in question) or waits for an explicit
event, never for a fixed time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

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


async def until_read(probe: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    """Like :func:`until` for state owned by another thread: ``probe`` reads it where it lives
    (``LoopThread.call``, say) and answers whether the condition holds."""
    waited = 0.0
    while not await probe():
        if waited >= timeout:
            raise AssertionError("condition not reached in time")
        await task.deferLater(reactor, STEP_S, lambda: None)
        waited += STEP_S


def server_side(server: Any, client: Any) -> Any | None:
    """The name server's connection of ``client`` (a loopback peer of it), or None before the
    server has accepted it and after the server has let it go."""
    local = client.transport.getHost()
    peer = f"{local.host}:{local.port}"
    for conn in server.connections.values():
        if conn.peer == peer:
            return conn
    return None
