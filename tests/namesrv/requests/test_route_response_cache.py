"""The whole-response cache answers exactly what the full path would, and never a stale route.

Unit tests of ``RouteResponseCache``, and one over the wire against the real server in the
deterministic world (``support.memory_world``)."""

from __future__ import annotations

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs
from support.memory_world import connect

from namesrv.requests.route_response_cache import RouteResponseCache
from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.frame import RemotingCommand, decode_frame, encode_command


def route_frame(topic: str, opaque: int, **kw) -> bytes:
    cmd = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=opaque, **kw
    )
    return encode_command(cmd)[4:]


def answered(cache: RouteResponseCache, topic: str, opaque: int, body: bytes = b"{}") -> None:
    frame = route_frame(topic, opaque)
    request = decode_frame(frame)
    response = request.make_response(ResponseCode.SUCCESS, None, {"routeVersion": "3"}, body)
    cache.store(frame, request, response, topic)


def test_hit_splices_the_new_opaque_into_the_stored_response():
    cache = RouteResponseCache()
    answered(cache, "T", 7, b'{"queueDatas":[]}')
    for opaque in (8, 123456, -5, 0):
        raw = cache.answer(route_frame("T", opaque))
        assert raw is not None
        response = decode_frame(raw[4:])
        assert int.from_bytes(raw[:4], "big") == len(raw) - 4
        assert response.opaque == opaque and response.is_response
        assert response.ext_fields == {"routeVersion": "3"}
        assert response.body == b'{"queueDatas":[]}'
    assert cache.hits == 4


def test_misses_on_another_topic_version_or_serialization():
    cache = RouteResponseCache()
    answered(cache, "T", 7)
    assert cache.answer(route_frame("U", 8)) is None
    assert cache.answer(route_frame("T", 8, version=121)) is None
    assert cache.answer(route_frame("T", 8, serialize_type=SerializeType.ROCKETMQ)) is None


def test_invalidate_drops_the_topic_only():
    cache = RouteResponseCache()
    answered(cache, "T", 1)
    answered(cache, "U", 1)
    cache.invalidate(["T"])
    assert cache.answer(route_frame("T", 2)) is None
    assert cache.answer(route_frame("U", 2)) is not None


@pytest.mark.parametrize("digits", [b"007", b"-01", b"00"])
def test_non_json_opaque_takes_the_full_path(digits):
    cache = RouteResponseCache()
    answered(cache, "T", 7)
    frame = route_frame("T", 7)
    header = frame[4:].replace(b'"opaque":7', b'"opaque":' + digits)
    crafted = len(header).to_bytes(4, "big") + header
    assert cache.answer(crafted) is None


def test_failures_and_bodies_are_not_cached():
    cache = RouteResponseCache()
    frame = route_frame("T", 3)
    request = decode_frame(frame)
    cache.store(frame, request, request.make_response(ResponseCode.TOPIC_NOT_EXIST, "no"), "T")
    assert len(cache) == 0
    with_body = encode_command(
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, b"x")
    )[4:]
    cache.store(with_body, decode_frame(with_body), request.make_response(0), "T")
    assert len(cache) == 0


def test_bounded_by_max_entries():
    cache = RouteResponseCache(max_entries=10)
    for i in range(25):
        answered(cache, f"T{i}", 1)
    assert len(cache) <= 10 and cache.resets == 2


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


@pytest_twisted.ensureDeferred
async def test_cached_answers_follow_route_changes_over_the_wire(ns):
    broker = await connect(ns.port)
    await broker.request(register_request(topic_configs("T", queues=4)))
    client = await connect(ns.port)
    first = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    second = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert ns.server.route_responses.hits == 1
    assert (second.body, second.ext_fields) == (first.body, first.ext_fields)
    assert second.opaque == first.opaque + 1

    await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    third = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert third.body != first.body
    assert int(third.ext_fields["routeVersion"]) == int(first.ext_fields["routeVersion"]) + 1
    assert ns.server.route_responses.hits == 1
    fourth = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert (fourth.body, fourth.ext_fields) == (third.body, third.ext_fields)
    assert ns.server.route_responses.hits == 2
    assert ns.server.stats()["handled.GET_ROUTEINFO_BY_TOPIC"] == 4


@pytest.mark.parametrize(
    "opaque_text",
    [b"", b"-", b'"7"', b"7" * 14, b"-x", b"1.5", b"1e3"],
)
def test_odd_opaque_spellings_never_get_a_cached_answer(opaque_text):
    cache = RouteResponseCache()
    answered(cache, "T", 7)
    header = route_frame("T", 7)[4:].replace(b'"opaque":7', b'"opaque":' + opaque_text)
    answer = cache.answer(len(header).to_bytes(4, "big") + header)
    assert answer is None


def test_opaque_at_the_very_end_of_a_header_is_not_read_past():
    cache = RouteResponseCache()
    header = b'{"code":105,"opaque":'
    assert cache.answer(len(header).to_bytes(4, "big") + header) is None
