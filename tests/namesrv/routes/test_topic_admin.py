"""Admin writes outside registers: write perms, DELETE_TOPIC and REGISTER_TOPIC_IN_NAMESRV."""

from __future__ import annotations

import pytest
from support.registry_world import (
    ADDR_B,
    configs,
    make_world,
    queue_owners,
)

from namesrv.routes.change_cause import ChangeCause
from protocol.codes import PERM_READ_WRITE, Perm
from protocol.route_model import QueueData

w = pytest.fixture(make_world, name="w")
"""A fresh registry on a fake clock, with a recording listener."""


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
