"""What the lean read of a register body yields, and the bounds it reads under: the table of
:class:`TopicQueueSpec` per topic (equal specs one shared tuple), the body's small parts
checked as the full decoder checks them, and the per-topic reader of the general path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from protocol import fastjson
from protocol.errors import BodyError, LimitError
from protocol.json_fields import as_list, or_empty
from protocol.register.chunk_cache import TablePart
from protocol.register_body import (
    MAX_INFLATE_RATIO,
    data_version_from,
    topic_config_from,
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
    """What the name server reads of a REGISTER_BROKER body (see
    :func:`protocol.register.lean_read.register_body_steps`)."""

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
                length = len(fastjson.dumps(full.attributes))
                if length > max_attributes_bytes:
                    raise attributes_too_long(name, length, max_attributes_bytes)
            spec = TopicQueueSpec(
                full.read_queue_nums, full.write_queue_nums, full.perm, full.topic_sys_flag
            )
            if full.topic_name != name:
                renamed[name] = full.topic_name
        table[name] = specs.setdefault(spec, spec)


def checked_table(
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
