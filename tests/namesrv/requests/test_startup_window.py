"""The start-up window: a just-started server does not claim absence it cannot know. The server
and the test's connections live in the deterministic world (``support.memory_world``): one
virtual clock, the server's, and TCP in memory."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs, unregister_request
from support.memory_world import connect
from support.push_wire import TICK, changes, subscribe
from twisted.internet import task

from namesrv.admin.render import push_status_table
from namesrv.config import ConfigError, from_mapping
from namesrv.ops.metrics import NamesrvCollector
from namesrv.requests.startup_window import StartupWindow
from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import ChangeKind

WINDOW_MS = 45_000


@pytest.fixture
def warming(make_world_server):
    return make_world_server({"server": {"wait_for_service_ms": WINDOW_MS}})


def lookup(client: Any, topic: str) -> Any:
    return client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def gauge(server: Any, name: str) -> float:
    for family in NamesrvCollector(server).collect():
        if family.name == name:
            return float(family.samples[0].value)
    raise AssertionError(f"no metric family {name}")


def test_the_window_counts_down_on_the_clock_it_is_given():
    clock = task.Clock()
    clock.advance(100)
    window = StartupWindow(clock, 45_000)
    assert (window.warming_up, window.left_ms(), window.uptime_ms()) == (True, 45_000, 0)
    clock.advance(44.999)
    assert (window.warming_up, window.left_ms(), window.uptime_ms()) == (True, 1, 44_999)
    clock.advance(0.001)
    assert (window.warming_up, window.left_ms(), window.uptime_ms()) == (False, 0, 45_000)
    off = StartupWindow(clock, 0)
    assert (off.warming_up, off.left_ms(), off.uptime_ms()) == (False, 0, 0)


@pytest_twisted.ensureDeferred
async def test_an_unheard_topic_is_not_ready_while_warming_and_a_registered_one_is_answered(
    warming,
):
    client = await connect(warming.port)
    warming.clock.advance(5)
    resp = await lookup(client, "Unheard")
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "name server not ready: warming up, 40000 ms left"
    assert resp.ext_fields == {"warmingUp": "true"}
    broker = await connect(warming.port)
    resp = await broker.request(register_request(topic_configs("T")))
    assert resp.code == ResponseCode.SUCCESS
    resp = await lookup(client, "T")
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["routeVersion"] == "1"
    # Heard of, then left by its broker: the server knows, so it says so (no broker now).
    await broker.request(unregister_request())
    resp = await lookup(client, "T")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert "topicDeleted" not in resp.ext_fields
    # The window ends: an unheard topic is absent from now on.
    warming.clock.advance(40)
    resp = await lookup(client, "Unheard")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert "warmingUp" not in resp.ext_fields


@pytest_twisted.ensureDeferred
async def test_a_not_ready_answer_is_never_cached(warming):
    client = await connect(warming.port)
    for _ in range(2):
        resp = await lookup(client, "Unheard")
        assert resp.code == ResponseCode.SYSTEM_ERROR
    warming.clock.advance(WINDOW_MS / 1000)
    resp = await lookup(client, "Unheard")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert warming.server.route_responses.hits == 0


@pytest_twisted.ensureDeferred
async def test_with_the_window_off_a_fresh_server_answers_topic_not_exist(
    make_world_server, caplog
):
    with caplog.at_level(logging.INFO, logger="namesrv.requests.startup_window"):
        ns = make_world_server({"server": {"wait_for_service_ms": 0}})
    client = await connect(ns.port)
    resp = await lookup(client, "Unheard")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    ack = await subscribe(client, "Unheard")
    assert (ack.warming_up, ack.warm_in_ms) == (False, 0)
    assert ns.server.stats()["warming_up"] == 0
    assert not [r for r in caplog.records if "warm" in r.getMessage()]


@pytest_twisted.ensureDeferred
async def test_subscribe_ack_says_warming_up_how_long_is_left_and_the_uptime(warming):
    client = await connect(warming.port)
    warming.clock.advance(10)
    ack = await subscribe(client, "Unheard")
    assert (ack.warming_up, ack.warm_in_ms, ack.uptime_ms) == (True, 35_000, 10_000)
    assert ack.topics[0].exists is False and ack.topics[0].deleted is False
    warming.clock.advance(50)
    ack = await subscribe(client, "Unheard")
    assert (ack.warming_up, ack.warm_in_ms, ack.uptime_ms) == (False, 0, 60_000)


@pytest_twisted.ensureDeferred
async def test_the_window_end_is_logged_counted_in_the_metric_and_shown_in_push_status(
    make_world_server, caplog
):
    with caplog.at_level(logging.INFO, logger="namesrv.requests.startup_window"):
        ns = make_world_server({"server": {"wait_for_service_ms": WINDOW_MS}})
        started = [r.getMessage() for r in caplog.records if "warming up for" in r.getMessage()]
        assert started == [
            "warming up for 45000 ms (server.wait_for_service_ms): a lookup of a topic no "
            "broker has registered yet is answered SYSTEM_ERROR 'not ready', not "
            "TOPIC_NOT_EXIST"
        ]
        assert gauge(ns.server, "rocketmq_namesrv_warming_up") == 1
        client = await connect(ns.port)
        resp = await client.call(RequestCode.GET_PUSH_STATUS)
        status = json.loads(resp.body)
        assert (status["warmingUp"], status["warmInMs"], status["uptimeMs"]) == (True, 45_000, 0)
        assert re.search(r"^warming up +true$", push_status_table(status), re.M)
        ns.clock.advance(44.9)
        assert not [r for r in caplog.records if "warmed up" in r.getMessage()]
        ns.clock.advance(0.1)  # the timer on the server's clock ends the window
        ended = [r.getMessage() for r in caplog.records if "warmed up" in r.getMessage()]
        assert ended == [
            "warmed up after 45000 ms: 0 brokers, 0 topics heard; a topic without a route "
            "is answered TOPIC_NOT_EXIST from now on"
        ]
        assert gauge(ns.server, "rocketmq_namesrv_warming_up") == 0
        resp = await client.call(RequestCode.GET_PUSH_STATUS)
        status = json.loads(resp.body)
        assert (status["warmingUp"], status["warmInMs"], status["uptimeMs"]) == (False, 0, 45_000)
        assert re.search(r"^warm in ms +0$", push_status_table(status), re.M)
        ns.clock.advance(60)
        assert len([r for r in caplog.records if "warm" in r.getMessage()]) == 2


@pytest_twisted.ensureDeferred
async def test_a_topic_deleted_during_the_window_is_notified_deleted_and_answered_deleted(warming):
    broker = await connect(warming.port)
    await broker.request(register_request(topic_configs("T", "U")))
    warming.clock.advance(TICK)
    client = await connect(warming.port)
    ack = await subscribe(client, "T")
    assert ack.warming_up and ack.topics[0].exists
    resp = await broker.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"})
    assert resp.code == ResponseCode.SUCCESS
    warming.clock.advance(TICK)
    await client.wait_pushed(1)
    assert changes(client) == [("T", ChangeKind.DELETED)]
    resp = await lookup(client, "T")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST  # heard of: never "not ready"
    assert resp.ext_fields["topicDeleted"] == "true"
    ack = await subscribe(client, "T")
    assert ack.warming_up and not ack.topics[0].exists and ack.topics[0].deleted


@pytest_twisted.ensureDeferred
async def test_a_system_topic_clients_create_on_absence_is_answered_absent_inside_the_window(
    warming,
):
    """The 5.x proxy asks for its heartbeat-sync topic at start and creates it only when told
    it is absent: that topic (``server.wait_for_service_exempt_topics``) is answered
    TOPIC_NOT_EXIST inside the window; every other unheard topic still "not ready"."""
    client = await connect(warming.port)
    resp = await lookup(client, "DefaultHeartBeatSyncerTopic")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert "warmingUp" not in resp.ext_fields
    resp = await lookup(client, "Unheard")
    assert resp.code == ResponseCode.SYSTEM_ERROR


def test_the_exempt_topics_are_topic_names_and_few():
    with pytest.raises(ConfigError, match="wait_for_service_exempt_topics"):
        from_mapping({"server": {"wait_for_service_exempt_topics": ["bad topic!"]}})
    with pytest.raises(ConfigError, match="at most 100"):
        from_mapping({"server": {"wait_for_service_exempt_topics": [f"T{i}" for i in range(101)]}})
    custom = from_mapping({"server": {"wait_for_service_exempt_topics": ["MySyncer"]}})
    assert custom.server.wait_for_service_exempt_topics == ["MySyncer"]
