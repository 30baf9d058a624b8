"""Large register tables applied, and departed brokers' tables dropped, in slices: the pending
count the server schedules by, and what a departure in slices hands back and reports."""

from __future__ import annotations

from support.registry_world import ADDR_A, V1, V2, configs, make_world
from twisted.internet.task import Clock

from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.departures import Departures
from namesrv.routes.events import Announcer
from namesrv.routes.register_jobs import RegisterJobs, RegistryStats
from namesrv.routes.tables import BrokerGroup, RouteTables
from protocol.route_model import QueueData

NAMES = [f"T{i:03d}" for i in range(25)]


def test_pending_jobs_counts_a_queued_register_until_its_last_slice():
    w = make_world(slice_topics=10)
    result = w.register(configs(*NAMES))
    assert result.job is not None and not result.job.done
    assert w.registry.pending_jobs == 1
    assert w.registry.run_jobs()  # 10 of 25
    assert w.registry.pending_jobs == 1
    assert w.registry.run_jobs()  # 20 of 25
    assert not w.registry.run_jobs()  # the last 5: done
    assert w.registry.pending_jobs == 0 and result.job.done
    assert w.registry.all_topics() == NAMES


def test_a_newer_register_supersedes_the_queued_one():
    w = make_world(slice_topics=10)
    first = w.register(configs(*NAMES))
    w.registry.run_jobs()
    second = w.register(configs(*NAMES, queues=8), version=V2)
    assert first.job is not None and first.job.cancelled and first.job.done
    assert w.registry.pending_jobs == 1 and w.registry.stats.jobs_superseded == 1
    while w.registry.run_jobs():
        pass
    assert second.job is not None and second.job.done and not second.job.cancelled
    route = w.registry.get_route(NAMES[-1])
    assert route is not None and route.queue_datas[0].read_queue_nums == 8


def test_a_departure_in_slices_unlists_the_broker_at_once_and_reports_each_slice():
    w = make_world(slice_topics=10)
    w.register(configs(*NAMES))
    while w.registry.run_jobs():
        pass
    w.heard.calls.clear()
    w.registry.unregister_broker(
        cluster_name="C1", broker_addr=ADDR_A, broker_name="broker-a", broker_id=0
    )
    assert w.registry.get_route(NAMES[0]) is None  # the broker has no group any more
    assert w.registry.pending_jobs == 1 and w.heard.calls == []
    while w.registry.run_jobs():
        pass
    assert w.registry.pending_jobs == 0 and w.registry.all_topics() == []
    assert [cause for _, cause in w.heard.calls] == [ChangeCause.UNREGISTER] * 3
    assert w.heard.topics() == set(NAMES)


def test_leaving_a_group_returns_the_topics_it_drops_in_slices():
    tables = RouteTables()
    announce = Announcer(None, None)
    jobs = RegisterJobs(tables, announce, RegistryStats(), slice_topics=10)
    departures = Departures(tables, jobs, announce, Clock())
    tables.brokers["broker-a"] = BrokerGroup("C1", {0: ADDR_A})
    tables.clusters["C1"] = {"broker-a"}
    tables.tables["broker-a"] = {t: tables.queues((4, 4, 6, 0)) for t in NAMES}
    tables.add_holders(NAMES, "broker-a")

    leaving = departures.leave_group("broker-a", ADDR_A, ChangeCause.UNREGISTER)

    assert leaving.touched == set() and leaving.dropped_later == NAMES
    assert jobs.pending == 1 and "broker-a" not in tables.brokers
    assert departures.leave_group("broker-a", ADDR_A, ChangeCause.UNREGISTER) == (set(), [])


def test_a_small_table_leaves_at_once_and_is_returned_as_touched():
    w = make_world()
    w.register(configs("T1", "T2"), version=V1)
    w.heard.calls.clear()
    w.registry.on_channel_close(1)
    assert w.registry.pending_jobs == 0
    assert w.heard.calls == [(["T1", "T2"], ChangeCause.CHANNEL_CLOSE)]


def test_a_first_register_in_slices_meets_writes_of_its_table_between_slices():
    """A REGISTER_TOPIC and a DELETE_TOPIC of a broker's table between the slices of its first
    large register: the register writes and reports only what it changes."""
    w = make_world(slice_topics=10)
    w.register(configs(*NAMES), name="broker-b", addr="10.0.0.2:10911")
    while w.registry.run_jobs():
        pass
    result = w.register(configs(*NAMES, queues=8))
    assert w.registry.run_jobs()  # the first 10 of 25
    w.heard.calls.clear()
    late = NAMES[-1]  # not applied yet: REGISTER_TOPIC gives broker-a its queues first
    w.registry.register_topic(late, [QueueData("broker-a", 8, 8, 6, 0)])
    w.registry.delete_topic(NAMES[0])  # applied already: gone again
    while w.registry.run_jobs():
        pass
    assert result.job is not None and result.job.done
    assert sum(late in topics for topics, _ in w.heard.calls) == 1  # REGISTER_TOPIC's report
    for topic in NAMES[1:]:
        route = w.registry.get_route(topic)
        assert route is not None
        assert {(q.broker_name, q.read_queue_nums) for q in route.queue_datas} == {
            ("broker-a", 8),
            ("broker-b", 4),
        }
    assert w.registry.get_route(NAMES[0]) is None


def test_holders_of_a_slice_held_by_different_brokers_are_each_grown():
    tables = RouteTables()
    tables.add_holders(["a", "b"], "broker-x")
    tables.add_holders(["b", "c"], "broker-y")
    tables.add_holders(["a", "b", "c", "d"], "broker-z")
    assert tables.holders == {
        "a": ("broker-x", "broker-z"),
        "b": ("broker-x", "broker-y", "broker-z"),
        "c": ("broker-y", "broker-z"),
        "d": ("broker-z",),
    }
    tables.add_holders(["a", "b", "c", "d"], "broker-w")  # mixed again, then uniform
    tables.add_holders(["c", "d"], "broker-v")
    assert tables.holders["d"] == ("broker-v", "broker-w", "broker-z")
    assert tables.holders["a"] is not tables.holders["c"]
