"""The name server's lean read of a REGISTER_BROKER body: only queue counts, perm and sys flag
per topic, in steps a reactor turn long, validated as the full decode validates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

from protocol import fastjson
from protocol.errors import BodyError, LimitError
from protocol.json_fields import as_list, as_object, load_object, or_empty
from protocol.register import compressed_fast, plain_fast
from protocol.register.chunk_cache import ChunkCache, TablePart
from protocol.register_body import (
    INT32,
    MAX_DATA_VERSION_BYTES,
    MAX_INFLATE_RATIO,
    MAX_PART_BYTES,
    TOPIC_FILTER_TYPES,
    Inflated,
    compressed_tail_steps,
    data_version_from,
    data_version_part,
    inflate,
    inflate_steps,
    topic_config_from,
    topic_config_from_text,
)
from protocol.route_model import (
    DataVersion,
)


class TopicQueueSpec(NamedTuple):
    """The part of a topic config the name server keeps: what its queue data is made of."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int


@dataclass(frozen=True, slots=True)
class RegisterTable:
    """What the name server reads of a REGISTER_BROKER body (see :func:`read_register_body`)."""

    topic_queues: dict[str, TopicQueueSpec]
    data_version: DataVersion
    filter_server_list: list[str]
    topic_queue_mapping_info_map: dict[str, Any]
    specs: tuple[TopicQueueSpec, ...] = ()
    """The distinct specs of ``topic_queues`` (what a range check needs to look at)."""
    renamed: dict[str, str] = field(default_factory=dict)
    """Table keys whose topic config names another topic (key -> its ``topicName``)."""
    parts: tuple[TablePart, ...] | None = field(default=None, compare=False)
    """The table's chunks as read, in order, when every chunk was read the usual way and no
    topic is listed twice: what lets the registry skip chunks it applied already."""


class ReadLimits(NamedTuple):
    """What a register body may hold, checked as it is read: past one, :class:`LimitError`
    before the rest is read."""

    max_topics: int = 1 << 62
    """Topic configs in its table (of a compressed body: as it declares before them)."""
    max_attributes_bytes: int = 1 << 62
    """One topic's attributes: their JSON text as sent (re-encoded compactly where the body
    is read the general way)."""
    max_inflate_ratio: int = MAX_INFLATE_RATIO
    """A compressed body may inflate this many times its size (see ``inflate_limit``)."""
    max_general_bytes: int = 1 << 62
    """A plain body not in the usual form (which the fast read takes in slices) is read whole
    by the general path: only up to this size."""


NO_LIMITS = ReadLimits()


def read_register_body(data: bytes, compressed: bool, broker_version: int) -> RegisterTable:
    """A register body, validated as :meth:`RegisterBrokerBody.from_wire` validates it, but
    keeping only queue counts, perm and sys flag per topic (see :func:`register_body_steps`)."""
    steps = register_body_steps(data, compressed, broker_version, topics_per_step=1 << 62)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            table: RegisterTable = done.value
            return table


def read_compressed_general(data: bytes, broker_version: int) -> RegisterTable:
    """A compressed register body read topic by topic by the general reader, as
    :meth:`RegisterBrokerBody.from_wire` reads it: what the fast read must equal, errors
    included."""
    steps = _compressed_steps(inflate(data), broker_version, topics_per_step=1 << 62)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            table: RegisterTable = done.value
            return table


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
    chunk = bytes_per_step or max(1, topics_per_step) * _CHARS_PER_TOPIC
    try:
        return (
            yield from _fast_plain_steps(data, max(1, min(chunk, 1 << 62)), chunk_cache, limits)
        )
    except plain_fast.NotFast:
        pass
    return (yield from _general_plain_steps(data, topics_per_step, limits))


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
    return (yield from _compressed_steps(inflated, broker_version, topics_per_step, limits))


def _general_plain_steps(
    data: bytes, topics_per_step: int, limits: ReadLimits
) -> Generator[None, None, RegisterTable]:
    """A plain body not in the usual form: the C scanner value by value, or, for a body it
    refuses, the whole document by :func:`fastjson.loads`; only up to
    ``limits.max_general_bytes``."""
    if len(data) > limits.max_general_bytes:
        raise LimitError(
            f"RegisterBrokerBody of {len(data)} bytes is not in the usual form (standard JSON "
            f"as upstream brokers write it), which is read only up to {limits.max_general_bytes}"
            " bytes (registry.register_read_slice_bytes)",
            "register_read_slice_bytes",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"JSON body is not valid UTF-8 (byte {exc.start})") from exc
    if not text.strip():
        raise BodyError("RegisterBrokerBody body is empty")
    try:
        table = yield from _plain_steps(text, topics_per_step, limits)
    except _NotPlain:
        doc = load_object(data, "RegisterBrokerBody")  # fastjson's form, or the precise error
        table = _table_from_doc(doc, limits)
    check_topic_count(len(table.topic_queues), limits)
    return table


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


def check_topic_count(count: int, limits: ReadLimits) -> None:
    if count > limits.max_topics:
        raise LimitError(
            f"RegisterBrokerBody holds {count} topics, more than {limits.max_topics} "
            "(registry.max_topics_per_broker)",
            "max_topics_per_broker",
        )


class _NotPlain(Exception):
    """The body is not standard JSON of the expected shape: read it the general way."""


_WS = re.compile(r"[ \t\n\r]*")


_SCANNER: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder(
    parse_constant=fastjson.refuse_constant
).scan_once  # type: ignore[attr-defined]


"""The C scanner's entry point: one JSON value at a position, to the position after it."""


scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _value(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _SCANNER(text, pos)
    except (ValueError, StopIteration, RecursionError):
        raise _NotPlain from None


def _members(
    text: str, pos: int, *, at_member: bool = False
) -> Generator[tuple[str, int], int, int]:
    """The keys of the JSON object at ``pos`` (or, ``at_member``, of the object whose next
    member starts at ``pos``), each with the position of its value. The consumer reads the
    value and sends back (``.send``) the position after it; returns the position after the
    object."""
    if not at_member:
        if pos >= len(text) or text[pos] != "{":
            raise _NotPlain
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        if text.startswith("}", pos):
            return pos + 1
    while True:
        if not text.startswith('"', pos):
            raise _NotPlain
        try:
            key, pos = scanstring(text, pos + 1)
        except ValueError:
            raise _NotPlain from None
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(":", pos):
            raise _NotPlain
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        pos = yield key, pos
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith("}", pos):
            return pos + 1
        if not text.startswith(",", pos):
            raise _NotPlain
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]


_ENTRY_CUT = re.compile(r'\},"[^"\\]*":\{')


"""Where one topic config likely ends and the next begins (fastjson writes ``attributes``
first, so a nested object never precedes a key whose value is an object)."""


_CHARS_PER_TOPIC = 128


"""A topic config's usual size in the plain body: turns ``topics_per_step`` into text."""


def _table_steps(
    text: str, pos: int, sink: plain_fast.TableSink, topics_per_step: int
) -> Generator[None, None, int]:
    """Read the topicConfigTable object at ``pos`` into ``sink``, a chunk of members at a
    time (see :func:`_chunk_steps`), the rest member by member when the chunks' cuts fail;
    returns the position after it."""
    start = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("}", start):
        return start + 1
    start, end = yield from _chunk_steps(text, start, sink, topics_per_step)
    if end >= 0:
        return end
    # Unusual text: the rest member by member (a failure there reads the body the slow way).
    entries = _members(text, start, at_member=True)
    count = 0
    try:
        name, vat = next(entries)
        while True:
            tc, vend = _value(text, vat)
            sink.add_parsed({name: tc})
            count += 1
            if count % topics_per_step == 0:
                yield
            name, vat = entries.send(vend)
    except StopIteration as stop:
        end_pos: int = stop.value
    return end_pos


def _chunk_steps(
    text: str, start: int, sink: plain_fast.TableSink, topics_per_step: int
) -> Generator[None, None, tuple[int, int]]:
    """The table's members from ``start``, a chunk at a time: (where reading stopped, the
    position after the table), the latter -1 when a chunk's cut could not be found.

    A chunk ends where :data:`_ENTRY_CUT` guesses a member ends, and is parsed whole by the
    C parser as ``{chunk}``. The guess needs no trust: a chunk that parses as an object is a
    prefix of the members ending outside any string at depth zero, so the comma after it
    separates members of the table. A guess that does not parse is retried further on; after
    a few, the caller reads the rest member by member.
    """
    chunk_chars = max(1, topics_per_step) * _CHARS_PER_TOPIC
    size = len(text)
    while True:
        if size - start <= 2 * chunk_chars:  # the last chunk: up to the table's own end
            try:
                parsed, end = _SCANNER("{" + text[start:], 0)
            except (ValueError, StopIteration, RecursionError):
                return start, -1
            sink.add_parsed(parsed)
            return start, start - 1 + end
        cut = -1
        search_from = start + chunk_chars
        for _ in range(4):
            found = _ENTRY_CUT.search(text, search_from)
            if found is None:
                break
            try:
                parsed = json.loads(
                    "{" + text[start : found.start() + 1] + "}",
                    parse_constant=fastjson.refuse_constant,
                )
            except (ValueError, RecursionError):
                search_from = found.start() + 1
                continue
            cut = found.start() + 1  # the comma between two members
            break
        if cut < 0:
            return start, -1
        sink.add_parsed(parsed)
        start = cut + 1
        yield


def _add_specs(
    table: dict[str, TopicQueueSpec],
    specs: dict[TopicQueueSpec, TopicQueueSpec],
    renamed: dict[str, str],
    parsed: dict[str, Any],
    max_attributes_bytes: int = 1 << 62,
) -> None:
    for name, tc in parsed.items():
        spec = _quick_spec(tc, name)
        if spec is None:
            full = topic_config_from(tc, name)
            if full.attributes:
                length = len(fastjson.dumps(full.attributes))
                if length > max_attributes_bytes:
                    raise plain_fast.attributes_too_long(name, length, max_attributes_bytes)
            spec = TopicQueueSpec(
                full.read_queue_nums, full.write_queue_nums, full.perm, full.topic_sys_flag
            )
            if full.topic_name != name:
                renamed[name] = full.topic_name
        table[name] = specs.setdefault(spec, spec)


def _plain_steps(
    text: str, topics_per_step: int, limits: ReadLimits
) -> Generator[None, None, RegisterTable]:
    add = partial(_add_specs, max_attributes_bytes=limits.max_attributes_bytes)
    pos = _WS.match(text).end()  # type: ignore[union-attr]
    top: dict[str, Any] = {}
    wrapper: dict[str, Any] = {}
    table: dict[str, TopicQueueSpec] = {}
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    renamed: dict[str, str] = {}
    sink = plain_fast.TableSink(table, specs, renamed, add, TopicQueueSpec)
    members = _members(text, pos)
    end = -1
    try:
        key, at = next(members)
        while True:
            if key == "topicConfigSerializeWrapper" and text.startswith("{", at):
                inner = _members(text, at)
                try:
                    wkey, wat = next(inner)
                    while True:
                        if wkey == "topicConfigTable" and text.startswith("{", wat):
                            table.clear()
                            renamed.clear()
                            wend = yield from _table_steps(text, wat, sink, topics_per_step)
                            wrapper.pop("topicConfigTable", None)
                        else:
                            value, wend = _value(text, wat)
                            wrapper[wkey] = value
                        wkey, wat = inner.send(wend)
                except StopIteration as stop:
                    vend = stop.value
                top.pop("topicConfigSerializeWrapper", None)
            else:
                value, vend = _value(text, at)
                top[key] = value
            key, at = members.send(vend)
    except StopIteration as stop:
        end = stop.value
    if end < 0 or _WS.match(text, end).end() != len(text):  # type: ignore[union-attr]
        raise _NotPlain
    if "topicConfigSerializeWrapper" in top:  # present but not an object: the precise error
        top["topicConfigSerializeWrapper"] = as_object(
            or_empty(top["topicConfigSerializeWrapper"]), "topicConfigSerializeWrapper"
        )
    if "topicConfigTable" in wrapper:
        as_object(or_empty(wrapper["topicConfigTable"]), "topicConfigTable")
    return _register_table(
        table,
        specs,
        renamed,
        wrapper.get("dataVersion"),
        wrapper.get("topicQueueMappingInfoMap"),
        top.get("filterServerList"),
    )


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
    add = partial(_add_specs, max_attributes_bytes=limits.max_attributes_bytes)
    sink = plain_fast.TableSink(
        table, specs, renamed, add, TopicQueueSpec, cache, limits.max_attributes_bytes
    )
    for _ in plain_fast.table_steps(shape.table, chunk_bytes, sink):
        check_topic_count(len(table), limits)
        yield
    check_topic_count(len(table), limits)
    read = _register_table(table, specs, renamed, data_version, mapping, servers)
    parts = sink.parts
    if parts is None or sum(len(part.names) for part in parts) != len(table):
        return read  # a chunk read the general way, or a topic listed twice
    return replace(read, parts=tuple(parts))


def _register_table(
    table: dict[str, TopicQueueSpec],
    specs: dict[TopicQueueSpec, TopicQueueSpec],
    renamed: dict[str, str],
    data_version: Any,
    mapping: Any,
    servers: Any,
) -> RegisterTable:
    """The table read, with the body's small parts checked as the full decoder checks them."""
    mapping = or_empty(mapping)
    if not isinstance(mapping, dict):
        raise BodyError("topicQueueMappingInfoMap must be a JSON object")
    return RegisterTable(
        table,
        data_version_from(or_empty(data_version)),
        [str(s) for s in as_list(servers, "filterServerList")],
        mapping,
        tuple(specs),
        renamed,
    )


def _table_from_doc(doc: dict[str, Any], limits: ReadLimits = NO_LIMITS) -> RegisterTable:
    what = "topicConfigSerializeWrapper"
    wrapper_doc = as_object(or_empty(doc.get(what)), what)
    table_doc = as_object(or_empty(wrapper_doc.get("topicConfigTable")), "topicConfigTable")
    mapping = or_empty(wrapper_doc.get("topicQueueMappingInfoMap"))
    if not isinstance(mapping, dict):
        raise BodyError("topicQueueMappingInfoMap must be a JSON object")
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    table: dict[str, TopicQueueSpec] = {}
    renamed: dict[str, str] = {}
    parsed = {str(name): tc for name, tc in table_doc.items()}
    _add_specs(table, specs, renamed, parsed, limits.max_attributes_bytes)
    return _register_table(
        table,
        specs,
        renamed,
        wrapper_doc.get("dataVersion"),
        mapping,
        doc.get("filterServerList"),
    )


def _quick_spec(tc: Any, key: str) -> TopicQueueSpec | None:
    """The spec of a plainly written topic config; None sends it down the full decoder."""
    if type(tc) is not dict:
        return None
    get = tc.get
    read, write, perm, flag = (
        get("readQueueNums", 16),
        get("writeQueueNums", 16),
        get("perm", 6),
        get("topicSysFlag", 0),
    )
    if not (type(read) is int and type(write) is int and type(perm) is int and type(flag) is int):
        return None
    name, filter_type, order, attributes = (
        get("topicName"),
        get("topicFilterType"),
        get("order", False),
        get("attributes"),
    )
    if (
        (name is not None and name != key)
        or (filter_type is not None and type(filter_type) is not str)
        or (order is not None and type(order) is not bool)
        or (attributes is not None and (type(attributes) is not dict or attributes))
    ):
        return None
    return TopicQueueSpec(read, write, perm, flag)


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
    add = partial(_add_specs, max_attributes_bytes=limits.max_attributes_bytes)
    sink = plain_fast.TableSink(
        table, specs, renamed, add, TopicQueueSpec, cache, limits.max_attributes_bytes
    )
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


def _compressed_steps(
    inflated: bytes, broker_version: int, topics_per_step: int, limits: ReadLimits = NO_LIMITS
) -> Generator[None, None, RegisterTable]:
    """The general read of an inflated compressed body, topic by topic."""
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
                raise plain_fast.attributes_too_long(
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
