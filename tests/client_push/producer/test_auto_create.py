"""Sending to a topic that does not exist yet, through the default topic (TBW102): a real name
server with route push, broker stand-ins on loopback, timers on the cluster's fake clock."""

from __future__ import annotations

import random
from typing import Any

import pytest
import pytest_twisted
from support.producer_drive import drive, run_for
from twisted.internet import defer, reactor

from client_push.errors import TopicNotExistError
from client_push.producer.auto_create import AutoCreateTopic, NoDefaultTopicError, borrowed_route
from client_push.producer.config import ProducerConfig, ProducerConfigError, from_mapping
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.producer import Producer, SendError
from client_push.routes.route_cache import publish_info
from protocol.codes import Perm, ResponseCode
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
async def test_off_by_default_a_send_to_an_unknown_topic_fails_with_topic_not_exist(world):
    await world.broker("broker-a", enable=True)
    producer = world.producer()
    with pytest.raises(TopicNotExistError):
        await drive(world.clock, producer.send("NEW", b"x"))
    assert "NEW" not in world.brokers[0].topics


@pytest_twisted.ensureDeferred
async def test_on_the_send_goes_through_tbw102_and_the_broker_creates_the_topic(world):
    broker = await world.broker("broker-a", enable=True)
    producer = world.producer(auto_create_topic=True, default_topic_queue_nums=3)
    result = await drive(world.clock, producer.send("NEW", b"first"))
    assert result.queue.topic == "NEW" and 0 <= result.queue.queue_id < 3
    assert broker.topics["NEW"] == 3 and broker.perms["NEW"] == int(Perm.READ | Perm.WRITE)
    assert (broker.last_send_fields["c"], broker.last_send_fields["d"]) == ("TBW102", "3")
    assert broker.messages[-1].topic == "NEW" and broker.messages[-1].body == b"first"
    assert producer.routing.via_default_topic("NEW")

    # The broker registered the topic; the name server announces it to the client holding it.
    await run_for(world.clock, 1.0)
    await drive(world.clock, producer.send("NEW", b"second"))
    assert not producer.routing.via_default_topic("NEW")
    entry = world.cluster.clients[-1].cached_route("NEW")
    assert entry is not None and entry.route.queue_datas[0].write_queue_nums == 3


@pytest_twisted.ensureDeferred
async def test_a_broker_that_does_not_allow_it_is_reported_with_what_it_must_allow(world):
    await world.broker("broker-a", enable=False)
    producer = world.producer(auto_create_topic=True)
    with pytest.raises(SendError) as caught:
        await drive(world.clock, producer.send("NEW", b"x"))
    text = str(caught.value)
    assert "broker broker-a did not create topic NEW from TBW102" in text
    assert "autoCreateTopicEnable=true" in text and "inherit" in text
    assert caught.value.code == ResponseCode.TOPIC_NOT_EXIST


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
