"""The REGISTER_BROKER body as upstream writes it, plain or compressed: upstream's
``RegisterBrokerBody`` and its encoding (a topic config's two forms, the compressed body's
length-prefixed parts), and the QUERY_DATA_VERSION body. The name server reads a register body
with :mod:`protocol.register`; the tests' full decode of every field reads with its parts too.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from protocol.codes import CURRENT_VERSION, Version
from protocol.peer_text import check_part_size, dumps, loads
from protocol.register.plain import data_version_from
from protocol.register.read import INT32
from protocol.register.table import MAX_DATA_VERSION_BYTES
from protocol.route_model import DataVersion, TopicConfig


def crc32(data: bytes) -> int:
    """Upstream's ``UtilAll.crc32``: CRC-32 masked to a non-negative int."""
    return zlib.crc32(data) & 0x7FFFFFFF


def data_version_doc(v: DataVersion) -> dict[str, Any]:
    return {"counter": v.counter, "stateVersion": v.state_version, "timestamp": v.timestamp}


def decode_data_version(body: bytes) -> DataVersion:
    """A QUERY_DATA_VERSION body; an empty body is the zero version."""
    if not body:
        return DataVersion()
    check_part_size(body, "dataVersion", MAX_DATA_VERSION_BYTES)
    return data_version_from(loads(body))


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


def topic_config_text(tc: TopicConfig) -> str:
    """Upstream's ``TopicConfig.encode()``: space-separated, attributes JSON last (``{}`` too)."""
    parts = [
        tc.topic_name,
        str(tc.read_queue_nums),
        str(tc.write_queue_nums),
        str(tc.perm),
        tc.topic_filter_type,
        dumps(dict(tc.attributes), sort_keys=True).decode(),
    ]
    return " ".join(parts)


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
            return dumps(doc)
        out = bytearray()

        def chunk(data: bytes) -> None:
            out.extend(INT32.pack(len(data)))
            out.extend(data)

        chunk(dumps(data_version_doc(wrapper.data_version)))
        out.extend(INT32.pack(len(wrapper.topic_config_table)))
        for tc in wrapper.topic_config_table.values():
            chunk(topic_config_text(tc).encode())
        chunk(dumps(list(self.filter_server_list)))
        if broker_version >= Version.V5_0_0:
            infos = list(wrapper.topic_queue_mapping_info_map.values())
            out.extend(INT32.pack(len(infos)))
            for info in infos:
                chunk(dumps(info))
        return zlib.compress(bytes(out), 9)
