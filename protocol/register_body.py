"""The REGISTER_BROKER body as upstream writes it, plain or compressed: its encoding, and the
parts the name server's lean read (:mod:`protocol.register`) shares with any read of it: the
small parts' bounds and decoders, a topic config's two forms, and the compressed body's inflate
(zip-bomb bound) and length-prefixed parts.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Generator, Sized
from dataclasses import dataclass, field
from typing import Any, TypeVar

from protocol import fastjson
from protocol.codes import CURRENT_VERSION, Version
from protocol.errors import BodyError, LimitError
from protocol.json_fields import (
    DECIMAL,
    as_list,
    as_object,
    bool_field,
    int_field,
    or_empty,
    str_field,
)
from protocol.route_model import (
    DEFAULT_TOPIC_FILTER_TYPE,
    DataVersion,
    TopicConfig,
)

MAX_INFLATED_BYTES = 64 * 1024 * 1024
"""A compressed register body may not inflate past this: a zip bomb costs one refusal."""
MAX_INFLATE_RATIO = 128
"""Nor past this many times its own size (from :data:`INFLATE_FLOOR_BYTES` on): real topic
tables inflate 15 to 60 times, a bomb up to about 1,000, and a bomb is refused after
inflating this much of it, so a refusal costs in proportion to the bytes that were sent."""
INFLATE_FLOOR_BYTES = 1 << 20
"""Any compressed body may inflate this far, whatever its ratio."""
INFLATE_SLICE_BYTES = 1 << 20
"""Inflated per step of :func:`inflate_steps`: a few milliseconds."""
MAX_PART_BYTES = 1 << 20
"""A register body's data version, filter-server list and each static-topic mapping info may
not be longer: each is parsed whole, so its length bounds the time it takes."""
MAX_DATA_VERSION_BYTES = 64 * 1024
"""A data version (three numbers) as a QUERY_DATA_VERSION body or a register body's part."""


INT32 = struct.Struct(">i")
_SizedT = TypeVar("_SizedT", bound=Sized)


TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")


def crc32(data: bytes) -> int:
    """Upstream's ``UtilAll.crc32``: CRC-32 masked to a non-negative int."""
    return zlib.crc32(data) & 0x7FFFFFFF


def data_version_doc(v: DataVersion) -> dict[str, Any]:
    return {"counter": v.counter, "stateVersion": v.state_version, "timestamp": v.timestamp}


def data_version_from(doc: Any) -> DataVersion:
    d = as_object(doc, "dataVersion")
    return DataVersion(
        state_version=int_field(d, "stateVersion", "dataVersion"),
        timestamp=int_field(d, "timestamp", "dataVersion"),
        counter=int_field(d, "counter", "dataVersion"),
    )


def decode_data_version(body: bytes) -> DataVersion:
    """A QUERY_DATA_VERSION body; an empty body is the zero version."""
    if not body:
        return DataVersion()
    check_part_size(body, "dataVersion", MAX_DATA_VERSION_BYTES)
    return data_version_from(fastjson.loads(body))


def check_part_size(
    part: _SizedT, what: str, limit: int = MAX_PART_BYTES, name: str | None = None
) -> _SizedT:
    """``part``, when it is at most ``limit`` bytes long; else :class:`LimitError` (its bound
    named ``name``, by default after ``what``)."""
    if len(part) > limit:
        bound = name if name is not None else f"{what}_bytes"
        raise LimitError(f"{what} is {len(part)} bytes, longer than {limit}", bound)
    return part


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
    if not all(DECIMAL.fullmatch(p) for p in (read, write, perm)):
        raise BodyError(f"compressed topic config {text[:80]!r} has a non-integer count")
    numbers = int(read), int(write), int(perm)
    if filter_type not in TOPIC_FILTER_TYPES:
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
            out.extend(INT32.pack(len(data)))
            out.extend(data)

        chunk(fastjson.dumps(data_version_doc(wrapper.data_version)))
        out.extend(INT32.pack(len(wrapper.topic_config_table)))
        for tc in wrapper.topic_config_table.values():
            chunk(topic_config_text(tc).encode())
        chunk(fastjson.dumps(list(self.filter_server_list)))
        if broker_version >= Version.V5_0_0:
            infos = list(wrapper.topic_queue_mapping_info_map.values())
            out.extend(INT32.pack(len(infos)))
            for info in infos:
                chunk(fastjson.dumps(info))
        return zlib.compress(bytes(out), 9)


class Inflated:
    """Reads the length-prefixed parts of an inflated compressed register body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int32(self, what: str) -> int:
        if self.pos + 4 > len(self.data):
            raise BodyError(f"compressed register body truncated in {what}")
        value: int = INT32.unpack_from(self.data, self.pos)[0]
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


def inflate_limit(compressed_bytes: int, max_ratio: int = MAX_INFLATE_RATIO) -> int:
    """How far a compressed body of this size may inflate."""
    return min(MAX_INFLATED_BYTES, max(INFLATE_FLOOR_BYTES, max_ratio * compressed_bytes))


def inflate_steps(
    data: bytes,
    max_ratio: int = MAX_INFLATE_RATIO,
    slice_bytes: int = INFLATE_SLICE_BYTES,
    check_head: Callable[[bytes], None] | None = None,
) -> Generator[None, None, bytes]:
    """Inflate a compressed register body ``slice_bytes`` at a time, yielding between slices;
    returns the inflated bytes. Past :func:`inflate_limit` it stops and raises
    :class:`LimitError`: a bomb costs what it inflated up to then, and no more.
    ``check_head`` is given the first slice, to refuse the body by its head before the rest
    is inflated."""
    limit = inflate_limit(len(data), max_ratio)
    inflater = zlib.decompressobj()
    pieces: list[bytes] = []
    size = 0
    pending = data
    while True:
        try:
            piece = inflater.decompress(pending, min(slice_bytes, limit + 1 - size))
        except zlib.error as exc:
            raise BodyError(f"compressed register body does not inflate: {exc}") from None
        size += len(piece)
        if size > limit:
            raise LimitError(
                f"compressed register body inflates past {limit} bytes ({len(data)} bytes "
                f"sent; it may inflate {max_ratio} times (registry.register_max_inflate_ratio) "
                f"from {INFLATE_FLOOR_BYTES} bytes on, to {MAX_INFLATED_BYTES} at most)",
                "register_max_inflate_ratio",
            )
        pieces.append(piece)
        if check_head is not None and len(pieces) == 1:
            check_head(piece)
        if inflater.eof:
            return b"".join(pieces)
        pending = inflater.unconsumed_tail
        if not piece and not pending:
            raise BodyError("compressed register body is truncated")
        yield


def compressed_tail_steps(
    reader: Inflated, broker_version: int, slice_bytes: int = MAX_PART_BYTES
) -> Generator[None, None, tuple[list[str], dict[str, Any]]]:
    """The filter servers and (from 5.x brokers) static-topic mapping infos after the topic
    records of an inflated compressed body, yielding after each ``slice_bytes`` or so of
    mapping infos parsed; each part is at most :data:`MAX_PART_BYTES` long."""
    servers_text = check_part_size(reader.chunk("filterServerList"), "filterServerList")
    servers = as_list(fastjson.loads(servers_text), "filterServerList")
    mapping: dict[str, Any] = {}
    if broker_version >= Version.V5_0_0 and reader.pos < len(reader.data):
        parsed = 0
        for _ in range(reader.int32("mapping count")):
            text = check_part_size(reader.chunk("mapping info"), "topicQueueMappingInfo")
            info = as_object(fastjson.loads(text), "TopicQueueMappingInfo")
            mapping[str(info.get("topic", ""))] = info
            parsed += len(text)
            if parsed >= slice_bytes:
                parsed = 0
                yield
    return [str(s) for s in servers], mapping


def data_version_part(reader: Inflated) -> DataVersion:
    """The data version that opens an inflated compressed body."""
    text = check_part_size(reader.chunk("dataVersion"), "dataVersion", MAX_DATA_VERSION_BYTES)
    return data_version_from(fastjson.loads(text))
