"""The name server's lean register-body reader agrees with the full decoder, in slices too."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import register_oracle

from protocol import bodies, register_body
from protocol.codes import CURRENT_VERSION, Version
from protocol.errors import LimitError
from protocol.register import plain, read
from protocol.register.table import ReadLimits, RegisterTable, TopicQueueSpec
from protocol.route_model import DataVersion, TopicConfig

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
configs = st.builds(
    TopicConfig,
    topic_name=st.just(""),
    read_queue_nums=st.integers(0, 1024),
    write_queue_nums=st.integers(0, 1024),
    perm=st.integers(0, 15),
    topic_filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    topic_sys_flag=st.integers(0, 3),
    order=st.booleans(),
    attributes=st.dictionaries(names, names, max_size=2),
)
tables = st.dictionaries(names.filter(lambda n: " " not in n), configs, max_size=30)


def expected(body: register_body.RegisterBrokerBody) -> RegisterTable:
    wrapper = body.topic_config_serialize_wrapper
    table = {
        name: TopicQueueSpec(tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
        for name, tc in wrapper.topic_config_table.items()
    }
    return RegisterTable(
        table,
        wrapper.data_version,
        list(body.filter_server_list),
        dict(wrapper.topic_queue_mapping_info_map),
        tuple(dict.fromkeys(table.values())),
        {n: tc.topic_name for n, tc in wrapper.topic_config_table.items() if tc.topic_name != n},
    )


def with_names(table: dict[str, TopicConfig]) -> dict[str, TopicConfig]:
    return {
        n: TopicConfig(n, *(getattr(tc, f) for f in TopicConfig.__slots__[1:]))  # type: ignore[arg-type]
        for n, tc in table.items()
    }


@settings(max_examples=150, deadline=None)
@given(table=tables, compressed=st.booleans(), servers=st.lists(names, max_size=2))
def test_lean_reader_agrees_with_the_full_decoder(table, compressed, servers):
    wrapper = register_body.TopicConfigSerializeWrapper(with_names(table), DataVersion(1, 2, 3))
    data = register_body.RegisterBrokerBody(wrapper, servers).to_wire(compressed)
    full = register_oracle.decode_register_body(data, compressed, CURRENT_VERSION)
    assert register_oracle.read_register_body(data, compressed, CURRENT_VERSION) == expected(full)


@pytest.mark.parametrize("indent", [None, 2])
def test_whitespace_unknown_fields_and_quoted_numbers_read_as_the_full_decoder(indent):
    doc = {
        "unknown": [1, {"x": None}],
        "topicConfigSerializeWrapper": {
            "mappingDataVersion": {"counter": 0},
            "topicConfigTable": {
                "A": {"perm": "6", "readQueueNums": 2, "writeQueueNums": 2},
                "B": {"readQueueNums": None, "topicName": "B", "attributes": {"k": "v"}},
                "C": {},
            },
            "dataVersion": {"counter": 9, "stateVersion": 1, "timestamp": 2},
        },
        "filterServerList": ["10.0.0.1:1"],
    }
    data = json.dumps(doc, indent=indent).encode()
    full = register_oracle.decode_register_body(data, False, CURRENT_VERSION)
    assert register_oracle.read_register_body(data, False, CURRENT_VERSION) == expected(full)


def test_fastjson_bare_integer_keys_fall_back_to_the_tolerant_parser():
    data = (
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1},'
        b'"topicConfigTable":{"T":{"perm":6}},'
        b'"topicQueueMappingInfoMap":{"T":{"topic":"T","currIdMap":{0:"b"}}}}}'
    )
    full = register_oracle.decode_register_body(data, False, Version.V5_0_0)
    lean = register_oracle.read_register_body(data, False, Version.V5_0_0)
    assert lean == expected(full)
    assert lean.topic_queue_mapping_info_map["T"]["currIdMap"] == {"0": "b"}


@pytest.mark.parametrize("compressed", [False, True])
def test_steps_yield_between_slices_of_topics(compressed):
    table = {f"T{i}": TopicConfig(f"T{i}", 4, 4, 6) for i in range(1_000)}
    wrapper = register_body.TopicConfigSerializeWrapper(table, DataVersion(0, 1, 1))
    data = register_body.RegisterBrokerBody(wrapper, []).to_wire(compressed)
    steps = read.register_body_steps(data, compressed, CURRENT_VERSION, topics_per_step=100)
    yields = 0
    while True:
        try:
            next(steps)
            yields += 1
        except StopIteration as done:
            result = done.value
            break
    assert 5 <= yields <= 20  # a chunk of text per step, about 100 topics each
    assert len(result.topic_queues) == 1_000
    assert len({id(spec) for spec in result.topic_queues.values()}) == 1  # one shared spec


@pytest.mark.parametrize("per_step", [1, 3, 50])
def test_chunks_cut_at_a_false_boundary_inside_strings_are_refused_and_read_right(per_step):
    evil = '},"x":{'
    table = {
        f"T{i}": {
            "attributes": {"a": evil * (i % 3)},
            "perm": 6,
            "readQueueNums": i % 7,
            "writeQueueNums": 2,
            "topicName": f"T{i}" + evil * (i % 2),
        }
        for i in range(200)
    }
    doc = {"topicConfigSerializeWrapper": {"topicConfigTable": table}}
    data = json.dumps(doc, separators=(",", ":")).encode()
    steps = read.register_body_steps(data, False, CURRENT_VERSION, topics_per_step=per_step)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            lean = done.value
            break
    full = register_oracle.decode_register_body(data, False, CURRENT_VERSION)
    assert lean == expected(full)


def _read(data: bytes, **steps: Any) -> RegisterTable:
    reading = read.register_body_steps(data, False, CURRENT_VERSION, **steps)
    while True:
        try:
            next(reading)
        except StopIteration as done:
            table: RegisterTable = done.value
            return table


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("the general reader ran")


def _fastjson_body(count: int, unusual: int | None = None) -> bytes:
    table = {
        f"T{i}": {
            "attributes": {},
            "order": False,
            "perm": "6" if i == unusual else 6,
            "readQueueNums": i % 5,
            "topicFilterType": "SINGLE_TAG",
            "topicName": f"T{i}",
            "topicSysFlag": 0,
            "writeQueueNums": 8,
        }
        for i in range(count)
    }
    doc = {
        "filterServerList": [],
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": 3, "stateVersion": 0, "timestamp": 7},
            "topicConfigTable": table,
            "topicQueueMappingInfoMap": {},
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def test_a_usual_body_is_read_by_the_typed_decoder_alone(monkeypatch):
    data = _fastjson_body(2_000)
    monkeypatch.setattr(plain, "plain_steps", _never)
    monkeypatch.setattr(plain, "add_specs", _never)
    lean = _read(data, topics_per_step=100, bytes_per_step=4_096)
    monkeypatch.undo()
    full = register_oracle.decode_register_body(data, False, CURRENT_VERSION)
    assert lean == expected(full)
    assert len(lean.specs) == 5  # topics share one spec per distinct (queues, perm, flag)


class _Refusing:
    """A decoder that must not be used."""

    def decode(self, data: bytes) -> object:
        raise AssertionError("the decoder of attributes ran")


def test_chunks_whose_attributes_are_all_empty_are_decoded_without_them(monkeypatch):
    data = _fastjson_body(2_000).replace(
        b'"attributes":{},"order":false,"perm":6,"readQueueNums":3',
        b'"attributes":null,"order":false,"perm":6,"readQueueNums":3',
    )
    assert data.count(b'"attributes":null') == 400
    monkeypatch.setattr(plain, "_TABLE", _Refusing())
    lean = _read(data, topics_per_step=100, bytes_per_step=4_096)
    monkeypatch.undo()
    full = register_oracle.decode_register_body(data, False, CURRENT_VERSION)
    assert lean == expected(full)


def test_a_chunk_with_attributes_has_them_decoded_and_bounded(monkeypatch):
    data = _fastjson_body(2_000).replace(
        b'"T1500":{"attributes":{}', b'"T1500":{"attributes":{"k":"vvvv"}'
    )
    assert b'"attributes":{"k":"vvvv"}' in data
    decoded: list[int] = []
    table = plain._TABLE

    class Counting:
        def decode(self, chunk: bytes) -> object:
            decoded.append(len(chunk))
            return table.decode(chunk)

    monkeypatch.setattr(plain, "_TABLE", Counting())
    lean = _read(data, topics_per_step=100, bytes_per_step=4_096)
    monkeypatch.undo()
    full = register_oracle.decode_register_body(data, False, CURRENT_VERSION)
    assert lean == expected(full)
    assert len(decoded) == 1  # the chunk holding them, not the body
    limits = ReadLimits(max_attributes_bytes=11)
    with pytest.raises(LimitError, match=r"T1500.*attributes is 12 bytes"):
        _read(data, topics_per_step=100, bytes_per_step=4_096, limits=limits)


def test_only_the_chunk_holding_an_unusual_value_takes_the_general_decoder(monkeypatch):
    data = _fastjson_body(2_000, unusual=1_500)
    general: list[int] = []
    add_specs = plain.add_specs

    def counting(table, specs, renamed, parsed, **limits):  # type: ignore[no-untyped-def]
        general.append(len(parsed))
        add_specs(table, specs, renamed, parsed, **limits)

    monkeypatch.setattr(plain, "plain_steps", _never)
    monkeypatch.setattr(plain, "add_specs", counting)
    lean = _read(data, topics_per_step=100, bytes_per_step=4_096)
    monkeypatch.undo()
    full = register_oracle.decode_register_body(data, False, CURRENT_VERSION)
    assert lean == expected(full)
    assert len(general) == 1 and general[0] < 100  # one chunk of about 4 KiB, not the body


@pytest.mark.parametrize(
    "body",
    [
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":6}}}} trailing',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":[1]}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":1.5}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":6}},'
        b'"topicQueueMappingInfoMap":[]}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":6}},'
        b'"dataVersion":{"counter":"x"}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"perm":6',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"topicName":"\xff"}}}}',
    ],
)
def test_malformed_bodies_are_refused_as_the_full_decoder_refuses_them(body):
    with pytest.raises(bodies.BodyError) as full:
        register_oracle.decode_register_body(body, False, CURRENT_VERSION)
    for per_step in (1, 1 << 20):
        with pytest.raises(bodies.BodyError) as lean:
            _read(body, topics_per_step=per_step, bytes_per_step=per_step)
        assert str(lean.value) == str(full.value)


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":' * 2000 + b"1" + b"}" * 2000,
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"attributes":'
        + b'{"a":' * 2000
        + b'"x"'
        + b"}" * 2004,
    ],
    ids=["whole-body", "in-the-table"],
)
def test_a_body_nested_past_any_parser_depth_is_refused_by_the_nesting_bound(body):
    for per_step in (1, 1 << 20):
        with pytest.raises(bodies.BodyError) as lean:
            _read(body, topics_per_step=per_step, bytes_per_step=per_step)
        assert "nests deeper than" in str(lean.value)
