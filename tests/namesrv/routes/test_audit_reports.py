"""What the registry and the KV config return for the audit trail: the arrival of an address
new to its broker id (and the one it replaced), the departures of an unregister or a closed
channel, the brokers a topic delete dropped, and whether a KV write changed anything. Without
a broker listener too: the returns do not depend on who listens."""

from __future__ import annotations

import pytest
from support.registry_world import ADDR_A, ADDR_A_SLAVE, ADDR_B, V1, V2, configs, make_world

from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.kv_config import KVConfig
from protocol.push_events import BrokerChangeKind

w = pytest.fixture(make_world, name="w")


def test_a_first_register_returns_its_arrival_and_a_repeat_returns_none(w):
    first = w.register(configs("T1", "T2"), channel=7)
    assert first.arrived is not None
    assert first.arrived.kind is BrokerChangeKind.ARRIVED
    assert (first.arrived.cluster, first.arrived.broker_name) == ("C1", "broker-a")
    assert first.arrived.addrs == ((0, ADDR_A),) and first.arrived.replaced == ()
    assert first.arrived.channel == 7 and set(first.arrived.topics) == {"T1", "T2"}
    assert w.register(configs("T1", "T2"), channel=7).arrived is None  # a heartbeat
    assert w.register(configs("T1", "T3"), version=V2, channel=7).arrived is None


def test_an_id_at_a_new_address_returns_the_address_it_replaced(w):
    w.register({}, broker_id=1, addr=ADDR_A_SLAVE)
    moved = w.register({}, broker_id=1, addr=ADDR_B)
    assert moved.arrived is not None
    assert moved.arrived.addrs == ((1, ADDR_B),)
    assert moved.arrived.replaced == ((1, ADDR_A_SLAVE),)


def test_unregister_and_a_closed_channel_return_their_departures(w):
    w.register(configs("T1"), channel=1)
    w.register(configs("T2"), name="broker-b", addr=ADDR_B, channel=2)
    [gone] = w.registry.unregister_broker(
        cluster_name="C1", broker_addr=ADDR_A, broker_name="broker-a", broker_id=0
    )
    assert (gone.kind, gone.cause, gone.broker_name) == (
        BrokerChangeKind.DEPARTED,
        ChangeCause.UNREGISTER,
        "broker-a",
    )
    assert gone.addrs == ((0, ADDR_A),) and gone.name_gone and gone.channel == 1
    assert (
        w.registry.unregister_broker(
            cluster_name="C1", broker_addr=ADDR_A, broker_name="broker-a", broker_id=0
        )
        == []
    )  # not registered any more
    [closed] = w.registry.on_channel_close(2)
    assert (closed.cause, closed.broker_name, closed.channel) == (
        ChangeCause.CHANNEL_CLOSE,
        "broker-b",
        2,
    )
    assert w.registry.on_channel_close(2) == []


def test_topic_delete_returns_the_brokers_whose_queues_it_dropped(w):
    w.register(configs("T1"))
    w.register(configs("T1"), name="broker-b", addr=ADDR_B, cluster="C2", channel=2)
    assert w.registry.delete_topic("T1", "C2") == ["broker-b"]
    assert w.registry.delete_topic("T1") == ["broker-a"]
    assert w.registry.delete_topic("T1") == []


def test_unlisted_topics_are_returned_by_the_register_that_dropped_them():
    w = make_world(delete_topic_with_broker_registration=True)
    w.register(configs("T1", "T2", "T3"), version=V1)
    assert w.register(configs("T1", "T2", "T3"), version=V1).unlisted == ()
    assert set(w.register(configs("T1"), version=V2).unlisted) == {"T2", "T3"}


def test_kv_writes_say_whether_they_changed_anything():
    kv = KVConfig()
    assert kv.put("ns", "k", "v") is True
    assert kv.put("ns", "k", "v") is False
    assert kv.put("ns", "k", "w") is True
    assert kv.delete("ns", "k") is True
    assert kv.delete("ns", "k") is False
