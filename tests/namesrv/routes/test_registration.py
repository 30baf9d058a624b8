"""REGISTER_BROKER: upstream's registerBroker semantics and what each register reports, on a fake
clock."""

from __future__ import annotations

import pytest
from support.registry_world import (
    ADDR_A,
    ADDR_A_SLAVE,
    ADDR_B,
    V2,
    configs,
    make_world,
    queue_owners,
)

from namesrv.routes.change_cause import ChangeCause
from protocol.codes import PERM_READ_WRITE, Perm
from protocol.route_model import DataVersion, QueueData

w = pytest.fixture(make_world, name="w")
"""A fresh registry on a fake clock, with a recording listener."""


def test_register_three_topics_gives_a_route_for_each(w):
    result = w.register(configs("T1", "T2", "T3", queues=8))
    assert result.changed_topics == ["T1", "T2", "T3"]
    assert result.master_addr is None and result.ha_server_addr is None
    for topic in ("T1", "T2", "T3"):
        route = w.registry.get_route(topic)
        assert route is not None
        assert route.queue_datas == [QueueData("broker-a", 8, 8, PERM_READ_WRITE, 0)]
        [broker] = route.broker_datas
        assert (broker.cluster, broker.broker_name, broker.broker_addrs) == (
            "C1",
            "broker-a",
            {0: ADDR_A},
        )
        assert route.filter_server_table == {}
        assert route.order_topic_conf is None and route.topic_queue_mapping_by_broker is None
    assert w.registry.get_route("Nope") is None
    assert w.registry.route_exists("T1") and not w.registry.route_exists("Nope")
    assert w.registry.all_topics() == ["T1", "T2", "T3"]
    assert (w.registry.broker_count, w.registry.topic_count) == (1, 3)


def test_master_and_slave_share_broker_addrs_and_slave_learns_its_master(w):
    w.register(configs("T1", "T2"))
    result = w.register(configs("T1", "T2", queues=99), addr=ADDR_A_SLAVE, broker_id=1, channel=2)
    assert result.master_addr == ADDR_A
    assert result.ha_server_addr == "10.0.0.1:10912"
    route = w.registry.get_route("T1")
    assert route.broker_datas[0].broker_addrs == {0: ADDR_A, 1: ADDR_A_SLAVE}
    assert route.queue_datas[0].read_queue_nums == 4  # a slave's table changes no queue data
    assert w.registry.broker_member_group("C1", "broker-a") == {0: ADDR_A, 1: ADDR_A_SLAVE}
    assert w.registry.broker_count == 2


def test_slave_without_master_gets_no_master_addr_and_creates_no_topics(w):
    result = w.register(configs("T1", "T2"), addr=ADDR_A_SLAVE, broker_id=1)
    assert (result.master_addr, result.ha_server_addr) == (None, None)
    assert w.registry.all_topics() == []
    assert w.registry.broker_member_group("C1", "broker-a") == {1: ADDR_A_SLAVE}


def test_unchanged_data_version_only_refreshes_the_heartbeat(w):
    w.register(configs("T1", "T2"))
    w.heard.calls.clear()
    w.clock.advance(100)
    result = w.register(configs("T1", "T2", queues=16))  # same version: table not re-read
    assert result.changed_topics == []
    assert w.heard.calls == []
    assert w.registry.get_route("T1").queue_datas[0].read_queue_nums == 4
    w.clock.advance(100)
    assert w.registry.scan_not_active_brokers() == []  # 100 s since the refresh


def test_unchanged_version_still_adds_a_topic_the_broker_lacks(w):
    # as upstream's isTopicConfigChanged: a topic without this broker's queue data is written
    w.register(configs("A", "B"))
    w.heard.calls.clear()
    result = w.register(configs("A", "B", "NEW"))
    assert result.changed_topics == ["NEW"]
    assert w.heard.calls == [(["NEW"], ChangeCause.REGISTER)]


def test_changed_data_version_reports_exactly_the_changed_topics(w):
    w.register(configs("T1", "T2", "T3"))
    w.heard.calls.clear()
    tables = configs("T1", "T2", "T3") | configs("T2", queues=8)
    result = w.register(tables, version=V2)
    assert result.changed_topics == ["T2"]
    assert w.heard.calls == [(["T2"], ChangeCause.REGISTER)]
    assert w.registry.get_route("T2").queue_datas[0].write_queue_nums == 8


def test_start_up_register_with_several_topics_is_broker_startup(w):
    w.register(configs("T1", "T2"))
    assert w.heard.calls == [(["T1", "T2"], ChangeCause.BROKER_STARTUP)]


def test_start_up_register_with_one_topic_is_a_plain_register(w):
    w.register(configs("T1"))
    assert w.heard.calls == [(["T1"], ChangeCause.REGISTER)]


def test_register_of_a_live_broker_is_register_even_with_many_topics(w):
    w.register(configs("T1", "T2"))
    w.heard.calls.clear()
    w.register(configs("T1", "T2", "T3", "T4"), version=V2)
    assert w.heard.calls == [(["T3", "T4"], ChangeCause.REGISTER)]


def test_broker_restarting_after_unregister_is_startup_again(w):
    w.register(configs("T1", "T2"))
    w.registry.unregister_broker(
        cluster_name="C1", broker_addr=ADDR_A, broker_name="broker-a", broker_id=0
    )
    w.heard.calls.clear()
    w.register(configs("T1", "T2"))
    assert w.heard.causes() == {ChangeCause.BROKER_STARTUP}


def test_slave_joining_reports_every_topic_of_its_broker_name(w):
    w.register(configs("T1", "T2"))
    w.register(configs("Other"), name="broker-b", addr=ADDR_B, channel=3)
    w.heard.calls.clear()
    w.register(configs("T1", "T2"), addr=ADDR_A_SLAVE, broker_id=1, channel=2)
    assert w.heard.topics() == {"T1", "T2"}


def test_master_address_change_reports_every_topic_of_the_broker_name(w):
    w.register(configs("T1", "T2"))
    w.heard.calls.clear()
    w.register(configs("T1", "T2"), addr="10.0.0.7:10911", channel=7)
    assert w.heard.topics() == {"T1", "T2"}
    assert w.registry.get_route("T1").broker_datas[0].broker_addrs == {0: "10.0.0.7:10911"}


def test_slave_switched_to_master_keeps_one_entry_for_its_address(w):
    w.register(configs("T"), addr=ADDR_A_SLAVE, broker_id=1)
    w.register(configs("T"), addr=ADDR_A_SLAVE, broker_id=0)
    assert w.registry.broker_member_group("C1", "broker-a") == {0: ADDR_A_SLAVE}
    assert queue_owners(w, "T") == ["broker-a"]


def test_register_refused_when_a_newer_broker_holds_the_id(w):
    w.register(configs("T1", "T2"), version=DataVersion(state_version=5, timestamp=1))
    w.heard.calls.clear()
    result = w.register(
        configs("T9"), addr="10.0.0.8:10911", version=DataVersion(state_version=4), channel=8
    )
    assert result.changed_topics == [] and w.heard.calls == []
    assert w.registry.broker_member_group("C1", "broker-a") == {0: ADDR_A}
    assert w.registry.all_topics() == ["T1", "T2"] and w.registry.broker_count == 1


def test_address_registered_under_a_new_broker_name_leaves_the_old_one(w):
    w.register(configs("T1", "T2"))
    w.register(configs("T3", "T4"), name="broker-z")
    assert w.registry.all_topics() == ["T3", "T4"]
    assert list(w.registry.cluster_info().broker_addr_table) == ["broker-z"]


def test_filter_servers_appear_in_routes_and_their_change_is_reported(w):
    w.register(configs("T1", "T2"), filters=["f:1"])
    assert w.registry.get_route("T1").filter_server_table == {ADDR_A: ["f:1"]}
    w.heard.calls.clear()
    w.register(configs("T1", "T2"))  # same version, filter list now empty
    assert w.heard.topics() == {"T1", "T2"}
    assert w.registry.get_route("T1").filter_server_table == {}


def test_topic_queue_mapping_is_passed_through_and_dropped_with_the_broker(w):
    w.register(configs("S1", "S2"), mapping={"S1": {"bname": "broker-a", "epoch": 1}})
    assert w.registry.get_route("S1").topic_queue_mapping_by_broker == {
        "broker-a": {"bname": "broker-a", "epoch": 1}
    }
    assert w.registry.get_route("S2").topic_queue_mapping_by_broker is None
    w.registry.unregister_broker(
        cluster_name="C1", broker_addr=ADDR_A, broker_name="broker-a", broker_id=0
    )
    w.register(configs("S1", "S2"))
    assert w.registry.get_route("S1").topic_queue_mapping_by_broker is None


def test_master_dropping_a_topic_keeps_it_by_default_as_upstream(w):
    # upstream's deleteTopicWithBrokerRegistration is off by default: 5.x brokers also send
    # incremental registers that carry only the topics just created
    w.register(configs("T1", "T2", "T3"))
    w.register(configs("NEW"), version=V2)
    assert w.registry.all_topics() == ["NEW", "T1", "T2", "T3"]


def test_master_dropping_a_topic_removes_it_when_delete_with_registration_is_on():
    w = make_world(delete_topic_with_broker_registration=True)
    w.register(configs("T1", "T2", "Shared"))
    w.register(configs("Shared"), name="broker-b", addr=ADDR_B, channel=2)
    w.heard.calls.clear()
    result = w.register(configs("T1", "T3"), version=V2)
    assert set(result.changed_topics) == {"T2", "Shared", "T3"}
    assert w.registry.all_topics() == ["Shared", "T1", "T3"]
    assert queue_owners(w, "Shared") == ["broker-b"]
    assert w.registry.topics_by_cluster("C1") == ["Shared", "T1", "T3"]


def test_delete_with_registration_spares_static_topic_brokers():
    w = make_world(delete_topic_with_broker_registration=True)
    w.register(configs("T1", "T2"))
    w.register(configs("T1"), version=V2, mapping={"T1": {"bname": "broker-a"}})
    assert w.registry.all_topics() == ["T1", "T2"]


def test_acting_master_prime_slave_serves_read_only_until_the_master_returns(w):
    w.register(configs("T1", "T2"), acting=True)
    w.register(configs("T1", "T2"), addr=ADDR_A_SLAVE, broker_id=1, channel=2, acting=True)
    w.registry.unregister_broker(
        cluster_name="C1", broker_addr=ADDR_A, broker_name="broker-a", broker_id=0
    )
    assert w.registry.get_route("T1").queue_datas[0].perm == Perm.READ  # no master: read-only
    w.register(configs("T1", "T2", "T3"), addr=ADDR_A_SLAVE, broker_id=1, channel=2, acting=True)
    assert w.registry.get_route("T3").queue_datas[0].perm == Perm.READ
    w.register(configs("T1", "T2", "T3"), version=V2, acting=True)
    assert w.registry.get_route("T3").queue_datas[0].perm == PERM_READ_WRITE


def test_heartbeat_timeout_of_the_broker_overrides_the_default(w):
    w.register(configs("T"), timeout=10_000)
    w.clock.advance(11)
    assert w.registry.scan_not_active_brokers() == [ADDR_A]
