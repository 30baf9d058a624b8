"""The route-push extension's messages as typed values (route-push-contract.md).

Code above ``protocol/`` sees these, never protobuf messages: ``push_codec`` turns bytes into
them and back. The records a server hashes per connection and tick (a change, a broker entry
and their parts) are named tuples, hashed in C; whole messages are frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from protocol import routepush_pb2 as pb
from protocol.route_model import TopicRouteData


class ChangeKind(IntEnum):
    """``routepush.v1.ChangeKind``, numbered as on the wire."""

    UPDATED = pb.UPDATED
    CREATED = pb.CREATED
    DELETED = pb.DELETED
    UNROUTED = pb.UNROUTED


class BrokerChangeKind(IntEnum):
    """``routepush.v1.BrokerChangeKind``, numbered as on the wire."""

    DEPARTED = pb.BROKER_DEPARTED
    ARRIVED = pb.BROKER_ARRIVED


class TopicChange(NamedTuple):
    """A topic whose route is now at ``version``."""

    topic: str
    version: int
    kind: int
    """A :class:`ChangeKind` value (a peer may send one this side does not know)."""
    route: bytes = b""
    """An inline route: the GET_ROUTEINFO_BY_TOPIC response body for exactly ``version``
    (read it with ``protocol.bodies.decode_route``); empty when the server sent none."""


class BrokerAddress(NamedTuple):
    broker_id: int
    addr: str


class TopicStep(NamedTuple):
    """A topic a broker change moved to ``version``; when ``from_version`` is not 0, the route
    at ``version`` is exactly the route at ``from_version`` with the change applied."""

    topic: str
    version: int
    from_version: int


class BrokerChange(NamedTuple):
    """A broker address that left (or joined) a broker name, for one receiving connection."""

    kind: int
    """A :class:`BrokerChangeKind` value."""
    broker_name: str
    cluster: str
    addrs: tuple[BrokerAddress, ...]
    cause: str
    broker_name_gone: bool
    """Departures: no address of the broker name is left, so its queue data left every topic."""
    read_only: bool
    """Departures: the remaining addresses have no master under acting master: read-only."""
    topics: tuple[TopicStep, ...]
    refetch_window_ms: int
    """Spread the refetches this entry causes over at least this long."""


class TopicVersion(NamedTuple):
    topic: str
    version: int
    exists: bool
    deleted: bool = False
    """Deleted in this epoch: drop the route (``exists`` false alone: no broker serves it now)."""


class InlineRoute(NamedTuple):
    """A change's inline route as a client reads it: decoded, or refused with the reason."""

    route: TopicRouteData | None
    """None when the route was refused (``oversize`` or ``unreadable`` says why)."""
    oversize: bool = False
    """Over the reader's size bound: refused before decoding."""
    unreadable: str = ""
    """What was wrong with a route that could not be decoded."""


@dataclass(frozen=True, slots=True)
class RouteChanged:
    """NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED (7003): every change of one tick for one connection."""

    changes: tuple[TopicChange, ...]
    sequence: int
    emitted_at_ms: int
    epoch: str
    brokers: tuple[BrokerChange, ...] = ()
    inline: tuple[InlineRoute | None, ...] = ()
    """Filled by a client's read (``push_codec.read_server_request``): one entry per change, in
    the order of ``changes``, None where the change carried no route; empty otherwise."""


@dataclass(frozen=True, slots=True)
class Subscribe:
    """SUBSCRIBE_TOPIC_ROUTE_CHANGED (7001) request."""

    topics: tuple[str, ...]
    client_id: str = ""
    inline_routes: bool = False
    """The connection asks for the new route inside each notification, where bounds allow."""


@dataclass(frozen=True, slots=True)
class SubscribeAck:
    """SUBSCRIBE_TOPIC_ROUTE_CHANGED (7001) answer: the version each topic has now."""

    topics: tuple[TopicVersion, ...]
    epoch: str
    warming_up: bool = False
    """The server is in its start-up window: ``exists`` false may mean "not heard of yet"."""
    warm_in_ms: int = 0
    """What is left of the start-up window."""
    uptime_ms: int = 0
    """How long the server has been up (0 from a server that does not say)."""


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """UNSUBSCRIBE_TOPIC_ROUTE_CHANGED (7002) request."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A request of the push extension whose body could not be read."""

    code: int
    """The request code (NOTIFY or GO_AWAY)."""
    remark: str


@dataclass(frozen=True, slots=True)
class GoAway:
    """GO_AWAY (7004): the sender is stopping; move to another connection."""

    grace_period_ms: int
    alternative_addrs: tuple[str, ...]
    reason: str
