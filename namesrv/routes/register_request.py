"""One REGISTER_BROKER as the registry takes it: the value the register's stages build and
:meth:`~namesrv.routes.registration.Registration.register_broker` applies."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Protocol

from namesrv.routes.tables import QueueSpec
from protocol.register.table import TablePart
from protocol.route_model import DataVersion


class Origin(Protocol):
    """Who registers: what finds the address's last register (a register's header, before
    its body is read, or the register itself)."""

    @property
    def cluster_name(self) -> str: ...

    @property
    def broker_addr(self) -> str: ...

    @property
    def broker_name(self) -> str: ...

    @property
    def broker_id(self) -> int: ...

    @property
    def enable_acting_master(self) -> bool: ...


@dataclass(slots=True, kw_only=True)
class RegisterRequest:
    """One REGISTER_BROKER as the registry applies it: the broker that registers, and what its
    body holds (or that it is the body of the address's last register).

    A value: never changed once made; :meth:`evolve` makes a changed copy. It is not a frozen
    dataclass because a heartbeat makes two of them, and a frozen one's construction costs
    about twice as much (each field set through ``object.__setattr__``).
    """

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int
    ha_server_addr: str
    topic_configs: Mapping[str, QueueSpec] | None
    """None: the very body of this address's last register (see
    ``Registration.body_unchanged``), its table not read."""
    data_version: DataVersion
    filter_server_list: list[str]
    heartbeat_timeout_ms: int | None
    enable_acting_master: bool
    channel: object
    """The broker's connection (hashable), None when it has none to close."""
    topic_queue_mapping_info: Mapping[str, Any]
    body_digest: bytes | None = None
    """What makes two bodies the same (see ``Registration.body_unchanged``)."""
    table_parts: Sequence[TablePart] | None = None
    """The table's chunks as read: a master's register skips the chunks its table already
    holds as they are (the usual re-register after one topic changed)."""
    zone_name: str | None = None
    table_key: Hashable | None = None
    """The body's identity but for its data version."""
    same_table: bool = False
    """Only the data version is new (see ``Registration.table_unchanged``)."""

    def evolve(self, **changes: Any) -> RegisterRequest:
        """A copy with ``changes`` (field names as keywords)."""
        values = dict(zip(_FIELDS, _VALUES_OF(self), strict=True))
        values.update(changes)
        return RegisterRequest(**values)


_FIELDS = tuple(RegisterRequest.__dataclass_fields__)
_VALUES_OF = attrgetter(*_FIELDS)
"""A request's field values in ``_FIELDS`` order, read in one call."""
