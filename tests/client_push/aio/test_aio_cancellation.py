"""Clean cancellation in the asyncio route client: a lookup given up or a stream closed leaves
no request, timer, waiter, listener or subscription behind (checked in the client's tables and
at the name server). Run on Twisted, plain asyncio and uvloop: the client is one.

A client's state is read on its own loop (``world.call``), never from the reactor's thread
while the loop's thread changes it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import pytest_twisted
from support.aio_world import PERIODIC_TIMERS, AioWorld
from support.fake_namesrv import make_route
from support.loopback_wait import until, until_read
from twisted.internet import defer

from protocol.codes import RequestCode

GET = RequestCode.GET_ROUTEINFO_BY_TOPIC


@pytest.fixture
def world(any_loop) -> Iterator[AioWorld]:
    w = AioWorld(any_loop)
    yield w
    pytest_twisted.blockon(defer.ensureDeferred(w.close()))


async def spawn_lookup(world: AioWorld, client, topic: str) -> Any:
    """A lookup started as a task of the client's loop (a Deferred on Twisted)."""
    return await world.loop.spawn(client.get_route(topic))


async def cancel(world: AioWorld, task: Any) -> bool:
    """Cancel the task on its loop; True once it has ended cancelled."""
    return await world.loop.cancel(task)


async def until_on_loop(world: AioWorld, condition: Callable[[], bool]) -> None:
    """Wait until ``condition`` holds, read on the client's loop."""
    await until_read(lambda: world.call(condition))


def nothing_left(out: dict[str, int]) -> dict[str, int]:
    """The tables that must be empty once nothing is held or asked for."""
    return {k: v for k, v in out.items() if k != "timers" and v}


@pytest_twisted.ensureDeferred
async def test_a_cancelled_first_lookup_leaves_no_request_timer_or_subscription(world):
    client = await world.client()
    world.ns.set_route("T", make_route())
    await until_on_loop(world, lambda: client.connected)
    world.ns.hold_gets = True
    task = await spawn_lookup(world, client, "T")
    await until(lambda: len(world.ns.held_gets) == 1)
    await until_on_loop(world, lambda: client.push_active)
    out = await world.outstanding(client)
    assert (out["requests"], out["fetches"], out["held_topics"]) == (1, 1, 1)
    assert await cancel(world, task)
    await until(lambda: world.ns.subscribed() == set())  # UNSUBSCRIBE sent for it
    await until_on_loop(world, lambda: client.outstanding()["push_requests"] == 0)  # answered
    out = await world.outstanding(client)
    assert nothing_left(out) == {}
    assert out["timers"] == PERIODIC_TIMERS
    assert await world.call(world.clock(client).pending) == PERIODIC_TIMERS  # no request timeout
    world.ns.release_gets()  # the answer arrives late, to a request the client dropped
    world.ns.hold_gets = False
    world.ns.set_route("U", make_route())
    # Answered on the same connection after the late answer: that one has been read by now.
    later = await world.loop.result(await spawn_lookup(world, client, "U"))
    assert later.version == 1
    held = await world.call(
        lambda: (client.cached_route("T"), client.held_topics(), client.counters.copy())
    )
    assert held[:2] == (None, ["U"])
    assert held[2]["lookups_cancelled"] == 1


@pytest_twisted.ensureDeferred
async def test_a_cancelled_lookup_leaves_the_fetch_to_another_caller_of_the_same_topic(world):
    client = await world.client()
    world.ns.set_route("T", make_route())
    await until_on_loop(world, lambda: client.connected)
    world.ns.hold_gets = True
    first = await spawn_lookup(world, client, "T")
    second = await spawn_lookup(world, client, "T")
    await until(lambda: len(world.ns.held_gets) == 1)
    await until_on_loop(world, lambda: client.push_active)  # the lookup's SUBSCRIBE answered
    assert await cancel(world, first)
    out = await world.outstanding(client)
    assert (out["fetches"], out["fetch_waiters"], out["requests"]) == (1, 1, 1)
    world.ns.hold_gets = False
    world.ns.release_gets()
    entry = await world.loop.result(second)
    assert entry.version == 1
    assert world.ns.count(GET) == 1
    assert nothing_left(await world.outstanding(client)) == {"held_topics": 1, "subscribed": 1}


@pytest_twisted.ensureDeferred
async def test_a_lookup_cancelled_while_waiting_for_a_connection_leaves_no_waiter_or_timer(
    world,
):
    client = await world.client()
    await until_on_loop(world, lambda: client.connected)
    await world.ns.close()
    await until_on_loop(world, lambda: not client.connected)
    task = await spawn_lookup(world, client, "T")
    await until_on_loop(world, lambda: client.outstanding()["waiting_for_connection"] == 1)
    assert await world.call(world.clock(client).pending) == PERIODIC_TIMERS + 2  # + reconnect
    assert await cancel(world, task)
    out = await world.outstanding(client)
    assert nothing_left(out) == {}
    assert out["timers"] == PERIODIC_TIMERS + 1  # the reconnect stays armed
    assert await world.call(world.clock(client).pending) == PERIODIC_TIMERS + 1
