"""The register's stages one at a time: the checksum's slices and refusal, and what the classify
stage makes of a body (heartbeat, version-only, or a body to read) against the registry."""

from __future__ import annotations

import zlib
from collections.abc import Generator
from typing import Any

import pytest
from support.register_bodies import compressed_body, plain_body, register, topic_names
from support.server_fixtures import FakeSampler, isolated_config
from twisted.internet import task

from namesrv.requests.register_stages import (
    HASH_SLICE_BYTES,
    Kind,
    RegisterBody,
    RegisterStages,
    broker_request,
    checksum,
)
from namesrv.routes.register_request import RegisterRequest
from namesrv.server import NameServer
from protocol import headers
from protocol.codes import ResponseCode
from protocol.errors import ProtocolError


def run(steps: Generator[str, None, Any]) -> tuple[list[str], Any]:
    """Every step's yield, and what the steps return."""
    yielded: list[str] = []
    while True:
        try:
            yielded.append(next(steps))
        except StopIteration as done:
            return yielded, done.value


def body_of(data: bytes, *, compressed: bool = False, large: bool = False) -> RegisterBody:
    return RegisterBody(data, compressed, 479, zlib.crc32(data) & 0x7FFFFFFF, large)


@pytest.fixture
def stages() -> RegisterStages:
    clock = task.Clock()
    server = NameServer(isolated_config({}), clock, clock=clock, sampler=FakeSampler(), epoch="e1")
    return server.processor.brokers.stages


def request_of(data: bytes, compressed: bool = False) -> RegisterRequest:
    wire = register(data, compressed=compressed)
    header = headers.RegisterBrokerRequestHeader.from_wire(wire.ext_fields)
    return broker_request(header, 1)


def applied(stages: RegisterStages, data: bytes, compressed: bool = False) -> None:
    """``data`` registered through every stage, its table applied."""
    wire = register(data, compressed=compressed)
    _, response = run(stages.steps(wire, body_of(data, compressed=compressed), request_of(data)))
    assert response.code == ResponseCode.SUCCESS, response.remark


def test_a_large_body_is_checksummed_a_slice_per_step_and_a_small_one_at_once():
    data = bytes(2 * HASH_SLICE_BYTES + 1)
    large, crc = run(checksum(body_of(data, large=True)))
    assert large == ["read"] * 3
    assert crc == zlib.crc32(data)
    assert run(checksum(body_of(data)))[0] == []


def test_a_body_whose_crc_differs_from_the_declared_one_is_refused():
    wrong = RegisterBody(b"{}", False, 479, (zlib.crc32(b"{}") + 1) & 0x7FFFFFFF, False)
    with pytest.raises(ProtocolError) as refused:
        run(checksum(wrong))
    assert refused.value.code == ResponseCode.SYSTEM_ERROR


def classify(stages: RegisterStages, data: bytes, compressed: bool = False) -> Kind:
    body = body_of(data, compressed=compressed)
    _, crc = run(checksum(body))
    _, seen = run(stages.classify(request_of(data, compressed), body, crc))
    return seen.kind


def test_classify_tells_the_heartbeat_a_new_version_and_a_new_table_apart(stages):
    names = topic_names(50)
    first = plain_body(names, 1)
    assert classify(stages, first) is Kind.READ  # nothing registered yet
    applied(stages, first)
    assert classify(stages, first) is Kind.HEARTBEAT
    assert classify(stages, plain_body(names, 2)) is Kind.VERSION_ONLY
    assert classify(stages, plain_body([*names, "Added"], 2)) is Kind.READ


def test_a_compressed_body_is_a_heartbeat_when_repeated_and_read_when_its_version_moves(stages):
    names = topic_names(50)
    first = compressed_body(names, 1)
    applied(stages, first, compressed=True)
    assert classify(stages, first, compressed=True) is Kind.HEARTBEAT
    # No cut around the version of a compressed body: a new version is read (chunks cached).
    assert classify(stages, compressed_body(names, 2), compressed=True) is Kind.READ
