"""Sending to a topic that does not exist yet, through the default topic (TBW102): a real name
server with route push, broker stand-ins on loopback, timers on the cluster's fake clock."""

from __future__ import annotations

import random
from typing import Any

import pytest
import pytest_twisted
from support.producer_drive import drive
from twisted.internet import defer, reactor

from client_push.errors import TopicNotExistError
from client_push.producer.auto_create import AutoCreateTopic, NoDefaultTopicError, borrowed_route
from client_push.producer.config import ProducerConfig, ProducerConfigError, from_mapping
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.producer import Producer, SendError
from client_push.routes.route_cache import publish_info
from protocol.codes import Perm
from protocol.route_model import BrokerData, QueueData, TopicRouteData
from sandbox.standin import BrokerStandIn

ALL = int(Perm.READ | Perm.WRITE | Perm.INHERIT)


class World:
    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.clock = cluster.clock
        self.brokers: list[BrokerStandIn] = []
        self.producers: list[Producer] = []
        _server, self.port = cluster.start_server(push={"tick_interval_ms": 100})

    async def broker(self, name: str, *, enable: bool, tbw_perm: int = ALL) -> BrokerStandIn:
        broker = BrokerStandIn(
            name,
            {"TBW102": 8, "T": 4},
            [f"127.0.0.1:{self.port}"],
            reactor=reactor,
            clock=self.clock,
            auto_create_topic_enable=enable,
        )
        broker.perms["TBW102"] = tbw_perm
        await broker.start()
        self.brokers.append(broker)
        return broker

    def producer(self, **config: Any) -> Producer:
        producer = Producer(
            self.cluster.client(self.port),
            "pg",
            ProducerConfig(fault=FaultStrategyConfig(detector_enabled=False), **config),
            reactor=reactor,
            clock=self.clock,
            rng=random.Random(7),
        )
        producer.start()
        self.producers.append(producer)
        return producer

    async def close(self) -> None:
        for producer in self.producers:
            producer.stop()
        for broker in self.brokers:
            await broker.kill()


@pytest.fixture
def world(cluster):
    w = World(cluster)
    yield w
    pytest_twisted.blockon(defer.ensureDeferred(w.close()))


@pytest_twisted.ensureDeferred
async def test_a_default_topic_without_inherit_is_refused_by_the_broker(world):
    broker = await world.broker("broker-a", enable=True, tbw_perm=int(Perm.READ | Perm.WRITE))
    producer = world.producer(auto_create_topic=True)
    with pytest.raises(SendError, match="did not create topic NEW"):
        await drive(world.clock, producer.send("NEW", b"x"))
    assert "NEW" not in broker.topics


@pytest_twisted.ensureDeferred
async def test_without_a_default_topic_route_the_error_names_it(world):
    producer = world.producer(auto_create_topic=True, create_topic_key="MyDefault")
    await world.broker("broker-a", enable=True)
    with pytest.raises(NoDefaultTopicError) as caught:
        await drive(world.clock, producer.send("NEW", b"x"))
    assert isinstance(caught.value, TopicNotExistError)
    assert "default topic MyDefault has no route" in str(caught.value)


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
