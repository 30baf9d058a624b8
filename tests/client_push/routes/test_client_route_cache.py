"""Route cache: publish info as upstream derives it, access times and idle expiry."""

from __future__ import annotations

import pytest

from client_push.routes.route_cache import (
    MessageQueue,
    RouteCache,
    RouteTooLargeError,
    publish_info,
    read_queues,
)
from protocol.codes import Perm
from protocol.route_model import BrokerData, QueueData, TopicRouteData

RW = Perm.READ | Perm.WRITE


def route(*brokers: tuple[str, int, int, int], masterless: tuple[str, ...] = ()) -> TopicRouteData:
    queue_datas = [QueueData(name, r, w, perm) for name, r, w, perm in brokers]
    broker_datas = [
        BrokerData(
            "c1",
            name,
            {1: f"{name}:10921"} if name in masterless else {0: f"{name}:10911"},
        )
        for name, *_ in brokers
    ]
    return TopicRouteData(queue_datas=queue_datas, broker_datas=broker_datas)


def test_publish_info_lists_write_queues_of_writable_brokers_sorted_by_name():
    info = publish_info("T", route(("b", 4, 2, RW), ("a", 4, 3, RW)))
    assert not info.order_topic
    assert info.message_queues == (
        MessageQueue("T", "a", 0),
        MessageQueue("T", "a", 1),
        MessageQueue("T", "a", 2),
        MessageQueue("T", "b", 0),
        MessageQueue("T", "b", 1),
    )


def test_publish_info_skips_a_broker_whose_write_perm_was_wiped():
    info = publish_info("T", route(("a", 4, 4, Perm.READ), ("b", 4, 2, RW)))
    assert {q.broker_name for q in info.message_queues} == {"b"}


def test_publish_info_skips_a_broker_without_a_master():
    info = publish_info("T", route(("a", 4, 4, RW), ("b", 4, 2, RW), masterless=("a",)))
    assert {q.broker_name for q in info.message_queues} == {"b"}


def test_publish_info_is_not_ok_when_no_broker_takes_writes():
    assert not publish_info("T", route(("a", 4, 4, Perm.READ))).ok


def test_order_topic_conf_fixes_the_queues():
    r = TopicRouteData(order_topic_conf="a:2;b:1", queue_datas=[], broker_datas=[])
    info = publish_info("T", r)
    assert info.order_topic
    assert [(q.broker_name, q.queue_id) for q in info.message_queues] == [
        ("a", 0),
        ("a", 1),
        ("b", 0),
    ]


def test_read_queues_follow_read_perm_and_read_queue_count():
    queues = read_queues("T", route(("a", 3, 8, Perm.READ), ("b", 2, 2, Perm.WRITE)))
    assert queues == tuple(MessageQueue("T", "a", i) for i in range(3))


def test_get_counts_an_access_but_peek_does_not():
    cache = RouteCache(idle_expiry_ms=1000)
    cache.put("T", route(("a", 1, 1, RW)), 3, now_ms=0)
    assert cache.get("T", 500).last_access_ms == 500  # type: ignore[union-attr]
    assert cache.peek("T").last_access_ms == 500  # type: ignore[union-attr]
    assert cache.last_access_ms("T") == 500


def test_refetch_keeps_the_last_access_time():
    cache = RouteCache(idle_expiry_ms=1000)
    cache.touch("T", 100)
    cache.put("T", route(("a", 1, 1, RW)), 1, now_ms=200)
    update = cache.put("T", route(("a", 1, 1, RW)), 2, now_ms=900)
    assert update.entry.last_access_ms == 100
    assert update.entry.fetched_at_ms == 900


def test_update_is_a_change_only_when_route_or_version_differs():
    cache = RouteCache(idle_expiry_ms=1000)
    r = route(("a", 1, 1, RW))
    assert cache.put("T", r, 1, 0).changed
    assert not cache.put("T", route(("a", 1, 1, RW)), 1, 10).changed
    assert cache.put("T", r, 2, 20).changed
    assert cache.put("T", route(("a", 1, 1, Perm.READ)), 2, 30).changed


def test_topics_idle_past_the_expiry_are_dropped_and_returned():
    cache = RouteCache(idle_expiry_ms=300_000)
    cache.put("old", route(("a", 1, 1, RW)), 1, now_ms=0)
    cache.put("fresh", route(("a", 1, 1, RW)), 1, now_ms=0)
    cache.get("fresh", 200_000)
    assert cache.expire(299_999) == []
    assert cache.expire(300_000) == ["old"]
    assert "old" not in cache and not cache.is_held("old")
    assert cache.held() == ["fresh"]


def test_absent_topics_are_held_and_expire_like_routes():
    cache = RouteCache(idle_expiry_ms=100)
    assert cache.touch("missing", 0)
    assert not cache.touch("missing", 50)
    assert cache.is_held("missing") and "missing" not in cache
    assert cache.expire(149) == []
    assert cache.expire(150) == ["missing"]


def test_kept_topics_never_expire():
    cache = RouteCache(idle_expiry_ms=100)
    cache.touch("watched", 0)
    assert cache.expire(10_000, keep={"watched"}) == []


def test_drop_forgets_the_route_but_keeps_holding_the_topic():
    cache = RouteCache(idle_expiry_ms=100)
    cache.put("T", route(("a", 1, 1, RW)), 1, 0)
    assert cache.drop("T") is not None
    assert cache.is_held("T") and cache.peek("T") is None


def test_queue_counts_over_the_bounds_are_refused_before_anything_is_built():
    cache = RouteCache(60_000, max_queue_nums=16, max_route_queues=40)
    with pytest.raises(RouteTooLargeError, match="readQueueNums=17"):
        cache.put("T", route(("a", 17, 4, RW)), 1, 0)
    with pytest.raises(RouteTooLargeError, match="41 queues"):
        cache.put("T", route(("a", 16, 16, RW), ("b", 16, 16, RW), ("c", 9, 9, RW)), 1, 0)
    order = TopicRouteData(order_topic_conf="a:100000000")
    with pytest.raises(RouteTooLargeError, match="orderTopicConf"):
        cache.put("T", order, 1, 0)
    assert cache.peek("T") is None
    assert cache.put("T", route(("a", 16, 16, RW)), 1, 0).entry.publish_info.ok
