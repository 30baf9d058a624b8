"""The REGISTER_BROKER body as upstream writes it, plain or compressed: encoding, and the full
decode into :class:`RegisterBrokerBody` (topic configs, data version, filter servers).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from protocol import fastjson
from protocol.codes import CURRENT_VERSION, Version
from protocol.errors import BodyError
from protocol.json_fields import (
    DECIMAL,
    as_list,
    as_object,
    bool_field,
    int_field,
    load_object,
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


INT32 = struct.Struct(">i")


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

    @classmethod
    def from_wire(cls, data: bytes, compressed: bool, broker_version: int) -> RegisterBrokerBody:
        if compressed:
            return _decode_compressed(data, broker_version)
        doc = load_object(data, "RegisterBrokerBody")
        what = "topicConfigSerializeWrapper"
        wrapper_doc = as_object(or_empty(doc.get(what)), what)
        table_doc = as_object(or_empty(wrapper_doc.get("topicConfigTable")), "topicConfigTable")
        mapping = or_empty(wrapper_doc.get("topicQueueMappingInfoMap"))
        if not isinstance(mapping, dict):
            raise BodyError("topicQueueMappingInfoMap must be a JSON object")
        wrapper = TopicConfigSerializeWrapper(
            topic_config_table={
                str(name): topic_config_from(tc, str(name)) for name, tc in table_doc.items()
            },
            data_version=data_version_from(or_empty(wrapper_doc.get("dataVersion"))),
            topic_queue_mapping_info_map=mapping,
        )
        servers = [str(s) for s in as_list(doc.get("filterServerList"), "filterServerList")]
        return cls(wrapper, servers)


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


def inflate(data: bytes) -> bytes:
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
    reader = Inflated(inflate(data))
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
    servers, mapping = compressed_tail(reader, broker_version)
    wrapper = TopicConfigSerializeWrapper(table, data_version, mapping)
    return RegisterBrokerBody(wrapper, servers)


def compressed_tail(reader: Inflated, broker_version: int) -> tuple[list[str], dict[str, Any]]:
    """The filter servers and (from 5.x brokers) static-topic mapping infos after the topic
    records of an inflated compressed body."""
    servers = as_list(fastjson.loads(reader.chunk("filterServerList")), "filterServerList")
    mapping: dict[str, Any] = {}
    if broker_version >= Version.V5_0_0 and reader.pos < len(reader.data):
        for _ in range(reader.int32("mapping count")):
            info = as_object(fastjson.loads(reader.chunk("mapping info")), "TopicQueueMappingInfo")
            mapping[str(info.get("topic", ""))] = info
    return [str(s) for s in servers], mapping
