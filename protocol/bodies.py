"""Body codecs: the JSON (and one binary) bodies of the name-server requests and responses.

Wire names are upstream's; Python objects are the dataclasses of :mod:`protocol.route_model`.
Decoders accept what any upstream version writes (fastjson's unquoted keys, missing optional
fields, unknown extra fields) and turn every malformed body into a :class:`BodyError`.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from protocol import fastjson, register_table_reader
from protocol.codes import CURRENT_VERSION, Version
from protocol.errors import BodyError
from protocol.route_model import (
    DEFAULT_TOPIC_FILTER_TYPE,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicRouteData,
)

MAX_INFLATED_BYTES = 64 * 1024 * 1024
"""A compressed register body may not inflate past this: a zip bomb costs one refusal."""

_INT32 = struct.Struct(">i")
_DECIMAL = re.compile(r"[+-]?[0-9]{1,19}")
_TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


def crc32(data: bytes) -> int:
    """Upstream's ``UtilAll.crc32``: CRC-32 masked to a non-negative int."""
    return zlib.crc32(data) & 0x7FFFFFFF


# -- field access that fails as BodyError ---------------------------------------------------------


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BodyError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _or_empty(value: Any) -> Any:
    """A missing or null optional object reads as ``{}``; any other value is checked after."""
    return {} if value is None else value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyError(f"{what} must be a JSON array, got {type(value).__name__}")
    return value


def _int(doc: dict[str, Any], key: str, what: str, default: int = 0) -> int:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and _DECIMAL.fullmatch(value):
            return int(value)
        raise BodyError(f"{what}.{key} must be an integer, got {value!r}")
    return value


def _str(doc: dict[str, Any], key: str, what: str, default: str | None = None) -> str | None:
    value = doc.get(key, default)
    if value is None or isinstance(value, str):
        return value
    raise BodyError(f"{what}.{key} must be a string, got {value!r}")


def _bool(doc: dict[str, Any], key: str, what: str) -> bool:
    value = doc.get(key, False)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise BodyError(f"{what}.{key} must be true or false, got {value!r}")


def _load_obj(body: bytes, what: str) -> dict[str, Any]:
    if not body:
        raise BodyError(f"{what} body is empty")
    return _obj(fastjson.loads(body), what)


# -- DataVersion and TopicConfig ------------------------------------------------------------------


def data_version_doc(v: DataVersion) -> dict[str, Any]:
    return {"counter": v.counter, "stateVersion": v.state_version, "timestamp": v.timestamp}


def data_version_from(doc: Any) -> DataVersion:
    d = _obj(doc, "dataVersion")
    return DataVersion(
        state_version=_int(d, "stateVersion", "dataVersion"),
        timestamp=_int(d, "timestamp", "dataVersion"),
        counter=_int(d, "counter", "dataVersion"),
    )


def decode_data_version(body: bytes) -> DataVersion:
    """A QUERY_DATA_VERSION body; an empty body is the zero version."""
    if not body:
        return DataVersion()
    return data_version_from(fastjson.loads(body))


def topic_config_doc(tc: TopicConfig) -> dict[str, Any]:
    return {
        "attributes": dict(tc.attributes),
        "order": tc.order,
        "perm": tc.perm,
        "readQueueNums": tc.read_queue_nums,
        "topicFilterType": tc.topic_filter_type,
        "topicName": tc.topic_name,
        "topicSysFlag": tc.topic_sys_flag,
        "writeQueueNums": tc.write_queue_nums,
    }


def topic_config_from(doc: Any, name: str) -> TopicConfig:
    d = _obj(doc, f"topicConfigTable[{name}]")
    what = f"topicConfigTable[{name}]"
    attributes = _or_empty(d.get("attributes"))
    if not isinstance(attributes, dict):
        raise BodyError(f"{what}.attributes must be a JSON object")
    return TopicConfig(
        topic_name=_str(d, "topicName", what) or name,
        read_queue_nums=_int(d, "readQueueNums", what, 16),
        write_queue_nums=_int(d, "writeQueueNums", what, 16),
        perm=_int(d, "perm", what, 6),
        topic_filter_type=_str(d, "topicFilterType", what) or DEFAULT_TOPIC_FILTER_TYPE,
        topic_sys_flag=_int(d, "topicSysFlag", what),
        order=_bool(d, "order", what),
        attributes={str(k): str(v) for k, v in attributes.items()},
    )


def topic_config_text(tc: TopicConfig) -> str:
    """Upstream's ``TopicConfig.encode()``: space-separated, attributes JSON last (``{}`` too)."""
    parts = [
        tc.topic_name,
        str(tc.read_queue_nums),
        str(tc.write_queue_nums),
        str(tc.perm),
        tc.topic_filter_type,
        fastjson.dumps(dict(tc.attributes), sort_keys=True).decode(),
    ]
    return " ".join(parts)


def topic_config_from_text(text: str) -> TopicConfig:
    parts = text.split(" ", 5)
    if len(parts) < 5:
        raise BodyError(f"compressed topic config {text[:80]!r} has fewer than 5 fields")
    name, read, write, perm, filter_type = parts[:5]
    if not all(_DECIMAL.fullmatch(p) for p in (read, write, perm)):
        raise BodyError(f"compressed topic config {text[:80]!r} has a non-integer count")
    numbers = int(read), int(write), int(perm)
    if filter_type not in _TOPIC_FILTER_TYPES:
        raise BodyError(f"compressed topic config {name} has topicFilterType {filter_type[:40]!r}")
    attributes: dict[str, str] = {}
    if len(parts) == 6 and parts[5]:  # Java's split drops a trailing empty field
        loaded = fastjson.loads(parts[5])
        if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
            raise BodyError(f"compressed topic config {name} attributes are not a string map")
        attributes = dict(loaded)
    return TopicConfig(
        topic_name=name,
        read_queue_nums=numbers[0],
        write_queue_nums=numbers[1],
        perm=numbers[2],
        topic_filter_type=filter_type,
        attributes=attributes,
    )


# -- RegisterBrokerBody ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper:
    topic_config_table: dict[str, TopicConfig]
    data_version: DataVersion
    topic_queue_mapping_info_map: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper
    filter_server_list: list[str] = field(default_factory=list)

    def to_wire(self, compressed: bool = False, broker_version: int = CURRENT_VERSION) -> bytes:
        wrapper = self.topic_config_serialize_wrapper
        if not compressed:
            doc = {
                "filterServerList": list(self.filter_server_list),
                "topicConfigSerializeWrapper": {
                    "dataVersion": data_version_doc(wrapper.data_version),
                    "topicConfigTable": {
                        n: topic_config_doc(tc) for n, tc in wrapper.topic_config_table.items()
                    },
                    "topicQueueMappingInfoMap": dict(wrapper.topic_queue_mapping_info_map),
                },
            }
            return fastjson.dumps(doc)
        out = bytearray()

        def chunk(data: bytes) -> None:
            out.extend(_INT32.pack(len(data)))
            out.extend(data)

        chunk(fastjson.dumps(data_version_doc(wrapper.data_version)))
        out.extend(_INT32.pack(len(wrapper.topic_config_table)))
        for tc in wrapper.topic_config_table.values():
            chunk(topic_config_text(tc).encode())
        chunk(fastjson.dumps(list(self.filter_server_list)))
        if broker_version >= Version.V5_0_0:
            infos = list(wrapper.topic_queue_mapping_info_map.values())
            out.extend(_INT32.pack(len(infos)))
            for info in infos:
                chunk(fastjson.dumps(info))
        return zlib.compress(bytes(out), 9)

    @classmethod
    def from_wire(cls, data: bytes, compressed: bool, broker_version: int) -> RegisterBrokerBody:
        if compressed:
            return _decode_compressed(data, broker_version)
        doc = _load_obj(data, "RegisterBrokerBody")
        what = "topicConfigSerializeWrapper"
        wrapper_doc = _obj(_or_empty(doc.get(what)), what)
        table_doc = _obj(_or_empty(wrapper_doc.get("topicConfigTable")), "topicConfigTable")
        mapping = _or_empty(wrapper_doc.get("topicQueueMappingInfoMap"))
        if not isinstance(mapping, dict):
            raise BodyError("topicQueueMappingInfoMap must be a JSON object")
        wrapper = TopicConfigSerializeWrapper(
            topic_config_table={
                str(name): topic_config_from(tc, str(name)) for name, tc in table_doc.items()
            },
            data_version=data_version_from(_or_empty(wrapper_doc.get("dataVersion"))),
            topic_queue_mapping_info_map=mapping,
        )
        servers = [str(s) for s in _list(doc.get("filterServerList"), "filterServerList")]
        return cls(wrapper, servers)


class _Inflated:
    """Reads the length-prefixed parts of an inflated compressed register body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int32(self, what: str) -> int:
        if self.pos + 4 > len(self.data):
            raise BodyError(f"compressed register body truncated in {what}")
        value: int = _INT32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        if value < 0:
            raise BodyError(f"compressed register body has a negative {what}: {value}")
        return value

    def chunk(self, what: str) -> bytes:
        length = self.int32(f"{what} length")
        end = self.pos + length
        if end > len(self.data):
            raise BodyError(f"compressed register body truncated in {what}")
        value = self.data[self.pos : end]
        self.pos = end
        return value


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, MAX_INFLATED_BYTES)
    except zlib.error as exc:
        raise BodyError(f"compressed register body does not inflate: {exc}") from None
    if inflater.unconsumed_tail or (not inflater.eof and len(out) >= MAX_INFLATED_BYTES):
        raise BodyError(f"compressed register body inflates past {MAX_INFLATED_BYTES} bytes")
    if not inflater.eof:
        raise BodyError("compressed register body is truncated")
    return out


def _decode_compressed(data: bytes, broker_version: int) -> RegisterBrokerBody:
    reader = _Inflated(_inflate(data))
    data_version = data_version_from(fastjson.loads(reader.chunk("dataVersion")))
    count = reader.int32("topic count")
    table: dict[str, TopicConfig] = {}
    for _ in range(count):
        raw = reader.chunk("topic config")
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            raise BodyError("compressed topic config is not UTF-8") from None
        tc = topic_config_from_text(text)
        table[tc.topic_name] = tc
    servers = _list(fastjson.loads(reader.chunk("filterServerList")), "filterServerList")
    mapping: dict[str, Any] = {}
    if broker_version >= Version.V5_0_0 and reader.pos < len(reader.data):
        for _ in range(reader.int32("mapping count")):
            info = _obj(fastjson.loads(reader.chunk("mapping info")), "TopicQueueMappingInfo")
            mapping[str(info.get("topic", ""))] = info
    wrapper = TopicConfigSerializeWrapper(table, data_version, mapping)
    return RegisterBrokerBody(wrapper, [str(s) for s in servers])


# -- the name server's lean read of a register body ------------------------------------------------


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
    parts: tuple[register_table_reader.TablePart, ...] | None = field(default=None, compare=False)
    """The table's chunks as read, in order, when every chunk was read the usual way and no
    topic is listed twice: what lets the registry skip chunks it applied already."""


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


def register_body_steps(
    data: bytes,
    compressed: bool,
    broker_version: int,
    *,
    topics_per_step: int,
    bytes_per_step: int | None = None,
    chunk_cache: register_table_reader.ChunkCache | None = None,
) -> Generator[None, None, RegisterTable]:
    """Read a register body ``topics_per_step`` topic configs (of a plain body: about
    ``bytes_per_step`` bytes) at a time: a generator that yields between steps and returns the
    :class:`RegisterTable`, or raises :class:`BodyError`.

    A plain body in the usual form is decoded by msgspec into typed structs
    (:mod:`protocol.register_table_reader`); otherwise the JSON (or the inflated chunks) is
    parsed in C, value by value, with only type checks per topic. Equal specs are one shared
    tuple. Anything unusual (a quoted number, a null, an attribute) takes the full decoder's
    path, which converts it or refuses it with the same error as before; a body the C parser
    refuses (fastjson's bare integer keys) is read whole by :func:`fastjson.loads`.
    """
    if compressed:
        return (yield from _compressed_steps(data, broker_version, topics_per_step))
    chunk = bytes_per_step or max(1, topics_per_step) * _CHARS_PER_TOPIC
    try:
        return (yield from _fast_plain_steps(data, max(1, min(chunk, 1 << 62)), chunk_cache))
    except register_table_reader.NotFast:
        pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"JSON body is not valid UTF-8 (byte {exc.start})") from exc
    if not text.strip():
        raise BodyError("RegisterBrokerBody body is empty")
    try:
        return (yield from _plain_steps(text, topics_per_step))
    except _NotPlain:
        pass
    doc = _load_obj(data, "RegisterBrokerBody")  # fastjson's form, or the precise error
    return _table_from_doc(doc)


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
    text: str,
    pos: int,
    table: dict[str, TopicQueueSpec],
    specs: dict[TopicQueueSpec, TopicQueueSpec],
    renamed: dict[str, str],
    topics_per_step: int,
) -> Generator[None, None, int]:
    """Read the topicConfigTable object at ``pos`` into ``table``, a chunk of members at a
    time; returns the position after it.

    A chunk ends where :data:`_ENTRY_CUT` guesses a member ends, and is parsed whole by the
    C parser as ``{chunk}``. The guess needs no trust: a chunk that parses as an object is a
    prefix of the members ending outside any string at depth zero, so the comma after it
    separates members of the table. A guess that does not parse is retried further on; after
    a few, the rest is read member by member.
    """
    chunk_chars = max(1, topics_per_step) * _CHARS_PER_TOPIC
    start = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("}", start):
        return start + 1
    size = len(text)
    while True:
        if size - start <= 2 * chunk_chars:  # the last chunk: up to the table's own end
            try:
                parsed, end = _SCANNER("{" + text[start:], 0)
            except (ValueError, StopIteration, RecursionError):
                break
            _add_specs(table, specs, renamed, parsed)
            return start - 1 + end
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
            break
        _add_specs(table, specs, renamed, parsed)
        start = cut + 1
        yield
    # Unusual text: the rest member by member (a failure there reads the body the slow way).
    entries = _members(text, start, at_member=True)
    count = 0
    try:
        name, vat = next(entries)
        while True:
            tc, vend = _value(text, vat)
            _add_specs(table, specs, renamed, {name: tc})
            count += 1
            if count % topics_per_step == 0:
                yield
            name, vat = entries.send(vend)
    except StopIteration as stop:
        end_pos: int = stop.value
    return end_pos


def _add_specs(
    table: dict[str, TopicQueueSpec],
    specs: dict[TopicQueueSpec, TopicQueueSpec],
    renamed: dict[str, str],
    parsed: dict[str, Any],
) -> None:
    for name, tc in parsed.items():
        spec = _quick_spec(tc, name)
        if spec is None:
            full = topic_config_from(tc, name)
            spec = TopicQueueSpec(
                full.read_queue_nums, full.write_queue_nums, full.perm, full.topic_sys_flag
            )
            if full.topic_name != name:
                renamed[name] = full.topic_name
        table[name] = specs.setdefault(spec, spec)


def _plain_steps(text: str, topics_per_step: int) -> Generator[None, None, RegisterTable]:
    pos = _WS.match(text).end()  # type: ignore[union-attr]
    top: dict[str, Any] = {}
    wrapper: dict[str, Any] = {}
    table: dict[str, TopicQueueSpec] = {}
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    renamed: dict[str, str] = {}
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
                            wend = yield from _table_steps(
                                text, wat, table, specs, renamed, topics_per_step
                            )
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
        top["topicConfigSerializeWrapper"] = _obj(
            _or_empty(top["topicConfigSerializeWrapper"]), "topicConfigSerializeWrapper"
        )
    if "topicConfigTable" in wrapper:
        _obj(_or_empty(wrapper["topicConfigTable"]), "topicConfigTable")
    return _register_table(
        table,
        specs,
        renamed,
        wrapper.get("dataVersion"),
        wrapper.get("topicQueueMappingInfoMap"),
        top.get("filterServerList"),
    )


def _fast_plain_steps(
    data: bytes, chunk_bytes: int, cache: register_table_reader.ChunkCache | None
) -> Generator[None, None, RegisterTable]:
    shape = register_table_reader.outline(data)
    table: dict[str, TopicQueueSpec] = {}
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    renamed: dict[str, str] = {}
    sink = register_table_reader.TableSink(table, specs, renamed, _add_specs, TopicQueueSpec, cache)
    yield from register_table_reader.table_steps(shape.table, chunk_bytes, sink)
    read = _register_table(
        table, specs, renamed, shape.data_version, shape.mapping, shape.filter_server_list
    )
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
    mapping = _or_empty(mapping)
    if not isinstance(mapping, dict):
        raise BodyError("topicQueueMappingInfoMap must be a JSON object")
    return RegisterTable(
        table,
        data_version_from(_or_empty(data_version)),
        [str(s) for s in _list(servers, "filterServerList")],
        mapping,
        tuple(specs),
        renamed,
    )


def _table_from_doc(doc: dict[str, Any]) -> RegisterTable:
    what = "topicConfigSerializeWrapper"
    wrapper_doc = _obj(_or_empty(doc.get(what)), what)
    table_doc = _obj(_or_empty(wrapper_doc.get("topicConfigTable")), "topicConfigTable")
    mapping = _or_empty(wrapper_doc.get("topicQueueMappingInfoMap"))
    if not isinstance(mapping, dict):
        raise BodyError("topicQueueMappingInfoMap must be a JSON object")
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    table: dict[str, TopicQueueSpec] = {}
    renamed: dict[str, str] = {}
    _add_specs(table, specs, renamed, {str(name): tc for name, tc in table_doc.items()})
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


def _compressed_steps(
    data: bytes, broker_version: int, topics_per_step: int
) -> Generator[None, None, RegisterTable]:
    inflated = _inflate(data)
    reader = _Inflated(inflated)
    data_version = data_version_from(fastjson.loads(reader.chunk("dataVersion")))
    count = reader.int32("topic count")
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    table: dict[str, TopicQueueSpec] = {}
    unpack = _INT32.unpack_from
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
            and parts[4] in _TOPIC_FILTER_TYPES
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
            tc = topic_config_from_text(text)
            name = tc.topic_name
            spec = TopicQueueSpec(tc.read_queue_nums, tc.write_queue_nums, tc.perm, 0)
        table[name] = specs.setdefault(spec, spec)
        if len(table) % topics_per_step == 0:
            yield
    reader.pos = pos
    servers = _list(fastjson.loads(reader.chunk("filterServerList")), "filterServerList")
    mapping: dict[str, Any] = {}
    if broker_version >= Version.V5_0_0 and reader.pos < len(reader.data):
        for _ in range(reader.int32("mapping count")):
            info = _obj(fastjson.loads(reader.chunk("mapping info")), "TopicQueueMappingInfo")
            mapping[str(info.get("topic", ""))] = info
    return RegisterTable(table, data_version, [str(s) for s in servers], mapping, tuple(specs), {})


# -- TopicRouteData -------------------------------------------------------------------------------


def queue_data_doc(q: QueueData) -> dict[str, Any]:
    return {
        "brokerName": q.broker_name,
        "perm": q.perm,
        "readQueueNums": q.read_queue_nums,
        "topicSysFlag": q.topic_sys_flag,
        "writeQueueNums": q.write_queue_nums,
    }


def broker_data_doc(b: BrokerData, *, legacy: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "brokerAddrs": dict(sorted(b.broker_addrs.items())),
        "brokerName": b.broker_name,
        "cluster": b.cluster,
    }
    if legacy:  # 4.9.x BrokerData: no zoneName, no enableActingMaster
        return doc
    doc["enableActingMaster"] = b.enable_acting_master
    if b.zone_name is not None:
        doc["zoneName"] = b.zone_name
    return doc


def encode_route(route: TopicRouteData, *, standard_json: bool, legacy: bool = False) -> bytes:
    """A GET_ROUTEINFO_BY_TOPIC body; ``standard_json`` False writes fastjson's unquoted keys.

    ``legacy`` writes the shape a 4.9.x name server gives (for clients older than 5.0): without
    the 5.x-only fields (``enableActingMaster``, ``zoneName``, ``topicQueueMappingByBroker``),
    which some 4.x clients fail to parse.
    """
    doc: dict[str, Any] = {
        "brokerDatas": [broker_data_doc(b, legacy=legacy) for b in route.broker_datas],
        "filterServerTable": {k: list(v) for k, v in route.filter_server_table.items()},
        "queueDatas": [queue_data_doc(q) for q in route.queue_datas],
    }
    if route.order_topic_conf is not None:
        doc["orderTopicConf"] = route.order_topic_conf
    if route.topic_queue_mapping_by_broker is not None and not legacy:
        doc["topicQueueMappingByBroker"] = route.topic_queue_mapping_by_broker
    # fastjson writes bean fields alphabetically and, with MapSortField, sorted map keys;
    # BrowserCompatible (the standard flavour) escapes non-ASCII.
    return fastjson.dumps(
        doc, unquoted_int_keys=not standard_json, sort_keys=True, ascii_only=standard_json
    )


def broker_data_from(doc: Any, what: str) -> BrokerData:
    d = _obj(doc, what)
    addrs_doc = _obj(_or_empty(d.get("brokerAddrs")), f"{what}.brokerAddrs")
    addrs: dict[int, str] = {}
    for key, addr in addrs_doc.items():
        try:
            broker_id = int(key)
        except ValueError:
            raise BodyError(f"{what}.brokerAddrs key {key!r} is not a broker id") from None
        if not isinstance(addr, str):
            raise BodyError(f"{what}.brokerAddrs[{key}] must be a string")
        addrs[broker_id] = addr
    return BrokerData(
        cluster=_str(d, "cluster", what) or "",
        broker_name=_str(d, "brokerName", what) or "",
        broker_addrs=addrs,
        zone_name=_str(d, "zoneName", what),
        enable_acting_master=_bool(d, "enableActingMaster", what),
    )


def queue_data_from(doc: Any, what: str) -> QueueData:
    d = _obj(doc, what)
    return QueueData(
        broker_name=_str(d, "brokerName", what) or "",
        read_queue_nums=_int(d, "readQueueNums", what),
        write_queue_nums=_int(d, "writeQueueNums", what),
        perm=_int(d, "perm", what),
        topic_sys_flag=_int(d, "topicSysFlag", what),
    )


def decode_route(body: bytes) -> TopicRouteData:
    doc = _load_obj(body, "TopicRouteData")
    filters = _obj(_or_empty(doc.get("filterServerTable")), "filterServerTable")
    mapping = doc.get("topicQueueMappingByBroker")
    if mapping is not None and not isinstance(mapping, dict):
        raise BodyError("topicQueueMappingByBroker must be a JSON object")
    return TopicRouteData(
        queue_datas=[
            queue_data_from(q, f"queueDatas[{i}]")
            for i, q in enumerate(_list(doc.get("queueDatas"), "queueDatas"))
        ],
        broker_datas=[
            broker_data_from(b, f"brokerDatas[{i}]")
            for i, b in enumerate(_list(doc.get("brokerDatas"), "brokerDatas"))
        ],
        order_topic_conf=_str(doc, "orderTopicConf", "TopicRouteData"),
        filter_server_table={
            str(k): [str(s) for s in _list(v, "filterServerTable")] for k, v in filters.items()
        },
        topic_queue_mapping_by_broker=mapping,
    )


# -- ClusterInfo, TopicList, KV table, member group -----------------------------------------------


def encode_cluster_info(info: ClusterInfo) -> bytes:
    """As upstream writes it (fastjson: broker ids unquoted); clients parse it leniently."""
    doc = {
        "brokerAddrTable": {n: broker_data_doc(b) for n, b in info.broker_addr_table.items()},
        "clusterAddrTable": {c: sorted(names) for c, names in info.cluster_addr_table.items()},
    }
    return fastjson.dumps(doc, unquoted_int_keys=True)


def decode_cluster_info(body: bytes) -> ClusterInfo:
    doc = _load_obj(body, "ClusterInfo")
    brokers = _obj(_or_empty(doc.get("brokerAddrTable")), "brokerAddrTable")
    clusters = _obj(_or_empty(doc.get("clusterAddrTable")), "clusterAddrTable")
    return ClusterInfo(
        broker_addr_table={
            str(n): broker_data_from(b, f"brokerAddrTable[{n}]") for n, b in brokers.items()
        },
        cluster_addr_table={
            str(c): [str(n) for n in _list(names, f"clusterAddrTable[{c}]")]
            for c, names in clusters.items()
        },
    )


def encode_topic_list(topics: Iterable[str], broker_addr: str | None = None) -> bytes:
    doc: dict[str, Any] = {"topicList": sorted(topics)}
    if broker_addr is not None:
        doc["brokerAddr"] = broker_addr
    return fastjson.dumps(doc)


def decode_topic_list(body: bytes) -> list[str]:
    doc = _load_obj(body, "TopicList")
    return [str(t) for t in _list(doc.get("topicList"), "topicList")]


def encode_kv_table(table: dict[str, str]) -> bytes:
    return fastjson.dumps({"table": dict(table)})


def decode_kv_table(body: bytes) -> dict[str, str]:
    doc = _load_obj(body, "KVTable")
    table = _obj(_or_empty(doc.get("table")), "table")
    return {str(k): str(v) for k, v in table.items()}


def encode_broker_member_group(cluster: str, broker_name: str, addrs: dict[int, str]) -> bytes:
    group = {
        "brokerAddrs": dict(sorted(addrs.items())),
        "brokerName": broker_name,
        "cluster": cluster,
    }
    return fastjson.dumps({"brokerMemberGroup": group}, unquoted_int_keys=True)
