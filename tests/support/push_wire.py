"""Subscribing over the wire and reading the notifications a wire client received."""

from __future__ import annotations

from typing import Any

from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import decode_notification, decode_subscribe_ack, encode_subscribe
from protocol.push_events import RouteChanged
from support.fake_broker import register_request, topic_configs
from support.memory_world import connect
from support.wire_client import WireClient

TICK = 1.0


def notifications(client: WireClient) -> list[RouteChanged]:
    return [
        decode_notification(cmd.body)
        for cmd in client.pushed
        if cmd.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED
    ]


def changes(client: WireClient) -> list[tuple[str, int]]:
    return [(c.topic, c.kind) for n in notifications(client) for c in n.changes]


async def subscribe(client: WireClient, *topics: str, inline: bool = False, **kw: Any) -> Any:
    """SUBSCRIBE ``topics``; ``inline`` asks for inline routes, ``kw`` goes to the request.
    A coroutine: awaited in the deterministic world, it settles the world through the wire's
    own Deferreds (``inlineCallbacks`` tests ``yield`` it as before)."""
    resp = await client.call(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
        body=encode_subscribe(topics, "test", inline),
        **kw,
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return decode_subscribe_ack(resp.body)


async def broker_with(ns: Any, *topics: str, **kw: Any) -> WireClient:
    """A broker of the world's server ``ns`` serving ``topics`` (``kw`` goes to its register),
    its start-up registration settled by one tick (silent by default). Awaiting the register
    settles the turns a large one is read and applied in."""
    broker = await connect(ns.port)
    resp = await broker.request(register_request(topic_configs(*topics), **kw))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    ns.clock.advance(TICK)
    return broker


async def round_trip(*clients: WireClient) -> None:
    """A request/response on each client: everything sent to it before is now received."""
    for client in clients:
        resp = await client.call(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"})
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
