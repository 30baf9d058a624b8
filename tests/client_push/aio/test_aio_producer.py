"""The asyncio producer as an application writes it (README): ``async with`` a route client and
a producer on the loop's own clock, sending to a broker stand-in registered with the real name
server. The behaviour shared with the Twisted producer is in tests/client_push/behaviour/."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import reactor

from client_push import aio
from client_push.errors import TopicNotExistError
from client_push.producer.send_answer import SendStatus
from namesrv_sandbox.standin import BrokerStandIn
from protocol.message import MessageError


@pytest_twisted.ensureDeferred
async def test_async_with_a_route_client_and_a_producer_sends_on_the_loops_clock(
    cluster, loop_thread
):
    _server, port = cluster.start_server()
    broker = BrokerStandIn(
        "broker-a", {"T": 4}, [f"127.0.0.1:{port}"], reactor=reactor, clock=cluster.clock
    )
    await broker.start()
    config = aio.ClientConfig(namesrv_addrs=(f"127.0.0.1:{port}",))

    async def app() -> tuple[list[aio.SendResult], dict[str, int], list[str]]:
        errors = []
        async with (
            aio.RouteClient(config) as client,
            aio.Producer(client, "app-group", aio.ProducerConfig()) as producer,
        ):
            results = [await producer.send("T", b"order %d" % i, keys=[f"o{i}"]) for i in range(5)]
            for bad in (lambda: producer.send("T", b""), lambda: producer.send("NONE", b"x")):
                try:
                    await bad()
                except (MessageError, TopicNotExistError) as exc:
                    errors.append(type(exc).__name__)
            left = producer.outstanding()
        return results, left, errors

    try:
        results, left, errors = await loop_thread.run(app())
    finally:
        await broker.kill()
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert [m.body for m in broker.messages] == [b"order %d" % i for i in range(5)]
    assert [m.keys for m in broker.messages] == [(f"o{i}",) for i in range(5)]
    assert errors == ["MessageError", "TopicNotExistError"]
    assert (left["sends"], left["requests"], left["route_waits"]) == (0, 0, 0)


@pytest_twisted.ensureDeferred
async def test_a_producer_not_started_says_how_to_start_it(loop_thread):
    config = aio.ClientConfig(namesrv_addrs=("127.0.0.1:1",))

    async def unstarted() -> None:
        producer = aio.Producer(aio.RouteClient(config), "g")
        await producer.send("T", b"x")

    with pytest.raises(aio.SendError, match="async with Producer"):
        await loop_thread.run(unstarted())
