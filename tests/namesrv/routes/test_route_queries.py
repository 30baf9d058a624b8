"""What the registry answers: assembled routes, cluster info and topic lists."""

from __future__ import annotations

import pytest
from support.registry_world import (
    ADDR_A,
    ADDR_A_SLAVE,
    ADDR_B,
    configs,
    make_world,
)

w = pytest.fixture(make_world, name="w")
"""A fresh registry on a fake clock, with a recording listener."""


def test_route_lists_queue_and_broker_datas_sorted_by_broker_name(w):
    w.register(configs("T"), name="broker-b", addr=ADDR_B)
    w.register(configs("T"), name="broker-a", addr=ADDR_A)
    route = w.registry.get_route("T")
    assert [q.broker_name for q in route.queue_datas] == ["broker-a", "broker-b"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-a", "broker-b"]


def test_route_is_a_copy_that_later_changes_do_not_touch(w):
    w.register(configs("T"))
    route = w.registry.get_route("T")
    w.register(configs("T"), addr=ADDR_A_SLAVE, broker_id=1, channel=2)
    assert route.broker_datas[0].broker_addrs == {0: ADDR_A}


def test_cluster_info_lists_brokers_by_name_and_names_by_cluster(w):
    w.register(configs("T1"), acting=True)
    w.register(configs("T1"), addr=ADDR_A_SLAVE, broker_id=1, channel=2, acting=True)
    w.register(configs("T2"), cluster="C2", name="broker-b", addr=ADDR_B, channel=3)
    info = w.registry.cluster_info()
    assert info.cluster_addr_table == {"C1": ["broker-a"], "C2": ["broker-b"]}
    a = info.broker_addr_table["broker-a"]
    assert (a.cluster, a.broker_addrs, a.enable_acting_master) == (
        "C1",
        {0: ADDR_A, 1: ADDR_A_SLAVE},
        True,
    )
    assert info.broker_addr_table["broker-b"].broker_addrs == {0: ADDR_B}


def test_topics_by_cluster_and_system_topics(w):
    w.register(configs("T1", "Both"))
    w.register(configs("T2", "Both"), cluster="C2", name="broker-b", addr=ADDR_B, channel=2)
    assert w.registry.topics_by_cluster("C1") == ["Both", "T1"]
    assert w.registry.topics_by_cluster("C2") == ["Both", "T2"]
    assert w.registry.topics_by_cluster("nope") == []
    assert w.registry.system_topics() == ["C1", "C2", "broker-a", "broker-b"]
    assert w.registry.broker_member_group("C1", "nobody") == {}


def test_unit_topic_lists_follow_topic_sys_flag_bits(w):
    tables = (
        configs("Plain")
        | configs("Unit", sys_flag=0x1)
        | configs("UnitSub", sys_flag=0x2)
        | configs("Both", sys_flag=0x3)
    )
    w.register(tables)
    assert w.registry.unit_topics() == ["Both", "Unit"]
    assert w.registry.has_unit_sub_topics() == ["Both", "UnitSub"]
    assert w.registry.has_unit_sub_ununit_topics() == ["UnitSub"]
