"""Typed request and response headers: upstream's ``extFields`` maps, validated once.

Every custom header travels as strings in ``extFields``. Each class here declares its fields
with their wire names; ``from_wire`` checks presence and types and raises :class:`HeaderError`
naming the field and the value, so a processor's refusal tells the peer exactly what was wrong.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar, Self, TypeVar, get_type_hints

from protocol.errors import HeaderError

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def wire(name: str, *, required: bool = True, long: bool = False) -> Any:
    """Declare a header field: its upstream wire name and whether the peer must send it."""
    return dataclasses.field(metadata={"wire": name, "required": required, "long": long})


def optional(name: str, default: Any = None, *, long: bool = False) -> Any:
    return dataclasses.field(
        default=default, metadata={"wire": name, "required": False, "long": long}
    )


def _parse_int(text: str, name: str, long: bool) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise HeaderError(f"header field {name} must be an integer, got {text!r}") from None
    low, high = _INT64 if long else _INT32
    if not low <= value <= high:
        raise HeaderError(f"header field {name} is out of range: {value}")
    return value


def _parse_bool(text: str, name: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise HeaderError(f"header field {name} must be true or false, got {text!r}")


class Header:
    """Base of every header: ``from_wire`` / ``to_wire`` driven by the field declarations."""

    _fields: ClassVar[tuple[tuple[str, str, bool, bool, type], ...]]

    @classmethod
    def _spec(cls) -> tuple[tuple[str, str, bool, bool, type], ...]:
        spec = cls.__dict__.get("_spec_cache")
        if spec is None:
            hints = get_type_hints(cls)
            spec = tuple(
                (
                    f.name,
                    f.metadata["wire"],
                    f.metadata["required"],
                    f.metadata["long"],
                    _base_type(hints[f.name]),
                )
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            )
            type.__setattr__(cls, "_spec_cache", spec)
        return spec

    @classmethod
    def from_wire(cls, ext: dict[str, str] | None) -> Self:
        ext = ext or {}
        values: dict[str, Any] = {}
        for attr, name, required, long, kind in cls._spec():
            text = ext.get(name)
            if text is None or (text == "" and kind is not str):
                if required:
                    raise HeaderError(f"missing required header field {name}")
                continue
            if kind is int:
                values[attr] = _parse_int(text, name, long)
            elif kind is bool:
                values[attr] = _parse_bool(text, name)
            else:
                if required and not text and name != "value":
                    raise HeaderError(f"header field {name} must not be empty")
                values[attr] = text
        return cls(**values)

    def to_wire(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for attr, name, _required, _long, _kind in self._spec():
            value = getattr(self, attr)
            if value is None:
                continue
            if isinstance(value, bool):
                out[name] = "true" if value else "false"
            else:
                out[name] = str(value)
        return out


H = TypeVar("H", bound=Header)
REMEMBERED_VALUE_CHARS = 255
"""The longest field value of a header :func:`remembering` keeps (an address, a name)."""


def remembering(
    header: type[H], size: int, longest: int = REMEMBERED_VALUE_CHARS
) -> Callable[[dict[str, str] | None], H]:
    """``header.from_wire`` remembering what it read of the last ``size`` distinct headers: a
    peer that repeats a header (a broker's register, every heartbeat) has it read once. Only
    the declared fields are keys, and none longer than ``longest`` characters, so what is kept
    stays bounded whatever peers send. Headers are frozen: one read can be handed out again. A
    refused header is never remembered."""
    names = tuple(wire_name for _attr, wire_name, *_rest in header._spec())
    # A field a map lacks is None in ``values``, which from_wire reads as absent again.
    read = functools.lru_cache(maxsize=size)(
        lambda values: header.from_wire(dict(zip(names, values, strict=True)))
    )

    def reader(ext: dict[str, str] | None) -> H:
        if not ext:
            return header.from_wire(ext)
        values = tuple(map(ext.get, names))
        if max(map(len, filter(None, values)), default=0) > longest:
            return header.from_wire(ext)
        return read(values)

    return reader


def _base_type(hint: Any) -> type:
    """``int | None`` → int; ``str`` → str."""
    args = getattr(hint, "__args__", None)
    if args:
        return next(a for a in args if a is not type(None))
    return hint


# -- brokers --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(Header):
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    ha_server_addr: str = wire("haServerAddr")
    broker_id: int = wire("brokerId", long=True)
    heartbeat_timeout_millis: int | None = optional("heartbeatTimeoutMillis", long=True)
    enable_acting_master: bool = optional("enableActingMaster", False)
    compressed: bool = optional("compressed", False)
    body_crc32: int = optional("bodyCrc32", 0, long=True)
    zone_name: str | None = optional("__ZONE_NAME")
    """The broker's zone (upstream's ``-Drocketmq.zone`` / ``ROCKETMQ_ZONE``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = optional("haServerAddr")
    master_addr: str | None = optional("masterAddr")


@dataclasses.dataclass(frozen=True, slots=True)
class UnregisterBrokerRequestHeader(Header):
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId", long=True)


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequestHeader(Header):
    cluster_name: str = wire("clusterName")
    broker_addr: str = wire("brokerAddr")
    broker_name: str | None = optional("brokerName")
    broker_id: int | None = optional("brokerId", long=True)
    epoch: int | None = optional("epoch", long=True)
    max_offset: int | None = optional("maxOffset", long=True)
    confirm_offset: int | None = optional("confirmOffset", long=True)
    heartbeat_timeout_mills: int | None = optional("heartbeatTimeoutMills", long=True)
    election_priority: int | None = optional("electionPriority")


@dataclasses.dataclass(frozen=True, slots=True)
class QueryDataVersionRequestHeader(Header):
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId", long=True)


@dataclasses.dataclass(frozen=True, slots=True)
class QueryDataVersionResponseHeader(Header):
    changed: bool = wire("changed")


@dataclasses.dataclass(frozen=True, slots=True)
class GetBrokerMemberGroupRequestHeader(Header):
    cluster_name: str = wire("clusterName")
    broker_name: str = wire("brokerName")


# -- routes and topics --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(Header):
    topic: str = wire("topic")
    accept_standard_json_only: bool = optional("acceptStandardJsonOnly", False)
    zone_mode: str | None = optional("__ZONE_MODE")
    """Read as upstream reads it: "true" in any case turns zone mode on, anything else not."""
    zone_name: str | None = optional("__ZONE_NAME")


@dataclasses.dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerRequestHeader(Header):
    broker_name: str = wire("brokerName")


@dataclasses.dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: int = wire("wipeTopicCount")


@dataclasses.dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerRequestHeader(Header):
    broker_name: str = wire("brokerName")


@dataclasses.dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: int = wire("addTopicCount")


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str = wire("topic")
    cluster_name: str | None = optional("clusterName")


@dataclasses.dataclass(frozen=True, slots=True)
class RegisterTopicRequestHeader(Header):
    topic: str = wire("topic")


@dataclasses.dataclass(frozen=True, slots=True)
class GetTopicsByClusterRequestHeader(Header):
    cluster: str = wire("cluster")


@dataclasses.dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC, sent to a broker: creates the topic or replaces its config."""

    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    read_queue_nums: int = wire("readQueueNums")
    write_queue_nums: int = wire("writeQueueNums")
    perm: int = wire("perm")
    topic_filter_type: str = wire("topicFilterType")
    order: bool = wire("order")
    topic_sys_flag: int | None = optional("topicSysFlag")
    attributes: str | None = optional("attributes")


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader(Header):
    """DELETE_TOPIC_IN_BROKER, sent to a broker."""

    topic: str = wire("topic")


# -- KV config ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class PutKVConfigRequestHeader(Header):
    namespace: str = wire("namespace")
    key: str = wire("key")
    value: str = wire("value")


@dataclasses.dataclass(frozen=True, slots=True)
class GetKVConfigRequestHeader(Header):
    namespace: str = wire("namespace")
    key: str = wire("key")


@dataclasses.dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader(Header):
    value: str | None = optional("value")


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteKVConfigRequestHeader(Header):
    namespace: str = wire("namespace")
    key: str = wire("key")


@dataclasses.dataclass(frozen=True, slots=True)
class GetKVListByNamespaceRequestHeader(Header):
    namespace: str = wire("namespace")
