"""The push extension's exchanges: SUBSCRIBE batches and what their answers mean, the name
server's requests read at the edge into what the session sees; pure, no event loop."""

from __future__ import annotations

from collections import Counter

from client_push.config import ClientConfig
from client_push.routes.negative_cache import NegativeCache
from client_push.routes.push_actions import MoveTo, Refetch, SendUnsubscribe
from client_push.routes.push_requests import (
    subscribe_answered,
    subscribe_requests,
    unsubscribe_requests,
)
from client_push.routes.push_session import PushSession
from client_push.routes.route_cache import RouteCache
from client_push.routes.subscriptions import Subscriptions
from protocol.bodies import encode_route
from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import (
    ChangeKind,
    decode_subscribe,
    decode_unsubscribe,
    encode_go_away,
    encode_notification,
    encode_subscribe_ack,
    read_server_request,
)
from protocol.push_events import GoAway, InlineRoute, RouteChanged, Unreadable
from protocol.route_model import TopicRouteData


def holding(*topics: str) -> tuple[Subscriptions, PushSession, RouteCache, Counter[str]]:
    config = ClientConfig(namesrv_addrs=("10.0.0.9:9876",))
    cache = RouteCache(config.topic_idle_expiry_ms)
    counters: Counter[str] = Counter()
    session = PushSession(
        config,
        cache,
        clock=lambda: 1.0,
        counters=counters,
        namesrv=lambda: "ns",
    )
    negative = NegativeCache(config.negative_ttl_ms)
    subscriptions = Subscriptions(
        config, session, cache, negative, set(), clock=lambda: 1.0, counters=counters
    )
    for topic in topics:
        cache.touch(topic, 1_000)
    return subscriptions, session, cache, counters


def test_subscriptions_go_out_in_batches_naming_the_client():
    batches = subscribe_requests(["a", "b", "c"], 2, "host@1")
    assert [tuple(batch) for batch, _ in batches] == [("a", "b"), ("c",)]
    first = decode_subscribe(batches[0][1].body)
    assert (list(first.topics), first.client_id) == (["a", "b"], "host@1")
    assert batches[0][1].code == RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED
    (only,) = unsubscribe_requests(["a", "b"], 10)
    assert list(decode_unsubscribe(only.body).topics) == ["a", "b"]


def test_an_ack_of_a_newer_version_refetches_and_a_refusal_of_a_stopping_server_moves_on():
    subscriptions, _, _, _ = holding("T")
    (_, cmd) = subscribe_requests(["T"], 10, "c")[0]
    ack = cmd.make_response(ResponseCode.SUCCESS, body=encode_subscribe_ack([("T", 4, True)], "e"))
    actions = subscribe_answered(subscriptions, "ns", ["T"], "subscribe", ack)
    assert Refetch("T", "subscribe", 4) in actions
    refused = cmd.make_response(ResponseCode.GO_AWAY, "stopping")
    assert subscribe_answered(subscriptions, "ns", ["T"], "subscribe", refused) == [
        MoveTo((), still_serving=False)
    ]


def test_a_notification_is_read_whole_at_the_edge_with_its_inline_routes_decoded():
    route = TopicRouteData(queue_datas=[], broker_datas=[])
    changes = [("A", 2, ChangeKind.UPDATED), ("B", 3, ChangeKind.UPDATED), ("C", 4, 0)]
    body = encode_notification(
        changes, 1, 1_000, "e", routes=[encode_route(route, standard_json=True), b"", b"{"]
    )
    note = read_server_request(
        RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, body, max_route_bytes=1_000
    )
    assert isinstance(note, RouteChanged)
    inline_a, none_b, bad_c = note.inline
    assert inline_a == InlineRoute(route) and none_b is None
    assert bad_c is not None and bad_c.route is None and bad_c.unreadable
    small = read_server_request(
        RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, body, max_route_bytes=1
    )
    assert isinstance(small, RouteChanged) and small.inline[0] == InlineRoute(None, oversize=True)
    plain = encode_notification([("A", 2, ChangeKind.UPDATED)], 1, 1_000, "e")
    assert read_server_request(
        RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, plain, max_route_bytes=1
    ) == RouteChanged((("A", 2, ChangeKind.UPDATED, b""),), 1, 1_000, "e")  # type: ignore[arg-type]


def test_a_notification_the_session_sees_refetches_and_an_unreadable_one_refetches_all():
    _, session, _, counters = holding("T")
    body = encode_notification([("T", 9, ChangeKind.UPDATED)], 1, 1_000, "e")
    code = RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED
    note = read_server_request(code, body, max_route_bytes=1_000)
    assert note is not None
    assert Refetch("T", "notify", 9, 1_000) in session.on_server_request(note, "ns")
    unreadable = read_server_request(code, b"\xff\xff", max_route_bytes=1_000)
    assert isinstance(unreadable, Unreadable)
    assert session.on_server_request(unreadable, "ns") == [Refetch("T", "gap")]
    assert counters["notify_received"] == 2 and counters["notifications_unreadable"] == 1


def test_a_go_away_names_its_alternatives_and_an_unknown_code_is_not_read():
    _, session, _, _ = holding()
    body = encode_go_away(5_000, ["10.0.0.2:9876"], "stop")
    go_away = read_server_request(RequestCode.GO_AWAY, body, max_route_bytes=1)
    assert go_away == GoAway(5_000, ("10.0.0.2:9876",), "stop")
    assert session.on_server_request(go_away, "ns") == [
        MoveTo(("10.0.0.2:9876",), still_serving=True)
    ]
    unreadable = read_server_request(RequestCode.GO_AWAY, b"\xff\xff", max_route_bytes=1)
    assert unreadable is not None
    assert session.on_server_request(unreadable, "ns") == [MoveTo((), still_serving=True)]
    code = RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert read_server_request(code, b"", max_route_bytes=1) is None


def test_dropped_topics_are_unsubscribed_only_where_subscribed():
    subscriptions, _, _, _ = holding("A", "B")
    (_, cmd) = subscribe_requests(["A"], 10, "c")[0]
    ack = cmd.make_response(ResponseCode.SUCCESS, body=encode_subscribe_ack([("A", 0, False)], "e"))
    subscribe_answered(subscriptions, "ns", ["A"], "subscribe", ack)
    assert subscriptions.count == 1
    assert subscriptions.dropped(["A", "B", "never-held"]) == [SendUnsubscribe(("A",))]
    assert subscriptions.count == 0
