"""``RouteClient.changes``: the async iterator of route states, its per-topic bound and its
closing; and the action runner's refusal of an action it has no handler for. Run on Twisted,
plain asyncio and uvloop against the frame-speaking fake name server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import pytest_twisted
from support.aio_world import AioWorld
from support.fake_namesrv import make_route
from support.loopback_wait import until
from twisted.internet import defer

from client_push.aio import RouteChanges, UnknownActionError
from protocol.codes import Perm, RequestCode
from protocol.push_codec import ChangeKind


@pytest.fixture
def world(any_loop) -> Iterator[AioWorld]:
    w = AioWorld(any_loop)
    yield w
    pytest_twisted.blockon(defer.ensureDeferred(w.close()))


async def take(stream: RouteChanges, count: int) -> list:
    out = []
    async for change in stream:
        out.append(change)
        if len(out) == count:
            break
    return out


@pytest_twisted.ensureDeferred
async def test_a_stream_starts_with_the_held_route_then_yields_each_change(world):
    client = await world.client()
    world.ns.set_route("T", make_route())
    await world.run(client.get_route("T"))
    await until(lambda: client.push_active)
    stream = await world.call(client.changes, ["T"])
    (first,) = await world.run(take(stream, 1))
    assert (first.cause, first.version) == ("cached", 1)
    # ``break`` ended the iteration: the stream is closed, its listener gone.
    await until(lambda: client.outstanding()["streams"] == 0)
    assert client.outstanding()["route_listeners"] == 0
    stream = await world.call(client.changes, ["T"])
    v2 = world.ns.set_route("T", make_route(perm=Perm.READ))
    world.ns.notify([("T", v2, ChangeKind.UPDATED)])
    changes = await world.run(take(stream, 2))
    assert [(c.cause, c.version) for c in changes] == [("cached", 1), ("notify", v2)]
    assert not changes[1].route.publish_info.ok


@pytest_twisted.ensureDeferred
async def test_a_slow_reader_holds_one_state_per_topic_the_newest(world):
    client = await world.client()
    world.ns.set_route("T", make_route())
    world.ns.set_route("U", make_route())
    stream = await world.call(client.changes, ["T", "U"])
    await until(lambda: client.push_active and "U" in world.ns.subscribed())
    for queues in range(1, 41):
        version = world.ns.set_route("T", make_route(queues=queues))
        world.ns.notify([("T", version, ChangeKind.UPDATED)])
    await until(lambda: client.cached_route("T").version == version)
    assert stream.waiting == 2  # never more than one per topic
    assert stream.coalesced >= 1
    changes = await world.run(take(stream, 2))
    assert {(c.topic, c.version) for c in changes} == {("T", version), ("U", 1)}


@pytest_twisted.ensureDeferred
async def test_closing_a_stream_releases_the_topics_only_it_held(world):
    client = await world.client()
    world.ns.set_route("T", make_route())
    world.ns.set_route("kept", make_route())
    await world.run(client.get_route("kept"))
    stream = await world.call(client.changes, ["T", "kept"])
    await until(lambda: world.ns.subscribed() == {"T", "kept"} and client.push_active)
    await world.run(stream.aclose())
    await until(lambda: world.ns.subscribed() == {"kept"})
    assert client.held_topics() == ["kept"]
    out = await world.outstanding(client)
    assert (out["streams"], out["route_listeners"]) == (0, 0)
    assert world.ns.count(RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED) == 1


@pytest_twisted.ensureDeferred
async def test_closing_the_client_ends_a_reader_waiting_for_a_change(world):
    client = await world.client()
    world.ns.set_route("T", make_route())
    stream = await world.call(client.changes, ["T"])
    assert (await world.run(stream.next())).version == 1

    async def read_all() -> int:
        return len([c async for c in stream])

    reader = world.run(read_all())
    await world.close_client(client)
    assert await reader == 0


@dataclass(frozen=True)
class Unheard:
    topic: str


@pytest_twisted.ensureDeferred
async def test_an_action_without_a_handler_fails_loudly(world):
    client = await world.client()

    async def run_unknown() -> None:
        client._run([Unheard("T")], None)

    with pytest.raises(UnknownActionError, match="Unheard"):
        await world.run(run_unknown())
    assert client.counters["internal_errors"] == 1


@pytest_twisted.ensureDeferred
async def test_cancelling_the_reading_task_closes_its_stream(world):
    client = await world.client()
    world.ns.set_route("T", make_route())
    stream = await world.call(client.changes, ["T"])

    async def read() -> None:
        async for _ in stream:
            pass

    reader = await world.loop.spawn(read())
    await until(lambda: client.cached_route("T") is not None and stream.waiting == 0)

    assert await world.loop.cancel(reader)
    assert stream.closed
    out = await world.outstanding(client)
    assert (out["streams"], out["route_listeners"]) == (0, 0)
    await until(lambda: world.ns.subscribed() == set())
