"""The push extension's exchanges as commands and actions (``push_exchange``), and a session
releasing topics a given-up lookup made held; pure, no event loop."""

from __future__ import annotations

import itertools
import random
from collections import Counter

from client_push.config import ClientConfig
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.negative_cache import NegativeCache
from client_push.routes.push_actions import MoveTo, Refetch, SendUnsubscribe
from client_push.routes.push_exchange import (
    server_request,
    subscribe_answered,
    subscribe_requests,
    unsubscribe_requests,
)
from client_push.routes.push_session import PushSession
from client_push.routes.route_cache import RouteCache
from client_push.routes.telemetry import NullTelemetry
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.push_codec import (
    ChangeKind,
    decode_subscribe,
    decode_unsubscribe,
    encode_go_away,
    encode_notification,
    encode_subscribe_ack,
)


def session_holding(*topics: str) -> tuple[PushSession, RouteCache, Counter[str]]:
    config = ClientConfig(namesrv_addrs=("10.0.0.9:9876",))
    cache = RouteCache(config.topic_idle_expiry_ms)
    routes = HeldRoutes(cache, NegativeCache(config.negative_ttl_ms), NullTelemetry(), lambda: "")
    counters: Counter[str] = Counter()
    session = PushSession(
        config,
        routes,
        clock=lambda: 1.0,
        rng=random.Random(1),
        counters=counters,
        marks=itertools.count(1),
    )
    for topic in topics:
        cache.touch(topic, 1_000)
    return session, cache, counters


def test_subscriptions_go_out_in_batches_naming_the_client():
    batches = subscribe_requests(["a", "b", "c"], 2, "host@1")
    assert [tuple(batch) for batch, _ in batches] == [("a", "b"), ("c",)]
    first = decode_subscribe(batches[0][1].body)
    assert (list(first.topics), first.client_id) == (["a", "b"], "host@1")
    assert batches[0][1].code == RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED
    (only,) = unsubscribe_requests(["a", "b"], 10)
    assert list(decode_unsubscribe(only.body).topics) == ["a", "b"]


def test_an_ack_of_a_newer_version_refetches_and_a_refusal_of_a_stopping_server_moves_on():
    session, _, _ = session_holding("T")
    (_, cmd) = subscribe_requests(["T"], 10, "c")[0]
    ack = cmd.make_response(ResponseCode.SUCCESS, body=encode_subscribe_ack([("T", 4, True)], "e"))
    actions = subscribe_answered(session, "ns", ["T"], "subscribe", ack)
    assert Refetch("T", "subscribe", 4) in actions
    refused = cmd.make_response(ResponseCode.GO_AWAY, "stopping")
    assert subscribe_answered(session, "ns", ["T"], "subscribe", refused) == [
        MoveTo((), still_serving=False)
    ]


def test_a_notification_from_a_connection_being_left_is_answered_and_changes_nothing():
    session, _, counters = session_holding("T")
    body = encode_notification([("T", 9, ChangeKind.UPDATED)], 1, 1_000, "e")
    notify = RemotingCommand.request(
        RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, body=body, oneway=True
    )
    actions, response = server_request(
        session, notify, current=False, server="ns", counters=counters
    )
    assert actions == [] and response.code == ResponseCode.SUCCESS
    assert counters["notify_from_old_connection"] == 1
    actions, _ = server_request(session, notify, current=True, server="ns", counters=counters)
    assert Refetch("T", "notify", 9, 1_000) in actions


def test_a_go_away_names_its_alternatives_and_an_unknown_code_is_not_served():
    session, _, counters = session_holding()
    go_away = RemotingCommand.request(
        RequestCode.GO_AWAY, body=encode_go_away(5_000, ["10.0.0.2:9876"], "stop"), oneway=True
    )
    handled = server_request(session, go_away, current=True, server="ns", counters=counters)
    assert handled is not None
    assert handled[0] == [MoveTo(("10.0.0.2:9876",), still_serving=True)]
    unreadable = RemotingCommand.request(RequestCode.GO_AWAY, body=b"\xff\xff", oneway=True)
    handled = server_request(session, unreadable, current=True, server="ns", counters=counters)
    assert handled is not None and handled[0] == [MoveTo((), still_serving=True)]
    other = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert server_request(session, other, current=True, server="ns", counters=counters) is None


def test_releasing_topics_drops_them_and_unsubscribes_only_the_subscribed_ones():
    session, cache, counters = session_holding("A", "B")
    (_, cmd) = subscribe_requests(["A"], 10, "c")[0]
    ack = cmd.make_response(ResponseCode.SUCCESS, body=encode_subscribe_ack([("A", 0, False)], "e"))
    subscribe_answered(session, "ns", ["A"], "subscribe", ack)
    assert session.release(["A", "B", "never-held"]) == [SendUnsubscribe(("A",))]
    assert cache.held() == [] and session.subscription_count == 0
    assert counters["topics_released"] == 2
