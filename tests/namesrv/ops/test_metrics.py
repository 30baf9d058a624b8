"""The Prometheus endpoint, scraped with Twisted's HTTP client and parsed with prometheus_client's
parser. Server, scraper and the test's connections share the deterministic world
(``support.memory_world``): one virtual clock, TCP in memory."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from prometheus_client.parser import text_string_to_metric_families
from support.fake_broker import register_request, topic_configs
from support.memory_world import connect, http_get, the_world

from namesrv.ops.metrics import DurationHistogram
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.push_codec import encode_subscribe

TICK = 1.0


@pytest.fixture
def ns(make_world_server):
    return make_world_server({"metrics": {"listen": "127.0.0.1:0"}})


def scrape(ns: Any) -> Any:
    port = ns.server.metrics_port.getHost().port
    status, headers, body = http_get(the_world(), f"127.0.0.1:{port}", "/metrics")
    assert status == 200
    (content_type,) = headers.getRawHeaders(b"Content-Type")
    assert content_type.startswith(b"text/plain")
    text = body.decode()
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest_twisted.ensureDeferred
async def test_scrape_before_and_after_a_notified_change_shows_counters_and_tick_histogram_move(ns):
    broker = await connect(ns.port)
    resp = await broker.request(register_request(topic_configs("T", "U")))
    assert resp.code == ResponseCode.SUCCESS
    client = await connect(ns.port)
    resp = await client.call(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(["T"], "test")
    )
    assert resp.code == ResponseCode.SUCCESS
    ns.clock.advance(TICK)
    before = scrape(ns)
    assert value(before, "rocketmq_namesrv_brokers") == 1
    assert value(before, "rocketmq_namesrv_topics") == 2
    assert value(before, "rocketmq_namesrv_subscriptions") == 1
    assert value(before, "rocketmq_namesrv_connections") == 2
    assert value(before, "rocketmq_namesrv_degraded") == 0
    # The start-up registration was suppressed by the broker_startup rule.
    assert value(before, "rocketmq_namesrv_notifications_suppressed_total", rule="broker_startup")
    assert (
        value(before, "rocketmq_namesrv_requests_total", code="REGISTER_BROKER", result="handled")
        == 1
    )
    ticks_before = value(before, "rocketmq_namesrv_tick_duration_seconds_count")
    assert ticks_before >= 1

    wipe = RemotingCommand.request(
        RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
    )
    resp = await broker.request(wipe)
    assert resp.code == ResponseCode.SUCCESS
    for _ in range(3):
        resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert resp.code == ResponseCode.SUCCESS
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    after = scrape(ns)
    assert value(after, "rocketmq_namesrv_notifications_sent_total") == 1 + value(
        before, "rocketmq_namesrv_notifications_sent_total"
    )
    assert value(after, "rocketmq_namesrv_notification_bytes_total") > value(
        before, "rocketmq_namesrv_notification_bytes_total"
    )
    assert value(after, "rocketmq_namesrv_lookups_total") == 3
    assert (
        value(
            after,
            "rocketmq_namesrv_requests_total",
            code="WIPE_WRITE_PERM_OF_BROKER",
            result="handled",
        )
        == 1
    )
    assert value(after, "rocketmq_namesrv_tick_duration_seconds_count") == ticks_before + 1
    assert value(after, "rocketmq_namesrv_tick_duration_seconds_bucket", le="+Inf") == (
        ticks_before + 1
    )
    assert value(after, "rocketmq_namesrv_tick_duration_seconds_sum") >= value(
        before, "rocketmq_namesrv_tick_duration_seconds_sum"
    )


@pytest_twisted.ensureDeferred
async def test_refused_frames_and_unsupported_codes_are_counted_by_kind(ns):
    peer = await connect(ns.port)
    resp = await peer.call(9999)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    bad = await connect(ns.port)
    bad.transport.write(b"\xff\xff\xff\xff")
    the_world().wait(bad.lost, within=0)
    samples = scrape(ns)
    assert value(samples, "rocketmq_namesrv_rejections_total", kind="unsupported_code") == 1
    assert value(samples, "rocketmq_namesrv_frames_refused_total") == 1


def test_tick_histogram_buckets_are_cumulative():
    hist = DurationHistogram((0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 3.0):
        hist.observe(seconds)
    assert hist.cumulative() == [("0.1", 2), ("1.0", 3), ("+Inf", 4)]
    assert hist.count == 4
    assert hist.sum == pytest.approx(3.65)


@pytest_twisted.ensureDeferred
async def test_bounds_reached_are_named_by_their_config_key(make_world_server):
    running = make_world_server(
        {"server": {"max_connections_per_host": 1}, "metrics": {"listen": "127.0.0.1:0"}}
    )
    first = await connect(running.port)
    second = await connect(running.port)
    the_world().wait(second.lost, within=0)
    assert first.connected
    samples = scrape(running)
    assert (
        value(
            samples,
            "rocketmq_namesrv_bounds_reached_total",
            bound="server.max_connections_per_host",
        )
        == 1
    )
    assert (
        value(samples, "rocketmq_namesrv_bounds_reached_total", bound="server.max_frame_size") == 0
    )
