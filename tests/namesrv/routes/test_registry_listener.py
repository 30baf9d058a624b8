"""The registry's listener contract: whatever the sequence of requests, every topic whose
assembled route changed is reported, and the tables stay consistent with each other."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.registry_world import Recorder
from twisted.internet.task import Clock

from namesrv.routes.register_request import RegisterRequest
from namesrv.routes.registry import RouteRegistry
from protocol.route_model import DataVersion, QueueData, TopicConfig

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
            registry.register_broker(
                RegisterRequest(**{**earlier, "filter_server_list": kw["filter_server_list"]})
            )
    else:
        if name == "register_broker":
            registered.append(kw)
            registry.register_broker(RegisterRequest(**kw))
        else:
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
    index = {n: set(t) for n, t in registry.tables.tables.items() if t}
    assert index == from_topics
    info = registry.cluster_info()
    named = {n for names in info.cluster_addr_table.values() for n in names}
    assert named == set(info.broker_addr_table)
    assert all(b.broker_addrs for b in info.broker_addr_table.values())
    by_channel = {k for keys in registry.tables.channel_index().values() for k in keys}
    assert by_channel == {k for k, live in registry.tables.live.items() if live.channel is not None}


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
