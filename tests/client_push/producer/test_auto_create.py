"""Auto-creation's pure parts: the route borrowed from the default topic (TBW102) and the
settings. Sending through it, on every kind of producer, is in the behaviour suites
(``tests/client_push/behaviour/test_producer_behaviour.py``)."""

from __future__ import annotations

import pytest

from client_push.producer.auto_create import AutoCreateTopic, borrowed_route
from client_push.producer.config import ProducerConfig, ProducerConfigError, from_mapping
from client_push.routes.route_cache import publish_info
from protocol.codes import Perm
from protocol.route_model import BrokerData, QueueData, TopicRouteData

ALL = int(Perm.READ | Perm.WRITE | Perm.INHERIT)


def test_the_borrowed_route_takes_the_smaller_of_the_configured_and_the_brokers_queues():
    default = TopicRouteData(
        queue_datas=[QueueData("a", 8, 8, ALL), QueueData("b", 2, 16, ALL)],
        broker_datas=[BrokerData("c", "a", {0: "h:1"}), BrokerData("c", "b", {0: "h:2"})],
        order_topic_conf="a:8",
    )
    route = borrowed_route(default, AutoCreateTopic(default_topic_queue_nums=4))
    assert [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(4, 4), (2, 2)]
    info = publish_info("NEW", route)
    assert {(q.topic, q.broker_name) for q in info.message_queues} == {("NEW", "a"), ("NEW", "b")}
    assert len(info.message_queues) == 6 and not info.order_topic


def test_the_settings_are_checked_and_read_from_a_producer_table():
    cfg = from_mapping(
        {"auto_create_topic": True, "create_topic_key": "K", "default_topic_queue_nums": 8}
    )
    assert cfg.auto_create() == AutoCreateTopic("K", 8)
    assert ProducerConfig().auto_create() is None
    with pytest.raises(ProducerConfigError, match="create_topic_key"):
        ProducerConfig(create_topic_key="bad key")
    with pytest.raises(ProducerConfigError, match="default_topic_queue_nums"):
        ProducerConfig(default_topic_queue_nums=0)
    with pytest.raises(ProducerConfigError, match="create_topic_key must be str"):
        from_mapping({"create_topic_key": 5})
