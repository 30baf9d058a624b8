"""Brokers with equal tables hold one table object: whatever one of them writes afterwards (a
register, a write-perm wipe, DELETE_TOPIC, REGISTER_TOPIC, its departure) leaves the others'
tables and routes as they were."""

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
from namesrv.routes.tables import RouteTables
from protocol.codes import PERM_READ_WRITE, Perm
from protocol.route_model import DataVersion, QueueData

NAMES = [f"T{i:03d}" for i in range(25)]
ADDR_C = "10.0.0.5:10911"
V3 = DataVersion(state_version=0, timestamp=3, counter=3)
BROKERS = (("broker-a", ADDR_A, 1), ("broker-b", ADDR_B, 2), ("broker-c", ADDR_C, 3))

w = pytest.fixture(make_world, name="w")
"""A fresh registry on a fake clock, with a recording listener."""


def register_all(w, names=NAMES, **kw):
    for name, addr, channel in BROKERS:
        w.register(configs(*names), name=name, addr=addr, channel=channel, **kw)
    while w.registry.run_jobs():
        pass


def perms(w, topic: str) -> dict[str, int]:
    route = w.registry.get_route(topic)
    assert route is not None
    return {q.broker_name: q.perm for q in route.queue_datas}


def check_consistent(tables: RouteTables) -> None:
    """The holders index follows the tables, and ``shared`` names exactly the brokers whose
    table object another broker holds too."""
    held: dict[str, set[str]] = {}
    for name, table in tables.tables.items():
        assert table
        for topic in table:
            held.setdefault(topic, set()).add(name)
    assert {t: set(h) for t, h in tables.holders.items()} == held
    by_object: dict[int, list[str]] = {}
    for name, table in tables.tables.items():
        by_object.setdefault(id(table), []).append(name)
    assert tables.shared == {n for names in by_object.values() if len(names) > 1 for n in names}


def test_brokers_registering_equal_tables_hold_one_table(w):
    register_all(w)
    tables = w.registry.tables
    assert tables.tables["broker-a"] is tables.tables["broker-b"] is tables.tables["broker-c"]
    assert w.registry.stats.tables_shared == 2
    route = w.registry.get_route("T000")
    assert route is not None
    assert route.queue_datas == [
        QueueData(name, 4, 4, PERM_READ_WRITE, 0) for name in ("broker-a", "broker-b", "broker-c")
    ]
    check_consistent(tables)


def test_tables_of_the_same_size_but_other_queues_stay_apart(w):
    w.register(configs(*NAMES))
    w.register(configs(*NAMES, queues=8), name="broker-b", addr=ADDR_B, channel=2)
    tables = w.registry.tables
    assert tables.tables["broker-a"] is not tables.tables["broker-b"]
    assert tables.shared == set() and w.registry.stats.tables_shared == 0


def test_a_write_perm_wipe_of_one_sharer_leaves_the_others_writable(w):
    register_all(w)
    w.heard.calls.clear()
    assert w.registry.wipe_write_perm("broker-b") == len(NAMES)
    assert w.heard.topics() == set(NAMES)
    assert perms(w, "T007") == {
        "broker-a": PERM_READ_WRITE,
        "broker-b": Perm.READ,
        "broker-c": PERM_READ_WRITE,
    }
    tables = w.registry.tables
    assert tables.tables["broker-a"] is tables.tables["broker-c"]
    assert tables.tables["broker-b"] is not tables.tables["broker-a"]
    check_consistent(tables)


def test_the_last_two_diverging_leave_no_broker_marked_shared(w):
    register_all(w)
    w.registry.wipe_write_perm("broker-a")
    tables = w.registry.tables
    assert tables.shared == {"broker-b", "broker-c"}
    w.registry.wipe_write_perm("broker-b")
    assert tables.shared == set()
    assert perms(w, "T004") == {
        "broker-a": Perm.READ,
        "broker-b": Perm.READ,
        "broker-c": PERM_READ_WRITE,
    }
    check_consistent(tables)
    w.registry.delete_topic("T003", cluster_name="C1")  # each writes its own table
    assert w.registry.get_route("T003") is None
    assert all("T003" not in table for table in tables.tables.values())
    check_consistent(tables)


def test_delete_and_register_topic_on_one_sharer_touch_only_its_table(w):
    for name, addr, channel in BROKERS[:2]:
        w.register(configs(*NAMES), name=name, addr=addr, channel=channel, cluster=name)
    w.registry.delete_topic("T001", cluster_name="broker-a")
    assert [q.broker_name for q in w.registry.get_route("T001").queue_datas] == ["broker-b"]
    assert "T001" in w.registry.tables.tables["broker-b"]
    w.registry.register_topic("Extra", [QueueData("broker-b", 2, 2, 6)])
    assert "Extra" not in w.registry.tables.tables["broker-a"]
    assert [q.broker_name for q in w.registry.get_route("Extra").queue_datas] == ["broker-b"]
    check_consistent(w.registry.tables)


def test_a_changed_register_of_one_sharer_rewrites_only_its_own_copy(w):
    register_all(w)
    changed = configs(*NAMES)
    changed.update(configs("T010", queues=8))
    w.heard.calls.clear()
    w.register(changed, name="broker-b", addr=ADDR_B, channel=2, version=V2)
    assert w.heard.topics() == {"T010"}
    route = w.registry.get_route("T010")
    assert route is not None
    assert {q.broker_name: q.read_queue_nums for q in route.queue_datas} == {
        "broker-a": 4,
        "broker-b": 8,
        "broker-c": 4,
    }
    tables = w.registry.tables
    assert tables.tables["broker-a"] is tables.tables["broker-c"]
    assert tables.tables["broker-b"]["T011"] is tables.tables["broker-a"]["T011"]  # interned
    check_consistent(tables)
    w.heard.calls.clear()
    w.register(configs(*NAMES), name="broker-b", addr=ADDR_B, channel=2, version=V3)
    assert w.heard.topics() == {"T010"}
    assert tables.tables["broker-b"] is tables.tables["broker-a"]  # equal again: shared again
    check_consistent(tables)


def test_a_sharer_leaving_keeps_the_others_table_and_routes(w):
    register_all(w)
    w.registry.unregister_broker(
        cluster_name="C1", broker_addr=ADDR_B, broker_name="broker-b", broker_id=0
    )
    while w.registry.run_jobs():
        pass
    assert perms(w, "T024") == {"broker-a": PERM_READ_WRITE, "broker-c": PERM_READ_WRITE}
    assert len(w.registry.tables.tables["broker-a"]) == len(NAMES)
    check_consistent(w.registry.tables)
    w.registry.on_channel_close(3)
    assert w.registry.tables.shared == set()
    assert perms(w, "T024") == {"broker-a": PERM_READ_WRITE}
    check_consistent(w.registry.tables)


def brokers_of(w, topic: str) -> list[str]:
    route = w.registry.get_route(topic)
    assert route is not None
    return [q.broker_name for q in route.queue_datas]


def test_an_equal_table_in_slices_is_held_from_the_first_and_listed_slice_by_slice():
    w = sliced_world_with_broker_a()
    writes = w.registry.tables.writes
    w.register(configs(*NAMES), name="broker-b", addr=ADDR_B, channel=2)
    tables = w.registry.tables
    w.registry.run_jobs()  # 10 of 25 applied
    assert tables.tables["broker-b"] is tables.tables["broker-a"]
    assert brokers_of(w, NAMES[9]) == ["broker-a", "broker-b"]
    assert brokers_of(w, NAMES[10]) == brokers_of(w, NAMES[-1]) == ["broker-a"]
    while w.registry.run_jobs():
        pass
    assert tables.tables["broker-b"] is tables.tables["broker-a"]
    assert tables.writes == writes  # no table was written
    assert w.registry.stats.tables_shared == 1
    assert brokers_of(w, NAMES[-1]) == ["broker-a", "broker-b"]
    check_consistent(tables)


def test_a_held_register_superseded_mid_way_keeps_only_what_it_applied():
    w = sliced_world_with_broker_a()
    w.register(configs(*NAMES), name="broker-b", addr=ADDR_B, channel=2)
    w.registry.run_jobs()  # 10 of 25 applied into broker-a's table, held
    tables = w.registry.tables
    assert tables.tables["broker-b"] is tables.tables["broker-a"]
    # A newer register of broker-b, another table, before the first one was applied.
    w.register(configs("Other", *NAMES[:5]), name="broker-b", addr=ADDR_B, channel=2, version=V2)
    assert set(tables.tables["broker-b"]) == {"Other", *NAMES[:10]}
    assert len(tables.tables["broker-a"]) == 25
    check_consistent(tables)
    while w.registry.run_jobs():
        pass
    assert brokers_of(w, NAMES[-1]) == ["broker-a"]
    check_consistent(tables)


def test_a_held_register_superseded_mid_way_unlists_only_topics_it_had_applied():
    w = make_world(slice_topics=10, delete_topic_with_broker_registration=True)
    w.register(configs(*NAMES))
    while w.registry.run_jobs():
        pass
    w.register(configs(*NAMES), name="broker-b", addr=ADDR_B, channel=2)
    w.registry.run_jobs()  # 10 of 25 applied into broker-a's table, held
    w.heard.calls.clear()
    w.register(configs(*NAMES[:5]), name="broker-b", addr=ADDR_B, channel=2, version=V2)
    calls = w.heard.calls
    unlisted = [t for topics, cause in calls if cause is ChangeCause.UNLISTED for t in topics]
    assert unlisted == NAMES[5:10]  # never those broker-b's routes did not list yet
    assert list(w.registry.tables.tables["broker-b"]) == NAMES[:5]
    assert brokers_of(w, NAMES[7]) == brokers_of(w, NAMES[-1]) == ["broker-a"]
    check_consistent(w.registry.tables)


def test_a_held_table_listing_another_topic_in_a_later_slice_ends_as_its_own():
    w = sliced_world_with_broker_a()
    names = [*NAMES[:-1], "Other"]  # the same size, one topic another
    w.register(configs(*names), name="broker-b", addr=ADDR_B, channel=2)
    while w.registry.run_jobs():
        pass
    tables = w.registry.tables
    assert list(tables.tables["broker-b"]) == names
    assert len(tables.tables["broker-a"]) == 25 and "Other" not in tables.tables["broker-a"]
    assert brokers_of(w, NAMES[-1]) == ["broker-a"] and brokers_of(w, "Other") == ["broker-b"]
    assert tables.shared == set()
    check_consistent(tables)


def test_a_prime_slaves_read_only_table_is_not_shared_with_a_writable_one(w):
    w.register(configs(*NAMES), name="broker-b", addr=ADDR_B, channel=2)
    w.register(configs(*NAMES), addr=ADDR_A_SLAVE, broker_id=1, acting=True)
    tables = w.registry.tables
    assert tables.tables["broker-a"] is not tables.tables["broker-b"]
    assert perms(w, "T000") == {"broker-a": Perm.READ, "broker-b": PERM_READ_WRITE}
    check_consistent(tables)


def sliced_world_with_broker_a():
    w = make_world(slice_topics=10)
    w.register(configs(*NAMES))
    while w.registry.run_jobs():
        pass
    return w


def test_a_table_in_slices_differing_in_its_last_slice_keeps_its_own_table():
    w = sliced_world_with_broker_a()
    table = configs(*NAMES)
    table.update(configs(NAMES[-1], queues=8))
    w.register(table, name="broker-b", addr=ADDR_B, channel=2)
    while w.registry.run_jobs():
        pass
    tables = w.registry.tables
    assert tables.tables["broker-b"] is not tables.tables["broker-a"]
    assert tables.tables["broker-b"][NAMES[-1]].read_queue_nums == 8
    assert tables.shared == set() and w.registry.stats.tables_shared == 0
    check_consistent(tables)


def test_a_write_between_slices_still_lets_an_equal_table_be_shared():
    w = sliced_world_with_broker_a()
    w.register(configs(*NAMES), name="broker-b", addr=ADDR_B, channel=2)
    w.registry.run_jobs()
    w.registry.register_topic("Extra", [QueueData("broker-a", 2, 2, 6)])
    w.registry.delete_topic("Extra")  # broker-a's table is as it was, written twice
    while w.registry.run_jobs():
        pass
    tables = w.registry.tables
    assert tables.tables["broker-b"] is tables.tables["broker-a"]
    check_consistent(tables)


def test_the_table_followed_leaving_mid_register_leaves_the_new_one_its_own():
    w = sliced_world_with_broker_a()
    w.register(configs(*NAMES), name="broker-b", addr=ADDR_B, channel=2)
    w.registry.run_jobs()
    w.registry.on_channel_close(1)  # broker-a leaves: its table in slices
    while w.registry.run_jobs():
        pass
    tables = w.registry.tables
    assert list(tables.tables) == ["broker-b"] and tables.shared == set()
    assert w.registry.all_topics() == NAMES
    assert queue_owners(w, NAMES[0]) == ["broker-b"]
    check_consistent(tables)
