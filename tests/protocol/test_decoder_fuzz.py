"""Fuzzing the decoders a peer can reach: whatever the bytes, the only exception is ours.

A decoder that lets ``RecursionError``, ``KeyError`` or ``zlib.error`` escape turns one bad
frame into an unhandled error in the server's read path; each property here feeds generated
input and allows nothing but a result or the protocol's own error family.
"""

from __future__ import annotations

import contextlib
import json
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import register_oracle

from protocol import bodies, header_codec, register_body
from protocol.codes import SerializeType
from protocol.errors import FrameError, ProtocolError
from protocol.frame import FrameDecoder, RemotingCommand, decode_frame, encode_command
from protocol.push_codec import decode_subscribe, decode_unsubscribe

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
header_keys = st.sampled_from(
    [
        "code",
        "opaque",
        "flag",
        "version",
        "language",
        "remark",
        "extFields",
        "serializeTypeCurrentRPC",
    ]
)
json_headers = st.dictionaries(header_keys | st.text(max_size=8), json_values, max_size=8)


def frame_of(header: bytes, body: bytes = b"", kind: int = 0) -> bytes:
    return struct.pack(">I", (kind << 24) | len(header)) + header + body


@FUZZ
@given(st.binary(max_size=512))
def test_decode_frame_raises_only_frame_error_on_any_bytes(data):
    with contextlib.suppress(FrameError):
        decode_frame(data)


@FUZZ
@given(json_headers, st.binary(max_size=32))
def test_json_headers_of_any_shape_decode_or_raise_frame_error(doc, body):
    header = json.dumps(doc).encode()
    try:
        cmd = decode_frame(frame_of(header, body))
    except FrameError as exc:
        assert exc.kind
        if exc.answerable:
            assert isinstance(exc.opaque, int)
    else:
        assert isinstance(cmd.code, int) and all(
            isinstance(v, str) for v in cmd.ext_fields.values()
        )


int32_edges = st.sampled_from([2**31 - 1, -(2**31), 2**31, -(2**31) - 1, True, 1.0, "1"])
some_int32 = st.integers(-(2**31), 2**31 - 1)
usual_headers = st.fixed_dictionaries(
    {
        "code": some_int32 | int32_edges,
        "opaque": some_int32 | int32_edges,
        "flag": st.integers(0, 3) | int32_edges,
        "version": st.integers(0, 500) | int32_edges | st.none(),
        "language": st.sampled_from(["JAVA", "GO", "PYTHON", "NOPE"]) | json_values,
        "extFields": st.dictionaries(st.text(max_size=6), st.text(max_size=6))
        | st.dictionaries(st.text(max_size=6), json_values),
    },
    optional={"remark": st.text(max_size=6) | json_values, "other": json_values},
)


def outcome(decode, *args):
    try:
        return decode(*args)
    except FrameError as exc:
        return (exc.remark, exc.kind, exc.code, exc.opaque, exc.flag)


@settings(FUZZ, max_examples=1000)
@given(usual_headers | json_headers)
def test_a_header_decodes_as_its_field_by_field_check_decodes_it(doc):
    """The decoder's quick read of a usual header agrees with the check of every field."""
    data = json.dumps(doc, ensure_ascii=False).encode()
    text = data.decode()
    assert outcome(header_codec.decode_json, data) == outcome(
        header_codec._checked_header, json.loads(data), text
    )


USUAL = {"code": 103, "flag": 0, "language": "JAVA", "opaque": 7, "version": 475, "extFields": {}}


@pytest.mark.parametrize(
    "change",
    [
        {"other": {"a": 1}},
        {"other": [1]},
        {"extFields": {"a": None, "b": 3, "c": True}},
        {"extFields": {"a": {"b": "c"}}},
        {"extFields": None},
        {"extFields": "x"},
        {"opaque": 2**31},
        {"code": -(2**31) - 1},
        {"flag": True},
        {"version": 1.5},
        {"version": None},
        {"language": 0},
        {"language": None},
        {"remark": 5},
        {"remark": "\ud800"},
        {"extFields": {"k": "\ud83d\ude00"}},
    ],
    ids=repr,
)
def test_a_header_off_the_usual_decodes_as_its_field_by_field_check_decodes_it(change):
    doc = {**USUAL, **change}
    data = json.dumps(doc).encode()  # escapes: the surrogate cases are spelled \\uXXXX
    assert outcome(header_codec.decode_json, data) == outcome(
        header_codec._checked_header, json.loads(data), data.decode()
    )


def test_the_usual_header_is_read_without_the_field_by_field_check(monkeypatch):
    """A header as upstream writes one never takes the slow path (which would hide a quick
    path that declines everything)."""

    def refuse(doc, text):
        raise AssertionError("the field-by-field check ran")

    monkeypatch.setattr(header_codec, "_checked_header", refuse)
    command = RemotingCommand.request(103, {"brokerName": "broker-a", "brokerId": "0"}, b"")
    decoded = decode_frame(encode_command(command)[4:])
    assert decoded.ext_fields == {"brokerName": "broker-a", "brokerId": "0"}


@FUZZ
@given(st.integers(min_value=1, max_value=20_000), st.sampled_from([b"[", b"{", b'{"a":']))
def test_deep_nesting_is_refused_whatever_its_depth(depth, opener):
    try:
        decode_frame(frame_of(opener * depth))
    except FrameError as exc:
        assert exc.kind in {"header_json", "header_depth", "header_too_large"}
    else:
        raise AssertionError("a nested header decoded")


@FUZZ
@given(st.binary(max_size=256))
def test_binary_headers_raise_only_frame_error(data):
    with contextlib.suppress(FrameError):
        header_codec.decode_binary(data)


@FUZZ
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_the_incremental_decoder_raises_only_frame_error_however_bytes_are_split(chunks):
    decoder = FrameDecoder(max_frame_size=4096)
    good = encode_command(RemotingCommand.request(105, {"topic": "T"}))
    try:
        for chunk in [good, *chunks, good]:
            for raw in decoder.feed_raw(chunk):
                with contextlib.suppress(FrameError):
                    decode_frame(raw)
    except FrameError:
        assert decoder.buffered == 0


body_decoders = [
    bodies.decode_route,
    bodies.decode_cluster_info,
    bodies.decode_topic_list,
    bodies.decode_kv_table,
    register_body.decode_data_version,
    lambda b: register_oracle.read_register_body(b, False, 479),
    lambda b: register_oracle.read_register_body(b, True, 479),
    lambda b: register_oracle.read_register_body(zlib.compress(b), True, 479),
    lambda b: decode_subscribe(b),
    lambda b: decode_unsubscribe(b),
]


@FUZZ
@given(st.sampled_from(range(len(body_decoders))), st.binary(max_size=512))
def test_body_decoders_raise_only_protocol_errors_on_any_bytes(which, data):
    with contextlib.suppress(ProtocolError):
        body_decoders[which](data)


@FUZZ
@given(st.sampled_from(range(len(body_decoders) - 2)), json_values)
def test_body_decoders_raise_only_protocol_errors_on_any_json(which, doc):
    data = json.dumps(doc).encode()
    with contextlib.suppress(ProtocolError):
        body_decoders[which](data)


def test_serialize_types_are_the_two_upstream_ones():
    assert {t.value for t in SerializeType} == {0, 1}


@FUZZ
@given(
    st.sampled_from(range(len(body_decoders) - 2)),
    st.integers(min_value=60, max_value=50_000),
    st.sampled_from([b"[", b'{"a":']),
)
def test_deeply_nested_bodies_are_refused_as_body_errors(which, depth, opener):
    try:
        body_decoders[which](opener * depth)
    except ProtocolError as exc:
        assert exc.remark
    else:
        raise AssertionError("a nested body decoded")
