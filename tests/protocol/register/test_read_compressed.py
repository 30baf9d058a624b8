"""Compressed register bodies, both upstream forms (4.x: five fields; 5.x: attributes JSON
last), read by the chunked fast path exactly as the general per-topic reader reads them:
same table, specs, filter servers and mapping, or the same error."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import register_oracle

from protocol import register_body
from protocol.errors import BodyError
from protocol.register import read
from protocol.register.read import ChunkCache

V4, V5 = 400, 479  # a 4.9.x broker (no mapping section) and a 5.3.3 one

usual_names = st.text(st.sampled_from("abcXYZ019%_-"), min_size=1, max_size=40) | st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters=" \n\x00"),
    min_size=1,
    max_size=8,
)
odd_names = st.sampled_from(["", "a b", "new\nline", "nul\x00", 'q"uote', "x" * 300, "{}"])
numbers = st.integers(0, 1024).map(str) | st.sampled_from(["08", "+8", "-1", "1e3", "", "9" * 25])
filters = st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]) | st.sampled_from(["OTHER", "single_tag"])
attributes = st.sampled_from(
    [None, "", "{}", '{"+message.type":"NORMAL"}', '{"a":"b c"}', '{"a":1}', "[]", "nojson"]
)


@st.composite
def records(draw: Any, usual: bool, v5: bool) -> bytes:
    """One topic record's text: a ``v5`` broker's usual form (attributes JSON last) or a 4.x
    broker's when ``usual``, anything nearby otherwise."""
    name = draw(usual_names if usual else usual_names | odd_names)
    if usual:
        fields = [str(draw(st.integers(0, 1024))) for _ in range(3)]
        filter_type = draw(st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]))
        attrs = draw(st.sampled_from(["{}", "", '{"+message.type":"NORMAL"}'])) if v5 else None
    else:
        fields = [draw(numbers) for _ in range(3)]
        filter_type = draw(filters)
        attrs = draw(attributes)
    parts = [name, *fields, filter_type] + ([] if attrs is None else [attrs])
    return " ".join(parts).encode()


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


@st.composite
def inflated_bodies(draw: Any, usual: bool) -> tuple[bytes, int]:
    """The inflated bytes of a compressed body and the broker version that sent it."""
    version = draw(st.sampled_from([V4, V5]))
    dv = json.dumps({"counter": draw(st.integers(0, 9)), "stateVersion": 0, "timestamp": 1})
    texts = draw(st.lists(records(usual, version == V5), max_size=60))
    if usual and draw(st.booleans()):
        texts += texts[: draw(st.integers(0, 3))]  # a topic listed twice
    out = bytearray(int32(len(dv)) + dv.encode())
    count = len(texts) + (0 if usual else draw(st.sampled_from([0, 0, 0, -1, 1])))
    out += int32(count)
    for text in texts:
        lie = 0 if usual else draw(st.sampled_from([0] * 8 + [-1, 1, 1 << 24]))
        out += int32(len(text) + lie) + text
    servers = json.dumps(draw(st.lists(st.sampled_from(["10.0.0.9:7000", "x y"]), max_size=2)))
    out += int32(len(servers)) + servers.encode()
    if version == V5:
        info = json.dumps({"topic": "static", "bname": "b", "epoch": 1})
        mappings = draw(st.sampled_from([[], [info]]))
        out += int32(len(mappings))
        for m in mappings:
            out += int32(len(m)) + m.encode()
    return bytes(out), version


def outcome(read: Any) -> tuple[Any, ...]:
    """What a read gives: the table (in order) and everything else, or its error."""
    try:
        table = read()
    except BodyError as exc:
        return ("refused", str(exc))
    return (
        list(table.topic_queues.items()),
        table.specs,
        table.data_version,
        table.filter_server_list,
        table.topic_queue_mapping_info_map,
        table.renamed,
    )


def fast(data: bytes, version: int, topics_per_step: int, cache: ChunkCache | None) -> Any:
    steps = read.register_body_steps(
        data, True, version, topics_per_step=topics_per_step, chunk_cache=cache
    )
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


SHARED_CACHE = ChunkCache(1 << 20)
"""Across examples, so chunks read for one body are found again for others."""


def check_agrees(data: bytes, version: int, topics_per_step: int) -> tuple[Any, ...]:
    general = outcome(lambda: register_oracle.read_compressed_general(data, version))
    for cache in (None, SHARED_CACHE, SHARED_CACHE):  # uncached, then read and found again
        assert outcome(lambda c=cache: fast(data, version, topics_per_step, c)) == general
    try:  # the full decoder reads the same topics, or refuses with the same error
        full = register_oracle.decode_register_body(data, True, version)
    except BodyError as exc:
        assert general == ("refused", str(exc))
    else:
        table = full.topic_config_serialize_wrapper.topic_config_table
        assert [n for n, _ in general[0]] == list(table)
    return general


@settings(max_examples=300, deadline=None)
@given(body=inflated_bodies(usual=True), per_step=st.sampled_from([1, 3, 7, 1 << 62]))
def test_usual_bodies_of_both_forms_read_as_the_general_reader_reads_them(body, per_step):
    inflated, version = body
    data = zlib.compress(inflated, 9)
    result = check_agrees(data, version, per_step)
    assert result[0] != "refused"
    read = fast(data, version, per_step, None)
    if len(read.topic_queues) == sum(1 for _ in read.topic_queues) and read.parts is not None:
        assert [n for p in read.parts for n in p.names] == list(read.topic_queues)


@settings(max_examples=500, deadline=None)
@given(body=inflated_bodies(usual=False), per_step=st.sampled_from([1, 4, 1 << 62]))
def test_unusual_bodies_read_or_refused_as_the_general_reader_does(body, per_step):
    inflated, version = body
    check_agrees(zlib.compress(inflated, 9), version, per_step)


@settings(max_examples=200, deadline=None)
@given(body=inflated_bodies(usual=True), cut=st.integers(1, 200), flip=st.integers(0, 10_000))
def test_truncated_and_damaged_bodies_are_answered_as_before(body, cut, flip):
    inflated, version = body
    packed = zlib.compress(inflated, 9)
    check_agrees(packed[: max(0, len(packed) - cut)], version, 3)  # bad zlib: truncated stream
    check_agrees(zlib.compress(inflated[: max(0, len(inflated) - cut)], 9), version, 3)
    damaged = bytearray(inflated)
    damaged[flip % len(damaged)] ^= 0x5A  # a lying length, a broken field, a NUL ...
    check_agrees(zlib.compress(bytes(damaged), 9), version, 3)


def test_the_usual_forms_take_the_fast_path_by_chunks():
    names = [f"T{i:06d}" for i in range(3_000)]
    for version, attrs in ((V4, ""), (V5, " {}")):
        inflated = bytearray(int32(2) + b"{}" + int32(len(names)))
        for name in names:
            text = f"{name} 8 8 6 SINGLE_TAG{attrs}".encode()
            inflated += int32(len(text)) + text
        inflated += int32(2) + b"[]" + (int32(0) if version == V5 else b"")
        data = zlib.compress(bytes(inflated), 9)
        cache = ChunkCache(1 << 20)
        read = fast(data, version, 200, cache)
        assert read.parts is not None and len(read.parts) > 5  # content-cut chunks
        assert [n for p in read.parts for n in p.names] == names
        assert read == register_oracle.read_compressed_general(data, version)
        misses = cache.misses
        assert fast(data, version, 200, cache) == read
        assert cache.misses == misses  # every chunk found again, none decoded


def test_a_compressed_table_is_cut_by_content():
    names = [f"T{i:06d}" for i in range(5_000)]
    table = {n: register_body.TopicConfig(n, 8, 8, 6) for n in names}

    def parts(table: dict[str, Any]) -> set[tuple[int, int]]:
        wrapper = register_body.TopicConfigSerializeWrapper(table, register_body.DataVersion())
        data = register_body.RegisterBrokerBody(wrapper, []).to_wire(compressed=True)
        read = fast(data, V5, 300, None)
        assert read.parts is not None
        return {p.key for p in read.parts}

    before = parts(table)
    grown = dict(list(table.items())[:2_500])
    grown["Inserted"] = register_body.TopicConfig("Inserted", 8, 8, 6)
    grown.update(list(table.items())[2_500:])
    changed = parts(grown) - before
    assert 1 <= len(changed) <= 3  # the inserted topic's chunk, its neighbour and the last


@pytest.mark.parametrize("junk", [b"", b"not zlib at all", zlib.compress(b"\x00\x00\x00")])
def test_bad_zlib_and_short_bodies_are_refused_with_the_general_readers_error(junk):
    expected = outcome(lambda: register_oracle.read_compressed_general(junk, V5))
    assert expected[0] == "refused"
    assert outcome(lambda: fast(junk, V5, 1 << 62, None)) == expected
