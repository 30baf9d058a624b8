"""A few hosts filling the total connection bound cannot lock every other host out.

Real loopback traffic under a ``task.Clock``: each "host" is a source address of 127/8.
"""

from __future__ import annotations

from typing import Any

import pytest_twisted
from support.fake_broker import register_request, topic_configs
from support.loopback_wait import until
from support.wire_client import WireClient, connect

from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import encode_subscribe


async def served(port: int, source: str) -> WireClient:
    client = await connect(port, source)
    resp = await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert resp.code == ResponseCode.SUCCESS
    return client


async def idle_from(port: int, source: str, count: int) -> list[WireClient]:
    clients = [await connect(port, source) for _ in range(count)]
    for client in clients:  # answered: admitted, not refused
        assert (await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == 0
    return clients


async def subscribed(port: int, source: str) -> WireClient:
    client = await connect(port, source)
    body = encode_subscribe(["T"], "g")
    resp = await client.call(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=body)
    assert resp.code == ResponseCode.SUCCESS
    return client


async def broker(port: int, source: str, addr: str = "10.0.0.1:10911") -> WireClient:
    client = await connect(port, source)
    resp = await client.request(register_request(topic_configs("T"), broker_addr=addr))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return client


def bounds(total: int) -> dict[str, Any]:
    return {"server": {"max_connections": total, "max_connections_per_host": total}}


@pytest_twisted.ensureDeferred
async def test_idle_connections_of_a_few_hosts_make_room_for_a_client_of_another(make_server):
    ns = make_server(bounds(6))
    hog = await idle_from(ns.port, "127.0.0.2", 4)
    ns.clock.advance(5)
    for client in hog[1:]:  # hog[0] is now the busiest host's connection idle longest
        await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    rest = await idle_from(ns.port, "127.0.0.3", 2)
    assert ns.server.stats()["connections"] == 6
    newcomer = await served(ns.port, "127.0.0.9")
    await until(lambda: not hog[0].connected)
    assert all(c.connected for c in hog[1:] + rest) and newcomer.connected
    stats = ns.server.stats()
    assert stats["connections_evicted.max_connections"] == 1
    assert stats["connections"] == 6
    assert "connections_refused.max_connections" not in stats


@pytest_twisted.ensureDeferred
async def test_a_broker_channel_is_never_closed_to_make_room_and_a_subscriber_goes_last(
    make_server,
):
    ns = make_server(bounds(5))
    kept = [await broker(ns.port, "127.0.0.2"), await subscribed(ns.port, "127.0.0.2")]
    ns.clock.advance(10)  # both idle longest
    idle = await idle_from(ns.port, "127.0.0.2", 1)
    others = await idle_from(ns.port, "127.0.0.3", 2)
    newcomer = await served(ns.port, "127.0.0.9")
    await until(lambda: not idle[0].connected)
    assert all(c.connected for c in kept + others) and newcomer.connected
    # 127.0.0.2 now holds the broker and the subscriber, 127.0.0.3 two idle ones: as busy, so
    # an idle one goes before the subscriber, idle longer though it is.
    await served(ns.port, "127.0.0.8")
    await until(lambda: sum(c.connected for c in others) == 1)
    assert all(c.connected for c in kept)
    stats = ns.server.stats()
    assert stats["connections_evicted.max_connections"] == 2
    assert "subscribers_evicted" not in stats
    assert ns.server.registry.broker_count == 1


@pytest_twisted.ensureDeferred
async def test_silent_subscribers_of_two_hosts_cannot_keep_newcomers_of_four_others_out(
    make_server,
):
    """The attack: two addresses fill the total bound with connections that subscribe once
    and then stay silent. Each newcomer from a host holding none gets in, a silent
    subscriber of a busier host making room; honest lookups go on."""
    ns = make_server(bounds(10))
    hogs = [await subscribed(ns.port, f"127.0.0.{2 + i % 2}") for i in range(10)]
    ns.clock.advance(60)
    newcomers = [await served(ns.port, f"127.0.0.{host}") for host in (4, 5, 6, 7)]
    await until(lambda: sum(c.connected for c in hogs) == 6)
    assert all(c.connected for c in newcomers)
    for client in newcomers:  # each still served: nobody evicted a newcomer
        assert (await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == 0
    stats = ns.server.stats()
    assert stats["subscribers_evicted"] == 4
    assert stats["connections_evicted.max_connections"] == 4
    assert stats["subscribed_connections"] == 6
    assert "connections_refused.max_connections" not in stats
    # The two hosts are left as many as the newcomers' hosts allow: three each.
    assert sorted(sum(c.connected for c in hogs[i::2]) for i in (0, 1)) == [3, 3]


@pytest_twisted.ensureDeferred
async def test_when_every_connection_is_a_broker_channel_a_newcomer_is_refused_as_before(
    make_server,
):
    ns = make_server(bounds(3))
    kept = [await broker(ns.port, "127.0.0.2", f"10.0.0.{n}:10911") for n in range(1, 3)]
    kept.append(await subscribed(ns.port, "127.0.0.3"))
    ns.clock.advance(10)
    late = await connect(ns.port, "127.0.0.9")
    await until(lambda: not late.connected)
    assert all(c.connected for c in kept)
    stats = ns.server.stats()
    assert stats["connections_refused.max_connections"] == 1
    assert "connections_evicted.max_connections" not in stats
