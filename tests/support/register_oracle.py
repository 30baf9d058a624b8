"""The slow reference reads of a REGISTER_BROKER body that the tests hold the name server's
lean, stepped read against (:mod:`protocol.register`): a full decode into upstream's
``RegisterBrokerBody`` (every field of every topic config), and the lean read run whole.

The full decode reads as upstream's broker-side codec reads, value by value, errors included;
what the lean read keeps of it must equal what the lean read returns, and a body it refuses the
lean read must refuse with the same error.
"""

from __future__ import annotations

from typing import Any

from protocol.errors import BodyError
from protocol.peer_text import as_list, as_object, load_object, or_empty
from protocol.register import read
from protocol.register.plain import data_version_from, topic_config_from
from protocol.register.read import (
    Inflated,
    compressed_tail_steps,
    data_version_part,
    inflate_steps,
    topic_config_from_text,
)
from protocol.register.steps import whole
from protocol.register.table import MAX_INFLATE_RATIO, RegisterTable
from protocol.register_body import RegisterBrokerBody, TopicConfigSerializeWrapper
from protocol.route_model import TopicConfig


def inflate(data: bytes, max_ratio: int = MAX_INFLATE_RATIO) -> bytes:
    """A compressed register body inflated whole (see ``inflate_steps``)."""
    return whole(inflate_steps(data, max_ratio))


def decode_register_body(data: bytes, compressed: bool, broker_version: int) -> RegisterBrokerBody:
    """The full decode of a register body: every field of every topic config."""
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
    return RegisterBrokerBody(wrapper, servers)


def _decode_compressed(data: bytes, broker_version: int) -> RegisterBrokerBody:
    reader = Inflated(inflate(data))
    data_version = data_version_part(reader)
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
    tail: tuple[list[str], dict[str, Any]] = whole(compressed_tail_steps(reader, broker_version))
    servers, mapping = tail
    wrapper = TopicConfigSerializeWrapper(table, data_version, mapping)
    return RegisterBrokerBody(wrapper, servers)


def read_register_body(data: bytes, compressed: bool, broker_version: int) -> RegisterTable:
    """The lean read of a register body (``read.register_body_steps``) run whole."""
    return whole(
        read.register_body_steps(data, compressed, broker_version, topics_per_step=1 << 62)
    )


def read_compressed_general(data: bytes, broker_version: int) -> RegisterTable:
    """A compressed register body read topic by topic by the general reader, as the full
    decode reads it: what the fast read of compressed records must equal, errors included."""
    inflated = inflate(data)
    return whole(read.compressed_general_steps(inflated, broker_version, 1 << 62))
