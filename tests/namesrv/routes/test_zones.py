"""Upstream's zone rule for routes, on route values (the wire: tests/namesrv/requests)."""

from __future__ import annotations

import pytest

from namesrv.routes.zones import filter_by_zone, requested_zone, same_zone
from protocol.route_model import BrokerData, QueueData, TopicRouteData


def group(name: str, zone: str | None, *addrs: tuple[int, str]) -> BrokerData:
    return BrokerData("c1", name, dict(addrs), zone_name=zone)


def queues(name: str) -> QueueData:
    return QueueData(name, 4, 4, 6)


ROUTE = TopicRouteData(
    queue_datas=[queues("a"), queues("b"), queues("c"), queues("d")],
    broker_datas=[
        group("a", "zoneA", (0, "10.0.0.1:1"), (1, "10.0.0.11:1")),
        group("b", "ZoneB", (0, "10.0.0.2:1")),
        group("c", None, (0, "10.0.0.3:1")),
        group("d", "zoneB", (1, "10.0.0.4:1")),  # its master is down
    ],
    filter_server_table={"10.0.0.1:1": ["f1"], "10.0.0.11:1": ["f2"], "10.0.0.2:1": ["f3"]},
    order_topic_conf="a:4",
    topic_queue_mapping_by_broker={"a": {"x": 1}},
)


@pytest.mark.parametrize(
    ("mode", "name", "zone"),
    [
        ("true", "z1", "z1"),
        ("TRUE", "z1", "z1"),
        ("True", " z1 ", " z1 "),
        ("false", "z1", None),
        ("yes", "z1", None),
        (" true", "z1", None),  # upstream does not trim the flag
        ("1", "z1", None),
        (None, "z1", None),
        ("true", None, None),
        ("true", "", None),
        ("true", " \t", None),
    ],
)
def test_a_lookup_is_in_zone_mode_only_with_a_true_flag_and_a_non_blank_zone(mode, name, zone):
    assert requested_zone(mode, name) == zone


def test_zone_names_compare_ignoring_case_character_by_character():
    assert same_zone("ZoneA", "zonea")
    assert same_zone("zone-ä", "ZONE-Ä")
    assert not same_zone("zonea", "zoneb")
    assert not same_zone(None, "zonea")
    assert not same_zone("zone", "zonea")
    assert not same_zone("ß", "SS")  # one character never equals two


def test_the_requested_zone_keeps_its_groups_and_every_group_without_a_master():
    route = filter_by_zone(ROUTE, "ZONEA")
    assert [b.broker_name for b in route.broker_datas] == ["a", "d"]
    assert [q.broker_name for q in route.queue_datas] == ["a", "d"]
    assert route.filter_server_table == {"10.0.0.1:1": ["f1"], "10.0.0.11:1": ["f2"]}
    assert route.order_topic_conf == "a:4"
    assert route.topic_queue_mapping_by_broker == {"a": {"x": 1}}


def test_groups_without_a_zone_are_dropped_and_the_other_zone_keeps_its_own():
    route = filter_by_zone(ROUTE, "zoneb")
    assert [b.broker_name for b in route.broker_datas] == ["b", "d"]
    assert [q.broker_name for q in route.queue_datas] == ["b", "d"]
    assert route.filter_server_table == {"10.0.0.2:1": ["f3"]}


def test_a_zone_nobody_declares_leaves_only_master_less_groups():
    route = filter_by_zone(ROUTE, "elsewhere")
    assert [b.broker_name for b in route.broker_datas] == ["d"]
    assert [q.broker_name for q in route.queue_datas] == ["d"]
    assert route.filter_server_table == {}


def test_a_route_wholly_in_the_zone_is_returned_as_it_is():
    route = TopicRouteData([queues("a")], [group("a", "zoneA", (0, "10.0.0.1:1"))])
    assert filter_by_zone(route, "zonea") is route
