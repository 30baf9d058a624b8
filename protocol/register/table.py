"""What a read of a REGISTER_BROKER body yields, and the bounds it reads under: the table of
:class:`TopicQueueSpec` per topic (equal specs one shared tuple), the chunks it was read in,
and the body's small parts checked as the full decoder checks them.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from protocol.route_model import DataVersion

MAX_INFLATED_BYTES = 64 * 1024 * 1024
"""A compressed register body may not inflate past this: a zip bomb costs one refusal."""
MAX_INFLATE_RATIO = 128
"""Nor past this many times its own size (from :data:`INFLATE_FLOOR_BYTES` on): real topic
tables inflate 15 to 60 times, a bomb up to about 1,000, and a bomb is refused after
inflating this much of it, so a refusal costs in proportion to the bytes that were sent."""
INFLATE_FLOOR_BYTES = 1 << 20
"""Any compressed body may inflate this far, whatever its ratio."""
MAX_DATA_VERSION_BYTES = 64 * 1024
"""A data version (three numbers) as a QUERY_DATA_VERSION body or a register body's part."""


class TopicQueueSpec(NamedTuple):
    """The part of a topic config the name server keeps: what its queue data is made of."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int


class TablePart(NamedTuple):
    """One chunk of a topic table as read: its identity (length and the process's keyed hash
    of its bytes), its topics and their shared specs in order, and keys renamed in it."""

    key: tuple[int, int]
    names: list[str]
    specs: list[Any]
    renamed: dict[str, str]
    distinct: tuple[Any, ...]
    end: int
    """Of a compressed body's records: where in the chunk its records end (a last chunk
    carries the body's tail after them); -1 for a chunk of a plain body."""
    topics: dict[str, Any]
    """``names`` to ``specs``, made once: a chunk read again adds its topics to a table
    from a dict (its keys' hashes kept), not pair by pair."""
    passed: list[bool]
    """``[True]`` once its names passed a register's checks: a chunk is content, so the same
    chunk read again (from the chunk cache, or in a cached table) needs no check again."""

    @classmethod
    def of(
        cls,
        key: tuple[int, int],
        names: list[str],
        specs: list[Any],
        renamed: dict[str, str],
        distinct: tuple[Any, ...],
        end: int = -1,
    ) -> TablePart:
        topics = dict(zip(names, specs, strict=True))
        return cls(key, names, specs, renamed, distinct, end, topics, [False])


@dataclass(frozen=True, slots=True)
class RegisterTable:
    """What the name server reads of a REGISTER_BROKER body (see
    :func:`protocol.register.read.register_body_steps`)."""

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
    version_key: Hashable | None = field(default=None, compare=False)
    """The key (``identity.TableKey``) of the certified cut of the plain body read: a body with
    that key is this table with its own data version. None when not certified."""


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
