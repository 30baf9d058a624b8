"""The events of the operator's audit trail (:mod:`namesrv.ops.audit_trail`), typed: what
changed, as a line shows it, and :class:`Who` caused it.

Each event names its ``kind`` (what its lines are paced by) and its ``line()``: a message with
``%`` placeholders and its arguments, every peer string an argument, so the trail's pacer
escapes and cuts each one.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

NAMES_SHOWN = 5
"""Topic or broker names a line about many names; the rest are counted."""

Line = tuple[str, tuple[Any, ...]]
"""A log message with ``%`` placeholders and its arguments."""


@dataclass(frozen=True, slots=True)
class Who:
    """Who caused an event: the peer address (``host:port``) of the connection the request
    came over (for expiry, the broker's own connection); "" when there is none. The access
    key that signed the request, or that the broker's name is bound to, with ACL on."""

    peer: str = ""
    access_key: str | None = None

    @property
    def host(self) -> str:
        """The peer's host, which lines are paced by (a peer has many ports)."""
        host, _, _ = self.peer.rpartition(":")
        return host or self.peer


class BrokerChange(Protocol):
    """What the registry reports of a broker address arriving or leaving
    (``namesrv.routes.events.BrokerEvent``), as far as a line shows it."""

    @property
    def cause(self) -> str: ...
    @property
    def cluster(self) -> str: ...
    @property
    def broker_name(self) -> str: ...
    @property
    def addrs(self) -> tuple[tuple[int, str], ...]: ...
    @property
    def topics(self) -> tuple[str, ...]: ...
    @property
    def name_gone(self) -> bool: ...
    @property
    def replaced(self) -> tuple[tuple[int, str], ...]: ...


def _ids(addrs: Sequence[tuple[int, str]]) -> str:
    return ",".join(str(broker_id) for broker_id, _ in addrs)


def _addrs(addrs: Sequence[tuple[int, str]]) -> str:
    return ",".join(dict.fromkeys(addr for _, addr in addrs))


def _some(names: Collection[str]) -> str:
    shown = ",".join(list(names)[:NAMES_SHOWN])
    more = len(names) - NAMES_SHOWN
    return f"{shown} (and {more} more)" if more > 0 else shown


@dataclass(frozen=True, slots=True)
class BrokerRegistered:
    """A broker address registered for the first time under its (cluster, broker name,
    broker id), or an id registered at a new address (``replaced``: the one it held)."""

    kind: ClassVar[str] = "broker registered"
    cluster: str
    broker_name: str
    addrs: tuple[tuple[int, str], ...]
    routes_changed: int
    replaced: tuple[tuple[int, str], ...] = ()

    @classmethod
    def of(cls, event: BrokerChange) -> BrokerRegistered:
        return cls(event.cluster, event.broker_name, event.addrs, len(event.topics), event.replaced)

    def line(self) -> Line:
        msg = "broker registered: cluster=%s broker=%s id=%s addr=%s routes_changed=%d"
        args: tuple[Any, ...] = (
            self.cluster,
            self.broker_name,
            _ids(self.addrs),
            _addrs(self.addrs),
            self.routes_changed,
        )
        if self.replaced:
            msg += " replacing=%s"
            args += (_addrs(self.replaced),)
        return msg, args


_LEFT = {
    "unregister": "broker unregistered",
    "expiry": "broker expired",
    "channel_close": "broker connection closed",
}
"""What a departure's cause (``ChangeCause``) is called in a line."""


@dataclass(frozen=True, slots=True)
class BrokerLeft:
    """A broker address left its broker name: unregistered, expired (its heartbeats stopped)
    or its connection closed; with ``name_gone`` the name has no address left and its queues
    left every topic."""

    cause: str
    cluster: str
    broker_name: str
    addrs: tuple[tuple[int, str], ...]
    routes_changed: int
    name_gone: bool

    @classmethod
    def of(cls, event: BrokerChange) -> BrokerLeft:
        return cls(
            str(event.cause),
            event.cluster,
            event.broker_name,
            event.addrs,
            len(event.topics),
            event.name_gone,
        )

    @property
    def kind(self) -> str:
        return _LEFT.get(self.cause, f"broker left ({self.cause})")

    def line(self) -> Line:
        msg = f"{self.kind}: cluster=%s broker=%s id=%s addr=%s routes_changed=%d"
        if self.name_gone:
            msg += " last_address=yes"
        return msg, (
            self.cluster,
            self.broker_name,
            _ids(self.addrs),
            _addrs(self.addrs),
            self.routes_changed,
        )


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    """DELETE_TOPIC_IN_NAMESRV: the topic's queues left ``brokers`` (all of its brokers, or
    those of ``cluster``); none when the name server held no route of it there."""

    kind: ClassVar[str] = "topic deleted"
    topic: str
    cluster: str | None
    brokers: tuple[str, ...]

    def line(self) -> Line:
        return "topic deleted: topic=%s cluster=%s brokers=%s", (
            self.topic,
            self.cluster or "*",
            _some(self.brokers) if self.brokers else "none",
        )


@dataclass(frozen=True, slots=True)
class TopicsUnlisted:
    """A live master's register no longer lists topics it held, and
    ``registry.delete_topic_with_broker_registration`` is on: its queues left them."""

    kind: ClassVar[str] = "topics dropped"
    broker_name: str
    addr: str
    topics: tuple[str, ...]

    def line(self) -> Line:
        return "topics dropped: broker=%s addr=%s no longer lists %d topics: %s", (
            self.broker_name,
            self.addr,
            len(self.topics),
            _some(self.topics),
        )


@dataclass(frozen=True, slots=True)
class WritePermChanged:
    """WIPE_WRITE_PERM_OF_BROKER (``wiped``) or ADD_WRITE_PERM_OF_BROKER."""

    kind: ClassVar[str] = "write perm"
    broker_name: str
    wiped: bool
    topics: int

    def line(self) -> Line:
        what = "wiped" if self.wiped else "added"
        return f"write perm {what}: broker=%s topics=%d", (self.broker_name, self.topics)


@dataclass(frozen=True, slots=True)
class KvPut:
    """PUT_KV_CONFIG; ``changed`` False when the key held that value already."""

    kind: ClassVar[str] = "kv put"
    namespace: str
    key: str
    value: str
    changed: bool

    def line(self) -> Line:
        msg = "kv put: namespace=%s key=%s value=%s"
        return msg + ("" if self.changed else " unchanged=yes"), (
            self.namespace,
            self.key,
            self.value,
        )


@dataclass(frozen=True, slots=True)
class KvDeleted:
    """DELETE_KV_CONFIG; ``existed`` False when there was no such entry."""

    kind: ClassVar[str] = "kv deleted"
    namespace: str
    key: str
    existed: bool

    def line(self) -> Line:
        msg = "kv deleted: namespace=%s key=%s"
        return msg + ("" if self.existed else " absent=yes"), (self.namespace, self.key)


@dataclass(frozen=True, slots=True)
class ConfigChanged:
    """UPDATE_NAMESRV_CONFIG accepted: the ``key=value`` pairs as sent; ``changed`` False
    when the config already held them."""

    kind: ClassVar[str] = "config changed"
    settings: str
    changed: bool

    def line(self) -> Line:
        msg = "config changed: %s"
        return msg + ("" if self.changed else " unchanged=yes"), (self.settings,)


class AuditEvent(Protocol):
    """What every event has: the kind its lines are paced by, and its line."""

    @property
    def kind(self) -> str: ...
    def line(self) -> Line: ...
