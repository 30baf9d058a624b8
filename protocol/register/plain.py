"""The read of a plain REGISTER_BROKER body (JSON) into a
:class:`~protocol.register.table.RegisterTable`, and what the compressed body's read shares
with it: the sink that gathers a topic table's chunks and the per-topic general reader.

The usual form (standard JSON whose topic configs have integer counts and the expected field
types) is read by msgspec's typed C decoder a slice at a time: the outer document with the topic
table left raw (msgspec skips over it in C), then the table a chunk of members at a time
straight into typed structs, whose four numbers become the shared specs by C-level
``map``/``zip``: per topic no Python function runs. A broker with 100,000 topics sends a 16 MB
body, which the standard library's parser and a Python call per topic config took most of a
second to read.

Anything else raises :class:`NotFast` before any of the body is used, or sends just the chunk
holding it to the general per-topic reader, and a body not in the usual form is read by the
general reader: the C scanner value by value, the topic table a chunk of members at a time where
the chunks' cuts parse, member by member where they do not, and a body the C scanner refuses
(fastjson's bare integer keys) whole by :func:`protocol.peer_text.loads`. Every path reads
exactly as the full decoder does, errors included.
"""

from __future__ import annotations

import json
import operator
import re
import zlib
from collections.abc import Callable, Generator
from typing import Any, Literal, NamedTuple, Protocol

import msgspec

from protocol import peer_text
from protocol.errors import BodyError, LimitError
from protocol.peer_text import (
    MAX_PART_BYTES,
    as_list,
    as_object,
    bool_field,
    check_part_size,
    has_surrogate_escape,
    int_field,
    load_object,
    or_empty,
    str_field,
)
from protocol.register.table import (
    MAX_DATA_VERSION_BYTES,
    NO_LIMITS,
    ReadLimits,
    RegisterTable,
    TablePart,
    TopicQueueSpec,
)
from protocol.route_model import DEFAULT_TOPIC_FILTER_TYPE, DataVersion, TopicConfig

WS = b" \t\n\r"


class Chunks(Protocol):
    """Where chunks read before are kept by their identity (the read's chunk cache)."""

    def get(self, key: tuple[int, int]) -> TablePart | None: ...

    def put(self, part: TablePart) -> None: ...


class NotFast(Exception):
    """The body is not in the usual form: read it the general way."""


class _LeanTopicConfigWire(msgspec.Struct, gc=False):
    """A topic config as fastjson writes it, but for its attributes; every field optional, as
    upstream decodes it. The filter type is one of upstream's two (no string made per topic);
    another goes with its chunk to the general decoder, which takes any string.

    Decoding into it, msgspec skips ``attributes`` in C (checking its syntax) and makes no
    object for it: for a chunk whose attributes are all ``{}`` or null, told from its bytes
    before it is decoded (see :func:`_no_attributes`)."""

    topicName: str | None = None
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = 6
    topicFilterType: Literal["SINGLE_TAG", "MULTI_TAG"] | None = None
    topicSysFlag: int = 0
    order: bool | None = None


class _TopicConfigWire(_LeanTopicConfigWire, gc=False):
    """A topic config with its attributes."""

    attributes: msgspec.Raw = msgspec.Raw(b"null")
    """Left raw: the name server keeps none of it, and its length is checked as sent."""


_NULL = msgspec.Raw(b"null")


class _WrapperWire(msgspec.Struct):
    """The parts besides the table are left raw too: each is decoded (in a step of its own)
    once its length is known to be within bounds."""

    topicConfigTable: msgspec.Raw = _NULL
    dataVersion: msgspec.Raw = _NULL
    topicQueueMappingInfoMap: msgspec.Raw = _NULL


class _BodyWire(msgspec.Struct):
    topicConfigSerializeWrapper: _WrapperWire | None = None
    filterServerList: msgspec.Raw = _NULL


_BODY = msgspec.json.Decoder(_BodyWire)
_TABLE = msgspec.json.Decoder(dict[str, _TopicConfigWire])
_LEAN_TABLE = msgspec.json.Decoder(dict[str, _LeanTopicConfigWire])
_NAME_OF = operator.attrgetter("topicName")
_SPEC_OF = operator.attrgetter("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")
_ATTRIBUTES_OF = operator.attrgetter("attributes")
_USUAL_ATTRIBUTES = (ord("{"), ord("n"))
"""The first byte of attributes read the usual way: an object, or null (msgspec checked the
syntax); anything else takes the general decoder, which names the error."""
_ENTRY_CUT = re.compile(rb'\},"([^"\\]*)":\{')
"""Where one topic config likely ends and the next begins (fastjson writes ``attributes``
first, so a nested object never precedes a key whose value is an object)."""
_ENTRY_CUT_TEXT = re.compile(r'\},"[^"\\]*":\{')
"""The same, in the general reader's decoded text."""
_GUESSES = 4
"""Cut guesses tried per chunk before the body is left to the general reader."""
_CUT_KEY_MASK = 15
_CUT_LOOKAHEAD = 64
"""A chunk ends before a member whose key's CRC-32 has its low four bits clear, among the next
64 members past the chunk size (else at the first): cuts depend on the content, so a topic added
to or removed from a table changes only the chunk holding it, not every later one."""
_ANY = msgspec.json.Decoder()
CHARS_PER_TOPIC = 128


"""A topic config's usual size in the plain body: turns ``topics_per_step`` into text."""


def plain_body_steps(
    data: bytes,
    topics_per_step: int,
    bytes_per_step: int | None,
    cache: Chunks | None,
    limits: ReadLimits,
) -> Generator[None, None, RegisterTable]:
    """A plain body read about ``bytes_per_step`` bytes of its topic table (by default
    ``topics_per_step`` topics' worth) at a time, the usual form by msgspec, any other by the
    general reader."""
    chunk = bytes_per_step or max(1, topics_per_step) * CHARS_PER_TOPIC
    try:
        return (yield from _fast_steps(data, max(1, min(chunk, 1 << 62)), cache, limits))
    except NotFast:
        pass
    return (yield from general_plain_steps(data, topics_per_step, limits))


def _fast_steps(
    data: bytes,
    chunk_bytes: int,
    cache: Chunks | None,
    limits: ReadLimits,
) -> Generator[None, None, RegisterTable]:
    shape = outline(data)
    if len(data) > chunk_bytes:
        yield  # skipping a large body's parts is a step's work
    data_version, mapping, servers = shape.decoded(MAX_DATA_VERSION_BYTES, MAX_PART_BYTES)
    if len(shape.mapping) + len(shape.filter_server_list) > chunk_bytes:
        yield  # and so is decoding large parts
    sink = TableSink(cache, limits.max_attributes_bytes)
    for _ in table_steps(shape.table, chunk_bytes, sink):
        check_topic_count(len(sink.out), limits)
        yield
    check_topic_count(len(sink.out), limits)
    return checked_table(sink, data_version, mapping, servers)


class Outline(NamedTuple):
    """The body's parts, raw: its topic table, and the small parts (see :meth:`decoded`)."""

    table: memoryview
    data_version: msgspec.Raw
    mapping: msgspec.Raw
    filter_server_list: msgspec.Raw

    def decoded(self, max_data_version: int, max_part: int) -> tuple[Any, Any, Any]:
        """(data version, mapping infos, filter servers) decoded, each refused with
        :class:`LimitError` past its bound before it is."""
        parts = (
            (self.data_version, "dataVersion", max_data_version),
            (self.mapping, "topicQueueMappingInfoMap", max_part),
            (self.filter_server_list, "filterServerList", max_part),
        )
        for raw, what, limit in parts:
            check_part_size(raw, what, limit)
        return tuple(_ANY.decode(raw) for raw, _what, _limit in parts)


def outline(data: bytes) -> Outline:
    """Decode all but the topic table (which msgspec only skips over, checking its syntax)."""
    try:
        body = _BODY.decode(data)  # one pass: the wrapper is a struct, its table left raw
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # ValidationError included
        # A body nested past msgspec's depth is the general reader's to refuse, by its bound.
        raise NotFast from None
    wrapper = body.topicConfigSerializeWrapper or _WrapperWire()
    table = memoryview(wrapper.topicConfigTable)
    if bytes(table[:1]) not in (b"{", b"n"):
        raise NotFast
    return Outline(
        table, wrapper.dataVersion, wrapper.topicQueueMappingInfoMap, body.filterServerList
    )


class TableSink:
    """Where the chunks of a topic table go: ``out`` (topic -> shared spec), the distinct
    ``specs`` and ``renamed`` keys; an unusual chunk goes to the general per-topic reader.

    ``parts`` lists the chunks read, in order, while every chunk was read the usual way (None
    once one was not); ``cache``, when given, supplies chunks read before and keeps new ones.
    """

    __slots__ = (
        "cache",
        "max_attributes_bytes",
        "out",
        "parts",
        "renamed",
        "specs",
    )

    def __init__(self, cache: Chunks | None = None, max_attributes_bytes: int = 1 << 62) -> None:
        self.out: dict[str, TopicQueueSpec] = {}
        self.max_attributes_bytes = max_attributes_bytes
        """A topic's attributes, as sent, may be no longer (else :class:`LimitError`)."""
        self.specs: dict[Any, TopicQueueSpec] = {}
        """Each distinct spec once, by its numbers: a spec of a chunk read is the same tuple."""
        self.renamed: dict[str, str] = {}
        self.cache = cache
        self.parts: list[TablePart] | None = []

    def add_parsed(self, parsed: dict[str, Any]) -> None:
        """Add members parsed by the standard library, through the general per-topic reader
        (the table is then not whole in :attr:`parts`)."""
        limit = self.max_attributes_bytes
        add_specs(self.out, self.specs, self.renamed, parsed, max_attributes_bytes=limit)
        self.parts = None

    def add_chunk(self, chunk: bytes, *, guess: bool = False) -> bool:
        """Add one chunk of members; False when a guessed cut was wrong (nothing added)."""
        key = (len(chunk), hash(chunk))
        part = self.cached(key)
        if part is None:
            try:
                lean = _no_attributes(chunk)
                decoded = (_LEAN_TABLE if lean else _TABLE).decode(chunk)
                part = self._part(key, decoded, lean)
            except (msgspec.ValidationError, _Unusual):
                try:
                    general = json.loads(chunk, parse_constant=peer_text.refuse_constant)
                except (ValueError, RecursionError):
                    if guess:
                        return False
                    raise NotFast from None
                peer_text.refuse_unencodable(chunk, general)
                self.add_parsed(general)
                return True
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                if guess:
                    return False
                raise NotFast from None
            self.keep(part)
        self.add_part(part)
        return True

    def cached(self, key: tuple[int, int]) -> TablePart | None:
        """The chunk of this identity as read before, if the cache holds it."""
        return self.cache.get(key) if self.cache is not None else None

    def keep(self, part: TablePart) -> None:
        """Keep a chunk read, for a register that sends it again."""
        if self.cache is not None:
            self.cache.put(part)

    def whole_parts(self) -> tuple[TablePart, ...] | None:
        """The chunks read, when every one was read the usual way and no topic is listed
        twice; else None."""
        parts = self.parts
        if parts is None or sum(len(part.names) for part in parts) != len(self.out):
            return None
        return tuple(parts)

    def add_part(self, part: TablePart) -> None:
        """Add the topics of a chunk read (or found in the cache)."""
        specs = self.specs
        for distinct in part.distinct:  # in order of first use, as the general reader
            specs.setdefault(distinct, distinct)
        self.renamed.update(part.renamed)
        self.out.update(part.topics)
        if self.parts is not None:
            self.parts.append(part)

    def _part(
        self,
        key: tuple[int, int],
        decoded: dict[str, Any],
        lean: bool,
    ) -> TablePart:
        """The chunk's topics and shared specs; ``lean``: its attributes are all ``{}`` or
        null (so they were not decoded), else each distinct text is looked at."""
        keys = list(decoded)
        values: list[Any] = list(decoded.values())
        names = list(map(_NAME_OF, values))
        renamed: dict[str, str] = {}
        if names != keys:
            for name_key, name in zip(keys, names, strict=True):
                if name and name != name_key:
                    renamed[name_key] = name
        if not lean:
            raws = list(map(_ATTRIBUTES_OF, values))
            joined = b"".join(raws)
            if joined.count(b"{}") * 2 + joined.count(b"null") * 4 != len(joined):
                # Not all ``{}`` or null (each raw is one JSON value, so text made of these
                # two tokens alone is a run of them): the distinct texts are looked at.
                self._check_attributes(set(map(bytes, raws)), keys, values)
        specs = self.specs
        numbers = list(map(_SPEC_OF, values))
        shared: dict[Any, Any] = {}
        for distinct in dict.fromkeys(numbers):
            spec = specs.get(distinct)
            shared[distinct] = spec if spec is not None else TopicQueueSpec(*distinct)
        return TablePart.of(
            key, keys, list(map(shared.__getitem__, numbers)), renamed, tuple(shared.values())
        )

    def _check_attributes(
        self, distinct: set[bytes], keys: list[str], values: list[_TopicConfigWire]
    ) -> None:
        """Each distinct attributes text of a chunk: not longer than the bound (else
        :class:`LimitError` naming the first topic past it), and an object or null (else
        :class:`_Unusual`, for the general decoder)."""
        limit = self.max_attributes_bytes
        if max(map(len, distinct)) > limit:
            for name, value in zip(keys, values, strict=True):
                length = len(value.attributes)
                if length > limit:
                    raise attributes_too_long(name, length, limit)
        if not all(text[0] in _USUAL_ATTRIBUTES for text in distinct):
            raise _Unusual


def _no_attributes(chunk: bytes) -> bool:
    """Whether every ``attributes`` of a chunk is ``{}`` or null once msgspec decoded it (so it
    is valid JSON), told from its bytes in C: without a backslash every quote delimits a string, so
    each ``"attributes"`` is a whole string (a key, or a value), and each is the key of one of
    the two (any other use of the string, or a space before its colon, sends the chunk to the
    check of each topic)."""
    if b"\\" in chunk:
        return False
    strings = chunk.count(b'"attributes"')
    return strings == chunk.count(b'"attributes":{}') + chunk.count(b'"attributes":null')


class _Unusual(Exception):
    """A chunk decoded, but not in the usual form: the general decoder reads it."""


def table_steps(
    table: memoryview, chunk_bytes: int, sink: TableSink
) -> Generator[None, None, None]:
    """Read the raw topic table into ``sink``, ``chunk_bytes`` at a time, yielding between
    chunks.

    A chunk ends where :data:`_ENTRY_CUT` guesses a member ends and is decoded whole as
    ``{chunk}``. The guess needs no trust: a chunk that decodes as an object is a prefix of the
    members ending outside any string at depth zero, so the comma after it separates members.
    A chunk whose values are unusual (a quoted number, a null, a non-string attribute) is handed
    to the sink's general per-topic decoder as parsed by the standard library.
    """
    if bytes(table[:1]) == b"n":
        return
    size = len(table)
    start = 1
    while start < size and table[start] in WS:
        start += 1
    if bytes(table[start : start + 1]) == b"}":
        return
    while True:
        if size - start <= 2 * chunk_bytes:  # the last chunk: up to the table's own end
            sink.add_chunk(b"{" + table[start:])
            return
        search_from = start + chunk_bytes
        for _ in range(_GUESSES):
            found = content_cut(_ENTRY_CUT, table, search_from)
            if found is None:
                raise NotFast
            cut = found + 1  # the comma between two members, if the guess is right
            if sink.add_chunk(b"".join((b"{", table[start:cut], b"}")), guess=True):
                start = cut + 1
                break
            search_from = found + 1
        else:
            raise NotFast
        yield


def content_cut(
    pattern: re.Pattern[bytes], data: memoryview | bytes, search_from: int
) -> int | None:
    """Where a likely boundary found by ``pattern`` (its group 1 the next key or name) at or
    after ``search_from`` starts (see :data:`_CUT_LOOKAHEAD`), or None when there is none."""
    first = None
    for count, found in enumerate(pattern.finditer(data, search_from)):
        if first is None:
            first = found.start()
        if zlib.crc32(found.group(1)) & _CUT_KEY_MASK == 0:
            return found.start()
        if count >= _CUT_LOOKAHEAD:
            break
    return first


def check_topic_count(count: int, limits: ReadLimits) -> None:
    if count > limits.max_topics:
        raise LimitError(
            f"RegisterBrokerBody holds {count} topics, more than {limits.max_topics} "
            "(registry.max_topics_per_broker)",
            "max_topics_per_broker",
        )


def add_specs(
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
                length = len(peer_text.dumps(full.attributes))
                if length > max_attributes_bytes:
                    raise attributes_too_long(name, length, max_attributes_bytes)
            spec = TopicQueueSpec(
                full.read_queue_nums, full.write_queue_nums, full.perm, full.topic_sys_flag
            )
            if full.topic_name != name:
                renamed[name] = full.topic_name
        table[name] = specs.setdefault(spec, spec)


def checked_table(sink: TableSink, data_version: Any, mapping: Any, servers: Any) -> RegisterTable:
    """The table read into ``sink``, with the body's small parts checked as the full decoder
    checks them."""
    mapping = or_empty(mapping)
    if not isinstance(mapping, dict):
        raise BodyError("topicQueueMappingInfoMap must be a JSON object")
    return RegisterTable(
        sink.out,
        data_version_from(or_empty(data_version)),
        [str(s) for s in as_list(servers, "filterServerList")],
        mapping,
        tuple(sink.specs),
        sink.renamed,
        sink.whole_parts(),
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


def attributes_too_long(name: str, length: int, limit: int) -> LimitError:
    return LimitError(
        f"topicConfigTable[{name[:130]!r}].attributes is {length} bytes, longer than "
        f"{limit} (registry.max_topic_attributes_bytes)",
        "max_topic_attributes_bytes",
    )


def data_version_from(doc: Any) -> DataVersion:
    d = as_object(doc, "dataVersion")
    return DataVersion(
        state_version=int_field(d, "stateVersion", "dataVersion"),
        timestamp=int_field(d, "timestamp", "dataVersion"),
        counter=int_field(d, "counter", "dataVersion"),
    )


def topic_config_from(doc: Any, name: str) -> TopicConfig:
    d = as_object(doc, f"topicConfigTable[{name}]")
    what = f"topicConfigTable[{name}]"
    attributes = or_empty(d.get("attributes"))
    if not isinstance(attributes, dict):
        raise BodyError(f"{what}.attributes must be a JSON object")
    return TopicConfig(
        topic_name=str_field(d, "topicName", what) or name,
        read_queue_nums=int_field(d, "readQueueNums", what, 16),
        write_queue_nums=int_field(d, "writeQueueNums", what, 16),
        perm=int_field(d, "perm", what, 6),
        topic_filter_type=str_field(d, "topicFilterType", what) or DEFAULT_TOPIC_FILTER_TYPE,
        topic_sys_flag=int_field(d, "topicSysFlag", what),
        order=bool_field(d, "order", what),
        attributes={str(k): str(v) for k, v in attributes.items()},
    )


class _NotPlain(Exception):
    """The body is not standard JSON of the expected shape: read it the general way."""


_WS = re.compile(r"[ \t\n\r]*")
_SCANNER: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder(
    parse_constant=peer_text.refuse_constant
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


def _table_steps(
    text: str, pos: int, sink: TableSink, topics_per_step: int
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
    text: str, start: int, sink: TableSink, topics_per_step: int
) -> Generator[None, None, tuple[int, int]]:
    """The table's members from ``start``, a chunk at a time: (where reading stopped, the
    position after the table), the latter -1 when a chunk's cut could not be found.

    A chunk ends where :data:`_ENTRY_CUT_TEXT` guesses a member ends, and is parsed whole by the
    C parser as ``{chunk}``. The guess needs no trust: a chunk that parses as an object is a
    prefix of the members ending outside any string at depth zero, so the comma after it
    separates members of the table. A guess that does not parse is retried further on; after
    a few, the caller reads the rest member by member.
    """
    chunk_chars = max(1, topics_per_step) * CHARS_PER_TOPIC
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
            found = _ENTRY_CUT_TEXT.search(text, search_from)
            if found is None:
                break
            try:
                parsed = json.loads(
                    "{" + text[start : found.start() + 1] + "}",
                    parse_constant=peer_text.refuse_constant,
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


def plain_steps(
    text: str, topics_per_step: int, limits: ReadLimits
) -> Generator[None, None, RegisterTable]:
    """A plain body's JSON text read value by value by the C scanner, its topic table in steps;
    raises ``_NotPlain`` where the text is not standard JSON of the expected shape."""
    pos = _WS.match(text).end()  # type: ignore[union-attr]
    top: dict[str, Any] = {}
    wrapper: dict[str, Any] = {}
    sink = TableSink(max_attributes_bytes=limits.max_attributes_bytes)

    def table(at: int) -> Generator[None, None, int]:
        sink.out.clear()  # a table listed again replaces the one before
        sink.renamed.clear()
        return (yield from _table_steps(text, at, sink, topics_per_step))

    def wrapped(at: int) -> Generator[None, None, int]:
        return (yield from _object_steps(text, at, "topicConfigTable", table, wrapper))

    end = yield from _object_steps(text, pos, "topicConfigSerializeWrapper", wrapped, top)
    if _WS.match(text, end).end() != len(text):  # type: ignore[union-attr]
        raise _NotPlain
    if "topicConfigSerializeWrapper" in top:  # present but not an object: the precise error
        top["topicConfigSerializeWrapper"] = as_object(
            or_empty(top["topicConfigSerializeWrapper"]), "topicConfigSerializeWrapper"
        )
    if "topicConfigTable" in wrapper:
        as_object(or_empty(wrapper["topicConfigTable"]), "topicConfigTable")
    return checked_table(
        sink,
        wrapper.get("dataVersion"),
        wrapper.get("topicQueueMappingInfoMap"),
        top.get("filterServerList"),
    )


def _object_steps(
    text: str,
    at: int,
    special: str,
    read_special: Callable[[int], Generator[None, None, int]],
    into: dict[str, Any],
) -> Generator[None, None, int]:
    """The members of the JSON object at ``at`` into ``into``, but for the member ``special``
    when its value is an object, which ``read_special`` reads (returning the position after
    it); returns the position after the object."""
    members = _members(text, at)
    try:
        key, vat = next(members)
        while True:
            if key == special and text.startswith("{", vat):
                vend = yield from read_special(vat)
                into.pop(special, None)
            else:
                value, vend = _value(text, vat)
                into[key] = value
            key, vat = members.send(vend)
    except StopIteration as stop:
        end: int = stop.value
    return end


def _table_from_doc(doc: dict[str, Any], limits: ReadLimits = NO_LIMITS) -> RegisterTable:
    what = "topicConfigSerializeWrapper"
    wrapper_doc = as_object(or_empty(doc.get(what)), what)
    table_doc = as_object(or_empty(wrapper_doc.get("topicConfigTable")), "topicConfigTable")
    mapping = or_empty(wrapper_doc.get("topicQueueMappingInfoMap"))
    if not isinstance(mapping, dict):
        raise BodyError("topicQueueMappingInfoMap must be a JSON object")
    sink = TableSink(max_attributes_bytes=limits.max_attributes_bytes)
    sink.add_parsed({str(name): tc for name, tc in table_doc.items()})
    return checked_table(sink, wrapper_doc.get("dataVersion"), mapping, doc.get("filterServerList"))


def general_plain_steps(
    data: bytes, topics_per_step: int, limits: ReadLimits
) -> Generator[None, None, RegisterTable]:
    """A plain body not in the usual form: the C scanner value by value, or, for a body it
    refuses, the whole document by :func:`peer_text.loads`; only up to
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
        if has_surrogate_escape(text):
            raise _NotPlain  # read whole, so a string that cannot be encoded is refused
        table = yield from plain_steps(text, topics_per_step, limits)
    except _NotPlain:
        doc = load_object(data, "RegisterBrokerBody")  # fastjson's form, or the precise error
        table = _table_from_doc(doc, limits)
    check_topic_count(len(table.topic_queues), limits)
    return table
