"""Bytes of the route-push commands (route-push-contract.md) to and from typed values.

The one place the extension's protobuf messages are built and read: code above ``protocol/``
hands in and gets back the values of ``protocol.push_events``. Every decode failure becomes a
``BodyError``, which a processor answers with INVALID_PARAMETER, so a malformed body never
tears a connection down.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

from google.protobuf.message import Message

from protocol import routepush_pb2 as pb
from protocol.bodies import decode_route
from protocol.codes import RequestCode
from protocol.errors import BodyError, ProtocolError
from protocol.push_events import (
    BrokerAddress,
    BrokerChange,
    BrokerChangeKind,
    ChangeKind,
    GoAway,
    InlineRoute,
    RouteChanged,
    Subscribe,
    SubscribeAck,
    TopicChange,
    TopicStep,
    TopicVersion,
    Unreadable,
    Unsubscribe,
)

__all__ = [
    "BrokerChangeKind",
    "ChangeKind",
    "decode_go_away",
    "decode_notification",
    "decode_subscribe",
    "decode_subscribe_ack",
    "decode_unsubscribe",
    "encode_go_away",
    "encode_notification",
    "encode_subscribe",
    "encode_subscribe_ack",
    "encode_unsubscribe",
    "notification_prefix",
    "read_server_request",
    "sequence_suffix",
]

M = TypeVar("M", bound=Message)


def _parse(message_cls: type[M], body: bytes) -> M:
    """Decode ``body`` as ``message_cls``; an empty body is the message with every field unset."""
    try:
        return message_cls.FromString(body)
    except Exception as exc:  # DecodeError, bad UTF-8, a non-bytes body: all the peer's fault
        name = message_cls.DESCRIPTOR.full_name
        raise BodyError(f"malformed {name} body: {exc}") from exc


# -- SUBSCRIBE / UNSUBSCRIBE -----------------------------------------------------------------


def encode_subscribe(topics: Iterable[str], client_id: str, inline_routes: bool = False) -> bytes:
    message = pb.SubscribeTopicRoute(
        topics=topics, client_id=client_id, inline_routes=inline_routes
    )
    return message.SerializeToString()


def decode_subscribe(body: bytes) -> Subscribe:
    msg = _parse(pb.SubscribeTopicRoute, body)
    return Subscribe(tuple(msg.topics), msg.client_id, msg.inline_routes)


def encode_unsubscribe(topics: Iterable[str]) -> bytes:
    return pb.UnsubscribeTopicRoute(topics=topics).SerializeToString()


def decode_unsubscribe(body: bytes) -> Unsubscribe:
    return Unsubscribe(tuple(_parse(pb.UnsubscribeTopicRoute, body).topics))


def encode_subscribe_ack(
    versions: Iterable[tuple[str, int, bool] | TopicVersion],
    epoch: str,
    *,
    warming_up: bool = False,
    warm_in_ms: int = 0,
    uptime_ms: int = 0,
) -> bytes:
    """``versions`` holds (topic, version, exists[, deleted]) for every topic of the request."""
    entries = [
        pb.TopicVersion(topic=v[0], version=v[1], exists=v[2], deleted=len(v) > 3 and bool(v[3]))
        for v in versions
    ]
    return pb.SubscribeAck(
        topics=entries,
        epoch=epoch,
        warming_up=warming_up,
        warm_in_ms=warm_in_ms,
        uptime_ms=uptime_ms,
    ).SerializeToString()


def decode_subscribe_ack(body: bytes) -> SubscribeAck:
    msg = _parse(pb.SubscribeAck, body)
    return SubscribeAck(
        tuple(TopicVersion(t.topic, t.version, t.exists, t.deleted) for t in msg.topics),
        msg.epoch,
        msg.warming_up,
        msg.warm_in_ms,
        msg.uptime_ms,
    )


# -- NOTIFY ----------------------------------------------------------------------------------

_SEQUENCE_TAG = b"\x10"
"""``TopicRouteChanged.sequence``: field 2, varint."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


SMALL_SEQUENCE_SUFFIXES = tuple(_SEQUENCE_TAG + _varint(i) for i in range(1 << 14))
"""``sequence_suffix(n)`` for every n below 16384 (two varint bytes): looked up, not encoded."""


def notification_prefix(
    changes: Iterable[tuple[str, int, int]] | Iterable[TopicChange],
    emitted_at_ms: int,
    epoch: str,
    brokers: Iterable[BrokerChange] = (),
    routes: Sequence[bytes] = (),
) -> bytes:
    """A NOTIFY body without its sequence: the part every receiver of one change set shares.

    ``routes``, when given, holds one inline route body per change (empty bytes: none), in the
    order of ``changes``. Protobuf parsers merge concatenated encodings of a message, so
    ``prefix + sequence_suffix(n)`` is the whole body for the connection at sequence ``n``.
    """
    message = pb.TopicRouteChanged(emitted_at_ms=emitted_at_ms, epoch=epoch)
    add_change = message.changes.add
    # By index: a change is a (topic, version, kind) tuple or a TopicChange, which has more.
    if routes:
        for change, route in zip(changes, routes, strict=True):
            add_change(topic=change[0], version=change[1], kind=change[2], route=route)
    else:
        for change in changes:
            add_change(topic=change[0], version=change[1], kind=change[2])
    for broker in brokers:
        _add_broker_change(message, broker)
    return message.SerializeToString()


def sequence_suffix(sequence: int) -> bytes:
    """The ``sequence`` field that completes a :func:`notification_prefix`."""
    if sequence < 16384:
        return SMALL_SEQUENCE_SUFFIXES[sequence]
    return _SEQUENCE_TAG + _varint(sequence)


def _add_broker_change(message: pb.TopicRouteChanged, change: BrokerChange) -> None:
    kind, name, cluster, addrs, cause, gone, read_only, topics, window_ms = change
    entry = message.brokers.add(
        kind=kind,
        broker_name=name,
        cluster=cluster,
        cause=cause,
        broker_name_gone=gone,
        read_only=read_only,
        refetch_window_ms=window_ms,
    )
    for broker_id, addr in addrs:
        entry.addrs.add(broker_id=broker_id, addr=addr)
    for topic, version, from_version in topics:
        entry.topics.add(topic=topic, version=version, from_version=from_version)


def encode_notification(
    changes: Sequence[tuple[str, int, int]] | Sequence[TopicChange],
    sequence: int,
    emitted_at_ms: int,
    epoch: str,
    brokers: Sequence[BrokerChange] = (),
    routes: Sequence[bytes] = (),
) -> bytes:
    """A NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED body; ``changes`` holds (topic, version, kind) and
    ``routes`` (optional) one inline route body per change, empty for none."""
    for change in changes:
        ChangeKind(change[2])  # refuse a kind the contract does not define
    prefix = notification_prefix(changes, emitted_at_ms, epoch, brokers, routes)
    return prefix + sequence_suffix(sequence)


def decode_notification(body: bytes) -> RouteChanged:
    msg = _parse(pb.TopicRouteChanged, body)
    return RouteChanged(
        changes=tuple(TopicChange(c.topic, c.version, c.kind, c.route) for c in msg.changes),
        sequence=msg.sequence,
        emitted_at_ms=msg.emitted_at_ms,
        epoch=msg.epoch,
        brokers=tuple(
            BrokerChange(
                kind=b.kind,
                broker_name=b.broker_name,
                cluster=b.cluster,
                addrs=tuple(BrokerAddress(a.broker_id, a.addr) for a in b.addrs),
                cause=b.cause,
                broker_name_gone=b.broker_name_gone,
                read_only=b.read_only,
                topics=tuple(TopicStep(s.topic, s.version, s.from_version) for s in b.topics),
                refetch_window_ms=b.refetch_window_ms,
            )
            for b in msg.brokers
        ),
    )


# -- GO_AWAY ---------------------------------------------------------------------------------


def encode_go_away(grace_period_ms: int, alternative_addrs: Iterable[str], reason: str) -> bytes:
    message = pb.GoAway(
        grace_period_ms=grace_period_ms, alternative_addrs=alternative_addrs, reason=reason
    )
    return message.SerializeToString()


def decode_go_away(body: bytes) -> GoAway:
    msg = _parse(pb.GoAway, body)
    return GoAway(msg.grace_period_ms, tuple(msg.alternative_addrs), msg.reason)


# -- a client's reading of the server's requests ----------------------------------------------


def read_server_request(
    code: int, body: bytes, *, max_route_bytes: int
) -> RouteChanged | GoAway | Unreadable | None:
    """A request the name server sent a client, read whole: a NOTIFY with its inline routes
    decoded (each over ``max_route_bytes`` refused undecoded), a GO_AWAY, what made either
    unreadable, or None for a code the push extension does not define."""
    try:
        if code == RequestCode.GO_AWAY:
            return decode_go_away(body)
        if code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED:
            note = decode_notification(body)
            return _with_inline_routes(note, max_route_bytes)
    except ProtocolError as exc:
        return Unreadable(code, exc.remark)
    return None


def _with_inline_routes(note: RouteChanged, max_bytes: int) -> RouteChanged:
    """``note`` with the inline route of each change decoded (None where it carried none)."""
    if not any(change.route for change in note.changes):
        return note
    inline: list[InlineRoute | None] = []
    for change in note.changes:
        inline.append(_inline(change.route, max_bytes))
    return replace(note, inline=tuple(inline))


def _inline(body: bytes, max_bytes: int) -> InlineRoute | None:
    if not body:
        return None
    if len(body) > max_bytes:  # refused by size: decoding runs on the event loop
        return InlineRoute(None, oversize=True)
    try:
        return InlineRoute(decode_route(body))
    except ProtocolError as exc:
        return InlineRoute(None, unreadable=exc.remark)
