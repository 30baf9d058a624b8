"""The name server's lean read of a REGISTER_BROKER body: only queue counts, perm and sys flag
per topic, in steps a reactor turn long, validated as the full decode validates.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from functools import partial

from protocol.errors import BodyError
from protocol.register import compressed_fast, plain_fast, plain_general, read_table
from protocol.register.chunk_cache import ChunkCache
from protocol.register.read_table import (
    NO_LIMITS,
    ReadLimits,
    RegisterTable,
    TopicQueueSpec,
    check_topic_count,
    checked_table,
)
from protocol.register_body import (
    INT32,
    MAX_DATA_VERSION_BYTES,
    MAX_PART_BYTES,
    TOPIC_FILTER_TYPES,
    Inflated,
    compressed_tail_steps,
    data_version_part,
    inflate_steps,
    topic_config_from_text,
)


def register_body_steps(
    data: bytes,
    compressed: bool,
    broker_version: int,
    *,
    topics_per_step: int,
    bytes_per_step: int | None = None,
    chunk_cache: ChunkCache | None = None,
    limits: ReadLimits = NO_LIMITS,
) -> Generator[None, None, RegisterTable]:
    """Read a register body ``topics_per_step`` topic configs (of a plain body: about
    ``bytes_per_step`` bytes) at a time: a generator that yields between steps and returns the
    :class:`RegisterTable`, or raises :class:`BodyError`.

    A plain body in the usual form is decoded by msgspec into typed structs
    (:mod:`protocol.register.plain_fast`); otherwise the JSON (or the inflated chunks) is
    parsed in C, value by value, with only type checks per topic. Equal specs are one shared
    tuple. Anything unusual (a quoted number, a null, an attribute) takes the full decoder's
    path, which converts it or refuses it with the same error as before; a body the C parser
    refuses (fastjson's bare integer keys) is read whole by :func:`fastjson.loads`.

    ``limits`` are checked as the body is read (see :class:`ReadLimits`); a compressed body
    is inflated a slice at a time, a step each.
    """
    if compressed:
        return (
            yield from _compressed_body_steps(
                data, broker_version, topics_per_step, chunk_cache, limits
            )
        )
    chunk = bytes_per_step or max(1, topics_per_step) * plain_general.CHARS_PER_TOPIC
    try:
        return (
            yield from _fast_plain_steps(data, max(1, min(chunk, 1 << 62)), chunk_cache, limits)
        )
    except plain_fast.NotFast:
        pass
    return (yield from plain_general.general_plain_steps(data, topics_per_step, limits))


def _compressed_body_steps(
    data: bytes,
    broker_version: int,
    topics_per_step: int,
    cache: ChunkCache | None,
    limits: ReadLimits,
) -> Generator[None, None, RegisterTable]:
    """A compressed body inflated a slice per step, its records read the fast way when they
    are in the usual form, else by the general reader."""
    head = partial(_check_head, limits=limits)
    inflated = yield from inflate_steps(data, limits.max_inflate_ratio, check_head=head)
    try:
        return (
            yield from _fast_compressed_steps(
                inflated, broker_version, topics_per_step, cache, limits
            )
        )
    except plain_fast.NotFast:
        pass
    return (yield from compressed_general_steps(inflated, broker_version, topics_per_step, limits))


def _check_head(head: bytes, limits: ReadLimits) -> None:
    """The topic count a compressed body declares after its data version, checked as soon as
    the first slice is inflated (a head too short to hold it is read in full later)."""
    reader = Inflated(head)
    try:
        reader.chunk("dataVersion")
        count = reader.int32("topic count")
    except BodyError:
        return
    check_topic_count(count, limits)


def _fast_plain_steps(
    data: bytes,
    chunk_bytes: int,
    cache: ChunkCache | None,
    limits: ReadLimits,
) -> Generator[None, None, RegisterTable]:
    shape = plain_fast.outline(data)
    if len(data) > chunk_bytes:
        yield  # skipping a large body's parts is a step's work
    data_version, mapping, servers = shape.decoded(MAX_DATA_VERSION_BYTES, MAX_PART_BYTES)
    if len(shape.mapping) + len(shape.filter_server_list) > chunk_bytes:
        yield  # and so is decoding large parts
    table: dict[str, TopicQueueSpec] = {}
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    renamed: dict[str, str] = {}
    sink = plain_fast.TableSink(table, specs, renamed, cache, limits.max_attributes_bytes)
    for _ in plain_fast.table_steps(shape.table, chunk_bytes, sink):
        check_topic_count(len(table), limits)
        yield
    check_topic_count(len(table), limits)
    read = checked_table(table, specs, renamed, data_version, mapping, servers)
    parts = sink.parts
    if parts is None or sum(len(part.names) for part in parts) != len(table):
        return read  # a chunk read the general way, or a topic listed twice
    return replace(read, parts=tuple(parts))


def _fast_compressed_steps(
    inflated: bytes,
    broker_version: int,
    topics_per_step: int,
    cache: ChunkCache | None,
    limits: ReadLimits,
) -> Generator[None, None, RegisterTable]:
    """An inflated compressed body whose records are in the usual form, read in chunks of
    records (see :mod:`protocol.register.compressed_fast`); raises ``NotFast`` otherwise."""
    reader = Inflated(inflated)
    data_version = data_version_part(reader)
    count = reader.int32("topic count")
    check_topic_count(count, limits)
    table: dict[str, TopicQueueSpec] = {}
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    renamed: dict[str, str] = {}
    sink = plain_fast.TableSink(table, specs, renamed, cache, limits.max_attributes_bytes)
    chunk_bytes = max(1, min(topics_per_step, 1 << 40)) * _COMPRESSED_CHARS_PER_TOPIC
    records = compressed_fast.Records(inflated, reader.pos, count)
    reader.pos = yield from compressed_fast.records_steps(records, chunk_bytes, sink)
    servers, mapping = yield from compressed_tail_steps(reader, broker_version)
    read = RegisterTable(table, data_version, servers, mapping, tuple(specs), {})
    parts = sink.parts
    if parts is None or sum(len(part.names) for part in parts) != len(table):
        return read  # a topic listed twice
    return replace(read, parts=tuple(parts))


_COMPRESSED_CHARS_PER_TOPIC = 32
"""A topic record's usual size in an inflated compressed body: turns ``topics_per_step``
into bytes."""


def compressed_general_steps(
    inflated: bytes, broker_version: int, topics_per_step: int, limits: ReadLimits = NO_LIMITS
) -> Generator[None, None, RegisterTable]:
    """The general read of an inflated compressed body, topic by topic: what the fast read
    falls back to for a record of another shape."""
    reader = Inflated(inflated)
    data_version = data_version_part(reader)
    count = reader.int32("topic count")
    check_topic_count(count, limits)
    max_attributes = limits.max_attributes_bytes
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    table: dict[str, TopicQueueSpec] = {}
    unpack = INT32.unpack_from
    size = len(inflated)
    pos = reader.pos
    for _ in range(count):
        if pos + 4 > size:
            raise BodyError("compressed register body truncated in topic config length")
        (length,) = unpack(inflated, pos)
        end = pos + 4 + length
        if length < 0 or end > size:
            raise BodyError("compressed register body truncated in topic config")
        try:
            text = inflated[pos + 4 : end].decode()
        except UnicodeDecodeError:
            raise BodyError("compressed topic config is not UTF-8") from None
        pos = end
        parts = text.split(" ", 5)
        if (
            (len(parts) == 5 or (len(parts) == 6 and parts[5] == "{}"))  # 4.x has no attributes
            and parts[4] in TOPIC_FILTER_TYPES
            and parts[1].isascii()
            and parts[1].isdigit()
            and parts[2].isascii()
            and parts[2].isdigit()
            and parts[3].isascii()
            and parts[3].isdigit()
            and len(parts[1]) < 20
            and len(parts[2]) < 20
            and len(parts[3]) < 20
        ):
            name = parts[0]
            spec = TopicQueueSpec(int(parts[1]), int(parts[2]), int(parts[3]), 0)
        else:
            if len(parts) == 6 and len(parts[5].encode()) > max_attributes:
                raise read_table.attributes_too_long(
                    parts[0], len(parts[5].encode()), max_attributes
                )
            tc = topic_config_from_text(text)
            name = tc.topic_name
            spec = TopicQueueSpec(tc.read_queue_nums, tc.write_queue_nums, tc.perm, 0)
        table[name] = specs.setdefault(spec, spec)
        if len(table) % topics_per_step == 0:
            yield
    reader.pos = pos
    servers, mapping = yield from compressed_tail_steps(reader, broker_version)
    return RegisterTable(table, data_version, servers, mapping, tuple(specs), {})
