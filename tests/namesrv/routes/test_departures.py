"""Brokers leaving: unregister, channel close and expiry, and what each departure reports."""

from __future__ import annotations

import pytest
from support.registry_world import (
    ADDR_A,
    ADDR_A_SLAVE,
    ADDR_B,
    V1,
    V2,
    configs,
    make_world,
)

from namesrv.routes.change_cause import ChangeCause
from protocol.codes import PERM_READ_WRITE

w = pytest.fixture(make_world, name="w")
"""A fresh registry on a fake clock, with a recording listener."""


def test_unregister_drops_the_broker_from_every_route_and_orphan_topics_go(w):
    w.register(configs("T1", "Shared"))
    w.register(configs("Shared", "T2"), name="broker-b", addr=ADDR_B, channel=2)
    w.heard.calls.clear()
    w.registry.unregister_broker(
        cluster_name="C1", broker_addr=ADDR_A, broker_name="broker-a", broker_id=0
    )
    assert w.heard.calls == [(["Shared", "T1"], ChangeCause.UNREGISTER)]
    assert w.registry.get_route("T1") is None
    route = w.registry.get_route("Shared")
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert w.registry.all_topics() == ["Shared", "T2"]
    assert w.registry.cluster_info().cluster_addr_table == {"C1": ["broker-b"]}
    assert w.registry.broker_count == 1


def test_last_broker_leaving_empties_cluster_tables(w):
    w.register(configs("T1"))
    w.registry.unregister_broker(
        cluster_name="C1", broker_addr=ADDR_A, broker_name="broker-a", broker_id=0
    )
    info = w.registry.cluster_info()
    assert info.broker_addr_table == {} and info.cluster_addr_table == {}
    assert w.registry.all_topics() == [] and w.registry.topic_count == 0


def test_master_leaving_keeps_queue_data_while_a_slave_remains(w):
    w.register(configs("T1", "T2"))
    w.register(configs("T1", "T2"), addr=ADDR_A_SLAVE, broker_id=1, channel=2)
    w.heard.calls.clear()
    w.registry.unregister_broker(
        cluster_name="C1", broker_addr=ADDR_A, broker_name="broker-a", broker_id=0
    )
    assert w.heard.topics() == {"T1", "T2"}
    route = w.registry.get_route("T1")
    assert route.broker_datas[0].broker_addrs == {1: ADDR_A_SLAVE}
    assert route.queue_datas[0].perm == PERM_READ_WRITE  # acting master off: perm untouched


def test_unregister_of_unknown_broker_changes_nothing(w):
    w.register(configs("T1"))
    w.heard.calls.clear()
    w.registry.unregister_broker(
        cluster_name="C9", broker_addr="1.1.1.1:1", broker_name="nobody", broker_id=0
    )
    assert w.heard.calls == [] and w.registry.all_topics() == ["T1"]


def test_broker_silent_past_expiry_is_removed_with_cause_expiry(w):
    w.register(configs("T1", "T2"))
    w.clock.advance(100)
    w.register(configs("T9"), name="broker-b", addr=ADDR_B, channel=2)
    w.clock.advance(20)
    assert w.registry.scan_not_active_brokers() == []  # exactly 120 s: not yet past it
    w.clock.advance(0.001)
    w.heard.calls.clear()
    assert w.registry.scan_not_active_brokers() == [ADDR_A]
    assert w.heard.calls == [(["T1", "T2"], ChangeCause.EXPIRY)]
    assert w.registry.all_topics() == ["T9"]


def test_heartbeat_and_data_version_query_keep_a_broker_alive(w):
    w.register(configs("T1", "T2"))
    w.clock.advance(100)
    w.registry.broker_heartbeat(cluster_name="C1", broker_addr=ADDR_A)
    w.clock.advance(100)
    assert not w.registry.query_data_version_changed(
        cluster_name="C1", broker_addr=ADDR_A, data_version=V1
    )
    w.clock.advance(100)
    assert w.registry.query_data_version_changed(  # changed, and still a heartbeat
        cluster_name="C1", broker_addr=ADDR_A, data_version=V2
    )
    w.clock.advance(100)
    assert w.registry.scan_not_active_brokers() == []
    assert w.registry.query_data_version_changed(
        cluster_name="C1", broker_addr="9.9.9.9:1", data_version=V1
    )
    w.registry.broker_heartbeat(cluster_name="C1", broker_addr="9.9.9.9:1")  # unknown: no-op
    w.clock.advance(121)
    assert w.registry.scan_not_active_brokers() == [ADDR_A]


def test_channel_close_removes_the_brokers_of_that_channel_only(w):
    w.register(configs("T1", "T2"), channel="conn-1")
    w.register(configs("T3"), name="broker-b", addr=ADDR_B, channel="conn-2")
    w.heard.calls.clear()
    w.registry.on_channel_close("conn-9")
    assert w.heard.calls == []
    w.registry.on_channel_close("conn-1")
    assert w.heard.calls == [(["T1", "T2"], ChangeCause.CHANNEL_CLOSE)]
    assert w.registry.all_topics() == ["T3"]
    assert w.registry.broker_count == 1


def test_channel_close_follows_a_broker_that_reconnected(w):
    w.register(configs("T1", "T2"), channel=1)
    w.register(configs("T1", "T2"), channel=2)  # same broker over a new connection
    w.registry.on_channel_close(1)
    assert w.registry.all_topics() == ["T1", "T2"]
    w.registry.on_channel_close(2)
    assert w.registry.all_topics() == []


def test_brokers_without_a_channel_are_not_closed_by_a_none_channel(w):
    w.register(configs("T1"), channel=None)
    w.registry.on_channel_close(None)
    assert w.registry.all_topics() == ["T1"]
