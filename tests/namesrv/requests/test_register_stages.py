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

from namesrv.ops.audit_events import Who
from namesrv.requests.register.stages import (
    STAGES,
    Kind,
    Passage,
    RegisterStages,
    checksum,
    classify,
)
from namesrv.server import NameServer
from protocol import headers
from protocol.codes import ResponseCode
from protocol.errors import ProtocolError
from protocol.register.identity import HASH_SLICE_BYTES


def run(steps: Generator[str | None, None, Any] | None) -> tuple[list[str | None], Any]:
    """Every step's yield, and what the steps return (a stage that is a plain function: none)."""
    yielded: list[str | None] = []
    if steps is None:
        return yielded, None
    while True:
        try:
            yielded.append(next(steps))
        except StopIteration as done:
            return yielded, done.value


def passage_of(
    data: bytes, *, compressed: bool = False, large: bool = False, crc: int | None = None
) -> Passage:
    """A register of ``data`` as the entry hands it to the stages."""
    wire = register(data, compressed=compressed)
    header = headers.RegisterBrokerRequestHeader.from_wire(wire.ext_fields)
    declared = zlib.crc32(data) & 0x7FFFFFFF if crc is None else crc
    return Passage(wire, data, compressed, 479, declared, large, header, 1, Who("peer"))


@pytest.fixture
def stages() -> RegisterStages:
    clock = task.Clock()
    server = NameServer(isolated_config({}), clock, clock=clock, sampler=FakeSampler(), epoch="e1")
    return server.processor.registers.stages


def applied(stages: RegisterStages, data: bytes, compressed: bool = False) -> None:
    """``data`` registered through every stage, its table applied."""
    _, response = run(stages.steps(passage_of(data, compressed=compressed)))
    assert response.code == ResponseCode.SUCCESS, response.remark


def test_the_stage_table_declares_the_stages_of_a_register_in_order():
    assert [stage.name for stage in STAGES] == [
        "checksum",
        "classify",
        "read",
        "validate",
        "totals",
        "apply",
        "answer",
    ]
    reading = {stage.name for stage in STAGES if stage.runs_for == (Kind.READ,)}
    assert reading == {"read", "validate", "totals"}


def test_a_large_body_is_checksummed_a_slice_per_step_and_a_small_one_at_once(stages):
    data = bytes(2 * HASH_SLICE_BYTES + 1)
    large = passage_of(data, large=True)
    assert run(checksum(stages, large))[0] == [None] * 3
    assert large.crc == zlib.crc32(data)
    assert run(checksum(stages, passage_of(data)))[0] == []


def test_a_body_whose_crc_differs_from_the_declared_one_is_refused(stages):
    wrong = passage_of(b"{}", crc=(zlib.crc32(b"{}") + 1) & 0x7FFFFFFF)
    with pytest.raises(ProtocolError) as refused:
        run(checksum(stages, wrong))
    assert refused.value.code == ResponseCode.SYSTEM_ERROR


def kind_of(stages: RegisterStages, data: bytes, compressed: bool = False) -> Kind:
    passage = passage_of(data, compressed=compressed)
    run(checksum(stages, passage))
    run(classify(stages, passage))
    return passage.kind


def test_classify_tells_the_heartbeat_a_new_version_and_a_new_table_apart(stages):
    names = topic_names(50)
    first = plain_body(names, 1)
    assert kind_of(stages, b"") is Kind.EMPTY
    assert kind_of(stages, first) is Kind.READ  # nothing registered yet
    applied(stages, first)
    assert kind_of(stages, first) is Kind.HEARTBEAT
    assert kind_of(stages, plain_body(names, 2)) is Kind.VERSION_ONLY
    assert kind_of(stages, plain_body([*names, "Added"], 2)) is Kind.READ


def test_a_compressed_body_is_a_heartbeat_when_repeated_and_read_when_its_version_moves(stages):
    names = topic_names(50)
    first = compressed_body(names, 1)
    applied(stages, first, compressed=True)
    assert kind_of(stages, first, compressed=True) is Kind.HEARTBEAT
    # No cut around the version of a compressed body: a new version is read (chunks cached).
    assert kind_of(stages, compressed_body(names, 2), compressed=True) is Kind.READ
