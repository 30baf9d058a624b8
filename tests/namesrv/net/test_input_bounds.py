"""A hostile client over loopback: every input is bounded, and everyone else keeps being served.

Each test replays one hostile-client attack (an input meant to exhaust a bound) against a real
server on loopback whose timers run on a ``task.Clock``.
"""

from __future__ import annotations

import json
import logging
import struct
from typing import Any

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs
from support.journal_files import journal_files, journal_records
from support.loopback_wait import server_side, until
from support.wire_client import WireClient, connect
from twisted.internet import defer, reactor

from protocol import bodies
from protocol.codes import FLAG_ONEWAY, RequestCode, ResponseCode, SerializeType
from protocol.frame import RemotingCommand, decode_frame, encode_command
from protocol.push_codec import encode_subscribe
from protocol.route_model import QueueData, TopicConfig, TopicRouteData

KIB = 1024


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


async def assert_served(port: int, source: str | None = None) -> None:
    other = await connect(port, source)
    resp = await other.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert resp.code == ResponseCode.SUCCESS
    other.transport.loseConnection()


async def register(ns: Any, *topics: str, queues: int = 4) -> WireClient:
    broker = await connect(ns.port)
    resp = await broker.request(register_request(topic_configs(*topics, queues=queues)))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return broker


def advance(ns: Any, seconds: int) -> None:
    for _ in range(seconds):
        ns.clock.advance(1)


# -- decode failures --------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_deeply_nested_json_headers_close_their_connection_counted_without_tracebacks(
    make_server, caplog
):
    ns = make_server({"server": {"max_frame_size": 4 * 1024 * KIB}})
    deep = json_frame(b"[" * 60_000)  # under the header bound: the parser's recursion guard
    huge = json_frame(b"[" * (2 * 1024 * KIB))  # 2 MiB: over server.max_header_size
    bystander = await connect(ns.port)
    with caplog.at_level(logging.WARNING, logger="namesrv"):
        for raw in [deep] * 20 + [huge] * 20:
            bad = await connect(ns.port)
            bad.transport.write(raw)
            await bad.lost.addTimeout(5, reactor)
    stats = ns.server.stats()
    assert stats["decode_failures.header_depth"] == 20
    assert stats["decode_failures.header_too_large"] == 20
    assert stats["frames_refused"] == 40
    assert stats["buffered_input_bytes"] == 0
    assert not [r for r in caplog.records if r.exc_info]
    # One line per kind per burst, not one per frame.
    assert len([r for r in caplog.records if "closing connection" in r.getMessage()]) <= 10
    resp = await bystander.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert resp.code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    ("header", "remark"),
    [
        pytest.param(b'{"code":"105","opaque":9,"flag":0}', "code", id="string-code"),
        pytest.param(b'{"code":105,"opaque":9,"flag":0,"x":[1]}', "x", id="nested-field"),
        pytest.param(b'{"code":105,"opaque":9,"extFields":[1]}', "extFields", id="ext-list"),
        pytest.param(b'{"code":105,"opaque":9,"remark":7}', "remark", id="remark-number"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_a_header_field_of_the_wrong_type_gets_an_error_response(ns, header, remark):
    client = await connect(ns.port)
    waiter: defer.Deferred[RemotingCommand] = defer.Deferred()
    client._pending[9] = waiter
    client.transport.write(json_frame(header))
    resp = await waiter.addTimeout(5, reactor)
    assert resp.code == ResponseCode.INVALID_PARAMETER and resp.is_response
    assert remark in resp.remark
    # The stream is sound: the same connection goes on being served.
    again = await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert again.code == ResponseCode.SUCCESS
    assert ns.server.stats()["headers_refused"] == 1


@pytest_twisted.ensureDeferred
async def test_bad_oneway_and_binary_headers_are_counted_and_the_stream_goes_on(ns):
    client = await connect(ns.port)
    oneway = f'{{"code":"105","opaque":3,"flag":{FLAG_ONEWAY}}}'.encode()
    client.transport.write(json_frame(oneway))
    # A binary header whose fixed fields are sound but whose extFields run past the end.
    fixed = struct.pack(">hBhii", 105, 0, 479, 11, 0) + struct.pack(">i", 0)
    binary = fixed + struct.pack(">i", 500) + b"xx"
    client.transport.write(
        struct.pack(">II", 4 + len(binary), (SerializeType.ROCKETMQ << 24) | len(binary)) + binary
    )
    waiter: defer.Deferred[RemotingCommand] = defer.Deferred()
    client._pending[11] = waiter
    resp = await waiter.addTimeout(5, reactor)
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert resp.serialize_type == SerializeType.ROCKETMQ
    stats = ns.server.stats()
    assert stats["headers_refused"] == 2 and stats["decode_failures.header_binary"] == 1
    assert (await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == ResponseCode.SUCCESS


@pytest.fixture
def ns(make_server):
    return make_server()


# -- the route response cache -----------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_padded_route_requests_are_answered_but_never_cached(ns):
    await register(ns, "T")
    client = await connect(ns.port)
    expected = None
    for i in range(50):
        ext = {"topic": "T", f"pad{i}": "p" * (20 * KIB)}
        resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
        assert resp.code == ResponseCode.SUCCESS
        expected = expected or resp.body
        assert resp.body == expected
    stats = ns.server.stats()
    assert stats["route_cache_entries"] == 0 and stats["route_cache_bytes"] == 0
    assert stats["route_cache_uncacheable"] == 50


@pytest_twisted.ensureDeferred
async def test_the_route_cache_stays_within_its_byte_bound_whatever_the_request_shapes(
    make_server,
):
    bound = 16 * KIB
    ns = make_server({"server": {"route_cache_bytes": bound}})
    await register(ns, "T")
    client = await connect(ns.port)
    for version in range(1, 301):  # each version a distinct, cacheable shape
        resp = await client.call(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, version=version
        )
        assert resp.code == ResponseCode.SUCCESS
        assert bodies.decode_route(resp.body).queue_datas[0].write_queue_nums == 4
        assert ns.server.route_responses.size_bytes <= bound
    stats = ns.server.stats()
    assert stats["route_cache_resets"] >= 1 and 0 < stats["route_cache_bytes"] <= bound


# -- partly received frames -------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_unfinished_frames_are_bounded_in_total_and_closed_when_overdue(make_server):
    bound = 1024 * KIB
    ns = make_server(
        {
            "server": {
                "max_frame_size": 256 * KIB,
                "max_buffered_input_bytes": bound,
                "frame_timeout_ms": 30_000,
            }
        }
    )
    hogs = []
    begun = struct.pack(">I", 256 * KIB) + b"\0" * (200 * KIB)

    def all_read_or_shed(hog: WireClient) -> bool:
        conn = server_side(ns.server, hog)
        held_all = conn is not None and (conn.closing or conn.decoder.buffered == len(begun))
        return held_all or not hog.connected

    for _ in range(8):
        hog = await connect(ns.port)
        hog.transport.write(begun)
        hogs.append(hog)
        await until(lambda h=hog: all_read_or_shed(h))
        assert ns.server.buffered_input <= bound
    await until(lambda: ns.server.stats().get("input_bound_closes", 0) >= 3)
    await assert_served(ns.port)
    held = [h for h in hogs if h.connected]
    assert 0 < len(held) <= 5
    advance(ns, 31)
    await until(lambda: not any(h.connected for h in hogs))
    stats = ns.server.stats()
    assert stats["frame_timeouts"] == len(held)
    assert stats["buffered_input_bytes"] == 0
    await assert_served(ns.port)


@pytest_twisted.ensureDeferred
async def test_a_frame_trickled_a_byte_a_second_is_closed_at_the_frame_timeout(ns):
    raw = encode_command(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    slow = await connect(ns.port)
    await until(lambda: len(ns.server.connections) == 1)
    [server_side] = ns.server.connections.values()

    def slow_conn():
        return server_side

    for second in range(40):
        if not slow.connected:
            break
        slow.transport.write(raw[second : second + 1])
        await until(lambda s=second: slow_conn().decoder.buffered == s + 1 or not slow.connected)
        ns.clock.advance(1)
    await until(lambda: not slow.connected)
    assert ns.server.stats()["frame_timeouts"] == 1


@pytest_twisted.ensureDeferred
async def test_a_stream_of_pipelined_requests_whose_reads_end_inside_frames_is_never_overdue(ns):
    """Every read completes a frame and begins the next one, for longer than the frame
    timeout: each frame is timed from its own start, so the connection is served throughout."""
    pipelined = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    pipelined.opaque = 1_000_000  # answers no request of the client's own
    raw = encode_command(pipelined)
    half = len(raw) // 2
    client = await connect(ns.port)
    handled = ns.server.processor.handled
    client.transport.write(raw[:half])
    seconds = ns.server.config.server.frame_timeout_ms // 1000 + 10
    for second in range(seconds):
        client.transport.write(raw[half:] + raw[:half])  # the rest of one, the start of another
        await until(lambda s=second: handled["GET_BROKER_CLUSTER_INFO"] == s + 1)
        ns.clock.advance(1)
    assert client.connected
    assert ns.server.stats().get("frame_timeouts", 0) == 0
    client.transport.write(raw[half:])
    resp = await client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert resp.code == ResponseCode.SUCCESS


# -- connections ------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_idle_connections_close_after_the_idle_timeout_but_subscribed_ones_stay(ns):
    idle = [await connect(ns.port) for _ in range(3)]
    subscribed = await connect(ns.port)
    resp = await subscribed.call(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(["T"], "c")
    )
    assert resp.code == ResponseCode.SUCCESS
    active = await connect(ns.port)
    for _ in range(4):  # a request every 40 s keeps a connection open
        advance(ns, 40)
        assert (await active.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == 0
    await until(lambda: not any(c.connected for c in idle))
    # The idle ones were closed as the clock moved; answers now show the others were not.
    for kept in (subscribed, active):
        assert (await kept.call(RequestCode.GET_BROKER_CLUSTER_INFO)).code == 0
    assert ns.server.stats()["idle_closes"] == 3


@pytest_twisted.ensureDeferred
async def test_connections_are_bounded_per_host_and_in_total(make_server):
    ns = make_server({"server": {"max_connections": 5, "max_connections_per_host": 3}})
    first = [await connect(ns.port) for _ in range(5)]
    await until(lambda: sum(c.connected for c in first) == 3)
    others = [await connect(ns.port, "127.0.0.2") for _ in range(2)]
    # From 127.0.0.2 (2 held, the busiest host 3): no host holds two more, so no room is made.
    late = await connect(ns.port, "127.0.0.2")
    await until(lambda: not late.connected)
    assert all(c.connected for c in others)
    stats = ns.server.stats()
    assert stats["connections_refused.max_connections_per_host"] == 2
    assert stats["connections_refused.max_connections"] == 1
    assert "connections_evicted.max_connections" not in stats
    for c in first:
        c.transport.loseConnection()
    await until(lambda: ns.server.stats()["connections"] == 2)
    await assert_served(ns.port, "127.0.0.3")


# -- subscriptions ----------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_one_host_cannot_spend_the_subscription_budget_of_every_other(make_server):
    ns = make_server(
        {
            "push": {
                "max_topics_per_connection": 50,
                "max_subscriptions_per_host": 100,
                "max_total_subscriptions": 1_000,
            }
        }
    )
    hostile = [await connect(ns.port) for _ in range(3)]
    answers = []
    for i, conn in enumerate(hostile):
        topics = [f"made-up-{i}-{n}" for n in range(50)]
        body = encode_subscribe(topics, "x")
        answers.append(await conn.call(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=body))
    assert [a.code for a in answers] == [0, 0, ResponseCode.INVALID_PARAMETER]
    assert "max_subscriptions_per_host=100" in answers[2].remark
    other = await connect(ns.port, "127.0.0.2")
    body = encode_subscribe([f"real-{n}" for n in range(50)], "y")
    resp = await other.call(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=body)
    assert resp.code == ResponseCode.SUCCESS
    assert ns.server.stats()["subscriptions"] == 150
    for conn in hostile:
        conn.transport.loseConnection()
    await until(lambda: ns.server.subscriptions.host_total("127.0.0.1") == 0)


# -- registers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configs", "broker_addr", "field"),
    [
        pytest.param(
            {"T": TopicConfig("T", 8, 100_000_000, 6)}, "10.0.0.1:10911", "writeQueueNums", id="q"
        ),
        pytest.param({"T": TopicConfig("T", 8, 8, 99)}, "10.0.0.1:10911", "perm", id="perm"),
        pytest.param(topic_configs("T"), "no-port", "brokerAddr", id="addr"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_an_invalid_register_is_refused_naming_the_field_and_nothing_is_applied(
    ns, configs, broker_addr, field
):
    broker = await connect(ns.port)
    configs = {**topic_configs("Fine"), **configs}
    resp = await broker.request(register_request(configs, broker_addr=broker_addr))
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert field in resp.remark
    assert ns.server.registry.broker_count == 0 and ns.server.registry.topic_count == 0
    client = await connect(ns.port)
    lookup = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Fine"})
    assert lookup.code == ResponseCode.TOPIC_NOT_EXIST


@pytest.mark.parametrize(
    ("bad", "words"),
    [("bad topic!", "characters outside"), ("T" * 128, "longer than 127"), ("", "empty")],
    ids=["chars", "length", "empty"],
)
@pytest_twisted.ensureDeferred
async def test_a_register_naming_a_bad_topic_applies_without_it_and_says_so(ns, bad, words, caplog):
    broker = await connect(ns.port)
    configs = {**topic_configs("Fine"), bad: TopicConfig(bad)}
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # the broker's every later register is taken too
            resp = await broker.request(register_request(configs))
            assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert ns.server.registry.all_topics() == ["Fine"]
    assert ns.server.stats()["register_topics_dropped"] >= 1
    assert any(words in r.getMessage() and "dropped" in r.getMessage() for r in caplog.records)
    client = await connect(ns.port)
    lookup = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Fine"})
    assert lookup.code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    ("topic", "write_queues", "named"),
    [("bad topic!", 4, "bad topic!"), ("New", 100_000_000, "writeQueueNums")],
    ids=["bad-name", "absurd-queue-counts"],
)
@pytest_twisted.ensureDeferred
async def test_register_topic_with_a_bad_value_is_refused_naming_it(ns, topic, write_queues, named):
    await register(ns, "Other")
    route = TopicRouteData(queue_datas=[QueueData("broker-a", 4, write_queues, 6)])
    body = bodies.encode_route(route, standard_json=True)
    admin = await connect(ns.port)
    resp = await admin.call(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": topic}, body)
    assert resp.code == ResponseCode.INVALID_PARAMETER and named in resp.remark
    assert ns.server.registry.all_topics() == ["Other"]
    lookup = await admin.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    assert lookup.code == ResponseCode.TOPIC_NOT_EXIST


def test_decoded_error_response_is_plain_json():
    # The error answer of a bad header decodes like any response (a client can read it).
    raw = encode_command(
        RemotingCommand(code=29, opaque=4, flag=1, remark="bad", serialize_type=SerializeType.JSON)
    )
    assert json.loads(raw[8:])["remark"] == "bad"
    assert decode_frame(raw[4:]).opaque == 4


# -- the journal ------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_write_perm_toggling_client_cannot_flood_the_journal(make_server, tmp_path):
    ns = make_server(
        {
            "journal": {
                "directory": str(tmp_path),
                "max_file_bytes": 64 * KIB,
                "max_total_bytes": 256 * KIB,
                "max_records_per_second": 200,
            }
        }
    )
    topics = [f"topic-{i:04d}" for i in range(500)]
    broker = await register(ns, *topics)
    ns.clock.advance(1)
    for _ in range(20):
        for call in (RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER):
            resp = await broker.call(call, {"brokerName": "broker-a"})
            assert resp.code == ResponseCode.SUCCESS
            ns.clock.advance(1)
    ns.server.journal.flush()
    on_disk = sum(p.stat().st_size for p in journal_files(tmp_path))
    assert on_disk <= 256 * KIB
    # A toggle's tick is one route_changes record of its 500 topics: nothing needed cutting.
    assert ns.server.stats()["journal_suppressed_records"] == 0
    changes = journal_records(tmp_path, "route_changes")
    assert changes and all(len(r["topics"]) == len(topics) for r in changes)


class _RecvSizes:
    """A socket stand-in that records what each read asked the kernel for."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self.asked: list[int] = []

    def recv(self, size: int) -> bytes:
        self.asked.append(size)
        data: bytes = self._sock.recv(size)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


@pytest_twisted.ensureDeferred
async def test_reads_stay_small_when_the_output_bound_is_large(make_server):
    """The output bound (Twisted's bufferSize) must not become the size of every read: a
    4 MiB buffer allocated, mapped and unmapped per request cost most of a lookup's CPU."""
    from namesrv.net.transport import READ_SIZE

    ns = make_server({"server": {"output_buffer_bytes": 8 * 1024 * KIB}})
    await register(ns, "T")
    client = await connect(ns.port)
    assert (await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})).code == 0
    (conn,) = [c for c in ns.server.connections.values() if c.transport is not None][-1:]
    transport: Any = conn.transport
    recorder = _RecvSizes(transport.socket)
    transport.socket = recorder
    for _ in range(3):
        resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        assert resp.code == ResponseCode.SUCCESS
    assert recorder.asked and max(recorder.asked) == READ_SIZE < 8 * 1024 * KIB
    assert transport.bufferSize == 8 * 1024 * KIB  # the output bound itself is unchanged
