"""RouteRegistry: upstream RouteInfoManager semantics and the listener contract, on a fake clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.internet.task import Clock

from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.registry import RouteRegistry
from protocol.codes import PERM_READ_WRITE, Perm
from protocol.route_model import DataVersion, QueueData, TopicConfig

V1 = DataVersion(state_version=0, timestamp=1, counter=1)
V2 = DataVersion(state_version=0, timestamp=2, counter=2)
ADDR_A = "10.0.0.1:10911"
ADDR_A_SLAVE = "10.0.0.2:10911"
ADDR_B = "10.0.0.3:10911"


def configs(*names: str, queues: int = 4, perm: int = PERM_READ_WRITE, sys_flag: int = 0):
    return {
        n: TopicConfig(
            topic_name=n,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=perm,
            topic_sys_flag=sys_flag,
        )
        for n in names
    }


@dataclass
class Recorder:
    calls: list[tuple[list[str], ChangeCause]] = field(default_factory=list)

    def __call__(self, topics: Any, cause: ChangeCause) -> None:
        self.calls.append((sorted(topics), cause))

    def topics(self) -> set[str]:
        return {t for topics, _ in self.calls for t in topics}

    def causes(self) -> set[ChangeCause]:
        return {cause for _, cause in self.calls}


@dataclass
class World:
    clock: Clock
    registry: RouteRegistry
    heard: Recorder

    def register(
        self,
        topics: dict[str, TopicConfig],
        *,
        cluster: str = "C1",
        name: str = "broker-a",
        addr: str = ADDR_A,
        broker_id: int = 0,
        version: DataVersion = V1,
        channel: object = 1,
        timeout: int | None = None,
        filters: list[str] | None = None,
        acting: bool = False,
        mapping: dict[str, Any] | None = None,
    ):
        return self.registry.register_broker(
            cluster_name=cluster,
            broker_addr=addr,
            broker_name=name,
            broker_id=broker_id,
            ha_server_addr=addr.replace("10911", "10912"),
            topic_configs=topics,
            data_version=version,
            filter_server_list=filters or [],
            heartbeat_timeout_ms=timeout,
            enable_acting_master=acting,
            channel=channel,
            topic_queue_mapping_info=mapping or {},
        )


def make_world(**kw: Any) -> World:
    clock = Clock()
    heard = Recorder()
    return World(clock, RouteRegistry(clock, listener=heard, **kw), heard)


@pytest.fixture
def w() -> World:
    return make_world()


def queue_owners(w: World, topic: str) -> list[str]:
    route = w.registry.get_route(topic)
    assert route is not None
    return [q.broker_name for q in route.queue_datas]


# -- register ----------------------------------------------------------------------------------


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


# -- removal -----------------------------------------------------------------------------------


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


# -- admin operations --------------------------------------------------------------------------


def test_wipe_and_add_write_perm_count_topics_and_flip_the_write_bit(w):
    w.register(configs("T1", "T2", "T3"))
    w.register(configs("T1"), name="broker-b", addr=ADDR_B, channel=2)
    w.heard.calls.clear()
    assert w.registry.wipe_write_perm("broker-a") == 3
    assert w.heard.calls == [(["T1", "T2", "T3"], ChangeCause.WIPE_WRITE_PERM)]
    perms = {q.broker_name: q.perm for q in w.registry.get_route("T1").queue_datas}
    assert perms == {"broker-a": Perm.READ, "broker-b": PERM_READ_WRITE}
    w.heard.calls.clear()
    assert w.registry.wipe_write_perm("broker-a") == 3  # upstream counts, even when unchanged
    assert w.heard.calls == []
    assert w.registry.add_write_perm("broker-a") == 3
    assert w.heard.calls == [(["T1", "T2", "T3"], ChangeCause.ADD_WRITE_PERM)]
    assert w.registry.get_route("T2").queue_datas[0].perm == PERM_READ_WRITE
    assert w.registry.wipe_write_perm("nobody") == 0
    assert w.registry.add_write_perm("nobody") == 0


def test_add_write_perm_sets_read_write_as_upstream_does(w):
    w.register(configs("T", perm=Perm.READ | Perm.INHERIT))
    w.registry.add_write_perm("broker-a")
    assert w.registry.get_route("T").queue_datas[0].perm == PERM_READ_WRITE


def test_delete_topic_everywhere(w):
    w.register(configs("T1", "T2"))
    w.register(configs("T1"), cluster="C2", name="broker-b", addr=ADDR_B, channel=2)
    w.heard.calls.clear()
    w.registry.delete_topic("T1", None)
    assert w.heard.calls == [(["T1"], ChangeCause.DELETE_TOPIC)]
    assert w.registry.get_route("T1") is None
    assert w.registry.all_topics() == ["T2"]
    assert w.registry.wipe_write_perm("broker-b") == 0  # the index forgot it too
    w.heard.calls.clear()
    w.registry.delete_topic("T1")
    w.registry.delete_topic("Nope", "C1")
    assert w.heard.calls == []


def test_delete_topic_in_one_cluster_keeps_the_other_clusters_queues(w):
    w.register(configs("T1", "T2"))
    w.register(configs("T1"), cluster="C2", name="broker-b", addr=ADDR_B, channel=2)
    w.heard.calls.clear()
    w.registry.delete_topic("T1", "C1")
    assert w.heard.calls == [(["T1"], ChangeCause.DELETE_TOPIC)]
    assert queue_owners(w, "T1") == ["broker-b"]
    w.heard.calls.clear()
    w.registry.delete_topic("T1", "C-unknown")
    w.registry.delete_topic("T2", "C2")  # T2 has no queues in C2
    assert w.heard.calls == []
    w.registry.delete_topic("T1", "C2")
    assert w.registry.get_route("T1") is None


def test_register_topic_writes_queue_data_of_known_brokers_only(w):
    w.register(configs("T1", "T2"))
    w.heard.calls.clear()
    w.registry.register_topic(
        "Admin", [QueueData("broker-a", 2, 2, 6), QueueData("ghost", 1, 1, 6)]
    )
    assert w.heard.calls == [(["Admin"], ChangeCause.REGISTER_TOPIC)]
    assert w.registry.get_route("Admin").queue_datas == [QueueData("broker-a", 2, 2, 6)]
    w.heard.calls.clear()
    w.registry.register_topic("Admin", [QueueData("broker-a", 2, 2, 6)])  # no change
    w.registry.register_topic("Ghost", [QueueData("ghost", 1, 1, 6)])
    assert w.heard.calls == []
    assert w.registry.get_route("Ghost") is None
    assert w.registry.wipe_write_perm("broker-a") == 3  # indexed like registered topics


# -- listings ----------------------------------------------------------------------------------


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


# -- the listener never under-reports ----------------------------------------------------------

CLUSTERS = ("C1", "C2")
NAMES = ("a", "b", "c")
ADDRS = ("x1", "x2", "x3", "x4")
TOPICS = ("T1", "T2", "T3", "T4")
VERSIONS = tuple(DataVersion(state_version=s, counter=c) for s in (0, 1) for c in (0, 1))
CHANNELS = (1, 2, 3, None)

topic_table = st.dictionaries(
    st.sampled_from(TOPICS),
    st.tuples(st.sampled_from((1, 4)), st.sampled_from((2, 4, 6, 7)), st.sampled_from((0, 1, 2))),
    max_size=4,
).map(lambda d: {n: TopicConfig(n, q, q, perm, topic_sys_flag=f) for n, (q, perm, f) in d.items()})


register_op = st.fixed_dictionaries(
    {
        "cluster_name": st.sampled_from(CLUSTERS),
        "broker_addr": st.sampled_from(ADDRS),
        "broker_name": st.sampled_from(NAMES),
        "broker_id": st.sampled_from((0, 0, 1, 2)),
        "ha_server_addr": st.just("ha"),
        "topic_configs": topic_table,
        "data_version": st.sampled_from(VERSIONS),
        "filter_server_list": st.sampled_from(([], [], ["f1"], ["f1", "f2"])),
        "heartbeat_timeout_ms": st.sampled_from((None, 5_000)),
        "enable_acting_master": st.booleans(),
        "channel": st.sampled_from(CHANNELS),
        "topic_queue_mapping_info": st.sampled_from(({}, {}, {"T1": {"bname": "m"}})),
    }
).map(lambda kw: ("register_broker", kw))

operation = st.one_of(
    register_op,
    register_op,
    register_op,
    # A broker's periodic re-register: an earlier register again, perhaps with other filters.
    st.tuples(st.integers(0, 40), st.sampled_from(([], ["f1"], ["f2"]))).map(
        lambda t: ("reregister", {"index": t[0], "filter_server_list": t[1]})
    ),
    st.fixed_dictionaries(
        {
            "cluster_name": st.sampled_from(CLUSTERS),
            "broker_addr": st.sampled_from(ADDRS),
            "broker_name": st.sampled_from(NAMES),
            "broker_id": st.sampled_from((0, 1)),
        }
    ).map(lambda kw: ("unregister_broker", kw)),
    st.sampled_from(CHANNELS).map(lambda c: ("on_channel_close", {"channel": c})),
    st.sampled_from((1.0, 10.0, 200.0)).map(lambda s: ("advance_and_scan", {"seconds": s})),
    st.fixed_dictionaries(
        {"cluster_name": st.sampled_from(CLUSTERS), "broker_addr": st.sampled_from(ADDRS)}
    ).map(lambda kw: ("broker_heartbeat", kw)),
    st.sampled_from(NAMES).map(lambda n: ("wipe_write_perm", {"broker_name": n})),
    st.sampled_from(NAMES).map(lambda n: ("add_write_perm", {"broker_name": n})),
    st.fixed_dictionaries(
        {
            "topic": st.sampled_from(TOPICS),
            "cluster_name": st.sampled_from((None, *CLUSTERS)),
        }
    ).map(lambda kw: ("delete_topic", kw)),
    st.fixed_dictionaries(
        {
            "topic": st.sampled_from(TOPICS),
            "queue_datas": st.lists(
                st.builds(
                    QueueData,
                    broker_name=st.sampled_from(NAMES),
                    read_queue_nums=st.sampled_from((1, 8)),
                    write_queue_nums=st.sampled_from((1, 8)),
                    perm=st.sampled_from((4, 6)),
                ),
                min_size=1,
                max_size=2,
            ),
        }
    ).map(lambda kw: ("register_topic", kw)),
)


def apply(
    clock: Clock,
    registry: RouteRegistry,
    op: tuple[str, dict[str, Any]],
    registered: list[dict[str, Any]],
) -> None:
    name, kw = op
    if name == "advance_and_scan":
        clock.advance(kw["seconds"])
        registry.scan_not_active_brokers()
    elif name == "reregister":
        if registered:
            earlier = registered[kw["index"] % len(registered)]
            registry.register_broker(**{**earlier, "filter_server_list": kw["filter_server_list"]})
    else:
        if name == "register_broker":
            registered.append(kw)
        getattr(registry, name)(**kw)


def check_tables_agree(registry: RouteRegistry) -> None:
    """Every listed topic has a route; the broker-name index matches the topic table."""
    from_topics: dict[str, set[str]] = {}
    for topic in registry.all_topics():
        route = registry.get_route(topic)
        assert route is not None and route.queue_datas and route.broker_datas
        assert [q.broker_name for q in route.queue_datas] == [
            b.broker_name for b in route.broker_datas
        ]
        for q in route.queue_datas:
            from_topics.setdefault(q.broker_name, set()).add(topic)
    index = {n: set(t) for n, t in registry._tables.items() if t}
    assert index == from_topics
    info = registry.cluster_info()
    named = {n for names in info.cluster_addr_table.values() for n in names}
    assert named == set(info.broker_addr_table)
    assert all(b.broker_addrs for b in info.broker_addr_table.values())
    by_channel = {k for keys in registry._live_by_channel.values() for k in keys}
    assert by_channel == {k for k, live in registry._live.items() if live.channel is not None}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, min_size=1, max_size=40), delete_with_registration=st.booleans())
def test_listener_reports_every_topic_whose_route_changed(ops, delete_with_registration):
    clock = Clock()
    heard = Recorder()
    registry = RouteRegistry(
        clock,
        broker_expiry_ms=60_000,
        listener=heard,
        delete_topic_with_broker_registration=delete_with_registration,
    )
    registered: list[dict[str, Any]] = []
    for op in ops:
        before = {t: registry.get_route(t) for t in TOPICS}
        heard.calls.clear()
        apply(clock, registry, op, registered)
        after = {t: registry.get_route(t) for t in TOPICS}
        changed = {t for t in TOPICS if before[t] != after[t]}
        missed = changed - heard.topics()
        assert not missed, f"{op[0]} changed {sorted(missed)} unreported"
        check_tables_agree(registry)
