"""What makes a register body the same as another: a plain body cut around its data version
(two bodies with the same cut key differ only in the version, never in anything the full reader
reads), and a large body's table kept by the body's digest."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support import register_oracle
from support.register_bodies import compressed_body, plain_body, topic_names

from protocol.codes import CURRENT_VERSION
from protocol.errors import LimitError
from protocol.register import identity
from protocol.register.read import TABLE_BYTES_PER_TOPIC, ChunkCache, register_body_steps
from protocol.register.steps import whole
from protocol.register.table import NO_LIMITS, ReadLimits, RegisterTable, TablePart, TopicQueueSpec
from protocol.route_model import DataVersion


def fastjson_version(v: DataVersion, *, v4: bool = False) -> dict[str, int]:
    doc = {"counter": v.counter, "stateVersion": v.state_version, "timestamp": v.timestamp}
    if v4:
        del doc["stateVersion"]
    return doc


def body_of(version: DataVersion, names: list[str], *, v4: bool = False, **extra: Any) -> bytes:
    doc = {
        "filterServerList": [],
        "topicConfigSerializeWrapper": {
            "dataVersion": fastjson_version(version, v4=v4),
            "topicConfigTable": {
                n: {
                    "attributes": extra.get("attributes", {}),
                    "perm": 6,
                    "readQueueNums": 4,
                    "topicName": n,
                    "writeQueueNums": 4,
                }
                for n in names
            },
            "topicQueueMappingInfoMap": {},
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def read(body: bytes) -> RegisterTable:
    return register_oracle.read_register_body(body, False, CURRENT_VERSION)


@pytest.mark.parametrize("v4", [False, True], ids=["5.x", "4.x"])
def test_bodies_differing_only_in_the_version_share_a_key_and_certify(v4):
    names = [f"T{i}" for i in range(50)]
    a = body_of(DataVersion(0, 1_700_000_000_000, 9), names, v4=v4)
    b = body_of(DataVersion(0 if v4 else 3, 1_700_000_000_123, 10), names, v4=v4)  # one digit more
    cut_a, cut_b = identity.cut(a), identity.cut(b)
    assert cut_a is not None and cut_b is not None
    assert cut_a.key == cut_b.key
    assert cut_b.version == read(b).data_version
    assert identity.certify(a, cut_a, read(a).data_version)


def test_another_table_gets_another_key():
    names = [f"T{i}" for i in range(50)]
    a = identity.cut(body_of(DataVersion(0, 5, 5), names))
    b = identity.cut(body_of(DataVersion(0, 5, 5), [*names, "T50"]))
    c = identity.cut(body_of(DataVersion(0, 5, 5), names, attributes={"k": "v"}))
    assert a is not None and b is not None and c is not None
    assert len({a.key, b.key, c.key}) == 3


@pytest.mark.parametrize(
    "why, body",
    [
        ("a backslash", body_of(DataVersion(0, 5, 5), ["A"], attributes={"k": 'say "hi"'})),
        ("the key twice", body_of(DataVersion(0, 5, 5), ["A"], attributes={"dataVersion": "x"})),
        ("a topic so named", body_of(DataVersion(0, 5, 5), ["dataVersion"])),
        ("the zero version", body_of(DataVersion(), ["A"])),
    ],
)
def test_bodies_the_cut_could_misread_are_not_certified(why, body):
    found = identity.cut(body)
    assert found is not None
    assert not identity.certify(body, found, read(body).data_version), why


def test_a_decoy_read_as_another_version_is_not_certified():
    # The first "dataVersion" is an unknown top-level key; the real one, spelled with an
    # escape, comes later and says something else.
    body = (
        b'{"dataVersion":{"counter":1,"stateVersion":0,"timestamp":1},'
        b'"topicConfigSerializeWrapper":{"data\\u0056ersion":'
        b'{"counter":7,"stateVersion":0,"timestamp":7},"topicConfigTable":{"A":{"perm":6}}}}'
    )
    found = identity.cut(body)
    assert found is not None and found.version == DataVersion(0, 1, 1)
    assert read(body).data_version == DataVersion(0, 7, 7)
    assert not identity.certify(body, found, read(body).data_version)


@pytest.mark.parametrize(
    "text",
    [
        b'{"x":1}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":"1","timestamp":1}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":01,"timestamp":1}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1,"x":2}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1234567890123456789,'
        b'"timestamp":1}}}',
    ],
)
def test_versions_not_in_fastjson_form_are_not_cut(text):
    assert identity.cut(text) is None


versions = st.one_of(
    st.just(DataVersion()),  # also what a body without the key reads as
    st.builds(
        DataVersion,
        state_version=st.integers(0, 5),
        timestamp=st.integers(0, 10**13),
        counter=st.integers(0, 10**6),
    ),
)
words = st.text(st.sampled_from('ab"\\:{}, dataVersion'), min_size=1, max_size=14)


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(words, min_size=1, max_size=6, unique=True),
    attrs=st.dictionaries(words, words, max_size=2),
    real=st.sampled_from(["plain", "escaped", "absent"]),
    decoy=st.sampled_from([None, "top", "mapping", "servers"]),
    v1=versions,
    decoy_version=versions,
    v2=versions,
)
def test_a_certified_key_means_only_the_version_differs(
    names, attrs, real, decoy, v1, decoy_version, v2
):
    wrapper: dict[str, Any] = {}
    if real != "absent":
        wrapper["dataVersion"] = fastjson_version(v1)
    wrapper["topicConfigTable"] = {
        n: {"attributes": attrs, "perm": 6, "readQueueNums": 2, "topicName": n} for n in names
    }
    wrapper["topicQueueMappingInfoMap"] = (
        {"dataVersion": fastjson_version(decoy_version)} if decoy == "mapping" else {}
    )
    doc: dict[str, Any] = {}
    if decoy == "top":
        doc["dataVersion"] = fastjson_version(decoy_version)
    doc["filterServerList"] = ['"dataVersion":{}'] if decoy == "servers" else []
    doc["topicConfigSerializeWrapper"] = wrapper
    b1 = json.dumps(doc, separators=(",", ":")).encode()
    if real == "escaped":
        b1 = (
            b1.replace(b'"dataVersion":', b'"data\\u0056ersion":', 1)
            if decoy != "top"
            else (b1.replace(b'{"dataVersion":{"counter', b'{"data\\u0056ersion":{"counter', 1))
        )
    found = identity.cut(b1)
    assume(found is not None)
    assert found is not None
    first = read(b1)
    certified = identity.certify(b1, found, first.data_version)
    if real == "plain" and decoy is None and b"\\" not in b1 and v1 != DataVersion():
        assert certified  # the usual body: the shortcut must not be refused
    end = len(b1) - found.key.after
    text = json.dumps(fastjson_version(v2), separators=(",", ":")).encode()
    b2 = b1[: found.key.start] + text + b1[end:]
    again = identity.cut(b2)
    assert again is not None and again.key == found.key
    if certified:
        second = read(b2)
        assert second.data_version == again.version == v2
        assert second.topic_queues == first.topic_queues
        assert second.filter_server_list == first.filter_server_list
        assert second.topic_queue_mapping_info_map == first.topic_queue_mapping_info_map
        assert second.renamed == first.renamed


def test_a_large_body_hashed_through_a_view_keys_as_a_small_one_would():
    names = [f"T{i:06d}" for i in range(12_000)]  # over 1 MiB of JSON
    a, b = body_of(DataVersion(0, 5, 5), names), body_of(DataVersion(0, 6, 66), names)
    c = body_of(DataVersion(0, 5, 5), names[:-1])
    assert len(a) > 1 << 20
    cuts = [identity.cut(x) for x in (a, b, c)]
    assert all(cuts)
    assert cuts[0].key == cuts[1].key != cuts[2].key  # type: ignore[union-attr]
    assert identity.certify(a, cuts[0], read(a).data_version)  # type: ignore[arg-type]


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
def test_a_digest_compared_across_brokers_does_not_rest_on_the_fast_hash(monkeypatch, compressed):
    """A large body's digest finds tables other brokers' bodies were read into: a collision a
    broker could build in the fast hash must not make its bytes another's table. With the fast
    hash broken (every input collides), small bodies' digests collide and large ones' do not."""
    monkeypatch.setattr(identity, "xxh3_64_intdigest", lambda data, seed: 0)
    names = [f"T{i}" for i in range(50)]
    one = body_of(DataVersion(0, 5, 5), names, attributes={"k": "a"})
    other = body_of(DataVersion(0, 5, 5), names, attributes={"k": "b"})  # same length
    assert len(one) == len(other) and one != other

    def digest(body: bytes, sliced: bool) -> bytes:
        return whole(identity.digest_steps(body, compressed, 0, sliced))[0]

    assert digest(one, False) == digest(other, False)  # what a broken fast hash gives
    assert digest(one, True) != digest(other, True)


def _digest_read(
    body: bytes, compressed: bool, cache: ChunkCache, limits: ReadLimits = NO_LIMITS
) -> tuple[RegisterTable, int]:
    """The table read with the body's digest and cut, as a large body's, and the steps it took."""
    digest, cut = whole(identity.digest_steps(body, compressed, 0, True))
    steps = register_body_steps(
        body,
        compressed,
        CURRENT_VERSION,
        topics_per_step=500,
        bytes_per_step=16_384,
        chunk_cache=cache,
        limits=limits,
        digest=digest,
        cut=cut,
    )
    taken = 0
    while True:
        try:
            next(steps)
            taken += 1
        except StopIteration as done:
            return done.value, taken


@pytest.mark.parametrize("compressed", [False, True])
def test_a_body_read_before_by_any_broker_is_its_table_again_without_a_step(compressed):
    names = topic_names(3_000)
    body = compressed_body(names, 7) if compressed else plain_body(names, 7)
    cache = ChunkCache(64 << 20)
    first, first_steps = _digest_read(body, compressed, cache)
    decoded = cache.misses
    again, again_steps = _digest_read(body, compressed, cache)
    assert first_steps > 1 and again_steps == 0
    assert again == first == register_oracle.read_register_body(body, compressed, CURRENT_VERSION)
    assert cache.table_hits == 1 and cache.misses == decoded  # no chunk looked up again
    other = compressed_body(names, 8) if compressed else plain_body(names, 8)
    changed, _ = _digest_read(other, compressed, cache)
    assert changed == register_oracle.read_register_body(other, compressed, CURRENT_VERSION)
    assert changed.data_version != first.data_version
    # A plain body of another version is found by its cut; a compressed one is read again.
    assert cache.table_hits == (1 if compressed else 2)


def test_a_plain_body_equal_to_one_read_but_for_its_version_is_its_table_without_a_step():
    """A cluster's brokers send the same topics, each with a data version of its own."""
    names = [f"T{i}" for i in range(3_000)]
    cache = ChunkCache(64 << 20)
    first, first_steps = _digest_read(body_of(DataVersion(0, 5, 5), names), False, cache)
    other = body_of(DataVersion(2, 1_700_000_000_123, 77), names)
    again, again_steps = _digest_read(other, False, cache)
    assert first_steps > 1 and again_steps == 0 and cache.table_hits == 1
    assert again == read(other) and again.data_version == DataVersion(2, 1_700_000_000_123, 77)
    assert again.topic_queues is first.topic_queues  # the very table, with its own version


@pytest.mark.parametrize(
    "why, names, attributes",
    [
        ("a backslash", [f"T{i}" for i in range(3_000)], {"k": 'say "hi"'}),
        ("the key twice", [f"T{i}" for i in range(2_999)] + ["dataVersion"], {}),
    ],
)
def test_a_body_the_cut_could_misread_is_never_found_by_its_cut(why, names, attributes):
    cache = ChunkCache(64 << 20)
    _digest_read(body_of(DataVersion(0, 5, 5), names, attributes=attributes), False, cache)
    other = body_of(DataVersion(0, 6, 6), names, attributes=attributes)
    again, steps = _digest_read(other, False, cache)
    assert steps > 0 and cache.table_hits == 0 and again == read(other)


def test_a_table_read_under_other_limits_is_read_again():
    body = plain_body(topic_names(3_000), 7)
    cache = ChunkCache(64 << 20)
    _digest_read(body, False, cache)
    with pytest.raises(LimitError):
        _digest_read(body, False, cache, ReadLimits(max_topics=2_999))
    assert cache.table_hits == 0


def test_cached_tables_are_charged_per_topic_and_leave_before_chunks():
    body = plain_body(topic_names(3_000), 7)
    cache = ChunkCache(64 << 20)
    table, _ = _digest_read(body, False, cache)
    assert table.parts is not None
    chunks = len(cache)
    tables = TABLE_BYTES_PER_TOPIC * 3_000
    assert cache.bytes == sum(part.key[0] for part in table.parts) + tables
    cache.max_bytes = cache.bytes  # full: one more byte and something leaves
    spec = TopicQueueSpec(8, 8, 6, 0)
    cache.put(TablePart.of((1, 0), ["X"], [spec], {}, (spec,)))
    assert len(cache) == chunks + 1 and cache.bytes == cache.max_bytes + 1 - tables
    misses = cache.misses
    again, steps = _digest_read(body, False, cache)
    assert steps > 0 and cache.table_hits == 0 and again == table
    assert cache.misses == misses  # read again, from the chunks kept


def test_a_large_body_is_certified_a_slice_per_step_and_a_key_past_a_cut_still_counts(
    monkeypatch,
):
    """Certifying a large body is steps of a slice each; a key spelled across a slice's end
    is counted once, so a second one there still refuses the certificate."""
    names = [f"T{i}" for i in range(300)]
    body = body_of(DataVersion(0, 1_700_000_000_000, 9), names)
    found = identity.cut(body)
    assert found is not None
    version = read(body).data_version
    monkeypatch.setattr(identity, "HASH_SLICE_BYTES", 1000)
    steps = identity.certify_steps(body, found, version)
    taken = 0
    with pytest.raises(StopIteration) as done:
        while True:
            next(steps)
            taken += 1
    assert done.value.value is True
    assert taken == -(-len(body) // 1000) - 1
    # a second key, straddling the boundary of two slices
    second = body.index(b'"T150"')
    at = 1000 * (second // 1000 + 1) - 5
    doubled = body[:at] + b'"dataVersion"' + body[at:]
    assert not identity.certify(doubled, found, version)


def test_a_large_body_is_cut_a_slice_per_step_and_every_slice_counts(monkeypatch):
    """The keyed hash of a large body's bytes around its version takes a step per slice; the
    same bytes give the same key, a byte changed in any slice another."""
    monkeypatch.setattr(identity, "HASH_SLICE_BYTES", 1000)
    names = [f"T{i}" for i in range(300)]
    a = body_of(DataVersion(0, 5, 5), names)
    b = body_of(DataVersion(0, 6, 66), names)
    changed = bytearray(a)
    changed[len(a) // 2] ^= 1  # inside some middle slice of the tail
    steps = identity.cut_steps(a, shared=True)
    taken = 0
    with pytest.raises(StopIteration) as done:
        while True:
            next(steps)
            taken += 1
    found = done.value.value
    assert taken >= len(a) // 1000 - 1
    other, odd = identity.cut(b, shared=True), identity.cut(bytes(changed), shared=True)
    assert other is not None and odd is not None
    assert found.key == other.key != odd.key
    assert identity.cut(a) is not None  # the fast hash: no steps
    assert list(identity.cut_steps(a, shared=False)) == []
