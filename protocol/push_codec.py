"""Protobuf bodies of the route-push commands (route-push-contract.md), as plain Python values.

Callers never handle protobuf exceptions: every decode failure becomes a ``BodyError`` that a
processor answers with INVALID_PARAMETER, so a malformed body never tears a connection down.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import TypeVar

from google.protobuf.message import Message

from protocol import routepush_pb2 as pb
from protocol.errors import BodyError


class ChangeKind(IntEnum):
    """``routepush.v1.ChangeKind``, numbered as on the wire."""

    UPDATED = pb.UPDATED
    CREATED = pb.CREATED
    DELETED = pb.DELETED


class BrokerChangeKind(IntEnum):
    """``routepush.v1.BrokerChangeKind``, numbered as on the wire."""

    DEPARTED = pb.BROKER_DEPARTED
    ARRIVED = pb.BROKER_ARRIVED


BrokerChangeTuple = tuple[
    int,
    str,
    str,
    tuple[tuple[int, str], ...],
    str,
    bool,
    bool,
    tuple[tuple[str, int, int], ...],
    int,
]
"""(kind, broker_name, cluster, ((broker_id, addr), ...), cause, broker_name_gone, read_only,
((topic, version, from_version), ...), refetch_window_ms): one ``BrokerChange`` as plain,
hashable values."""


def add_broker_change(message: pb.TopicRouteChanged, change: BrokerChangeTuple) -> None:
    """Append ``change`` to a NOTIFY body's ``brokers``."""
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


M = TypeVar("M", bound=Message)


def parse(message_cls: type[M], body: bytes) -> M:
    """Decode ``body`` as ``message_cls``; an empty body is the message with every field unset."""
    try:
        return message_cls.FromString(body)
    except Exception as exc:  # DecodeError, bad UTF-8, a non-bytes body: all the peer's fault
        name = message_cls.DESCRIPTOR.full_name
        raise BodyError(f"malformed {name} body: {exc}") from exc


def encode_subscribe(topics: Iterable[str], client_id: str) -> bytes:
    return pb.SubscribeTopicRoute(topics=topics, client_id=client_id).SerializeToString()


def encode_unsubscribe(topics: Iterable[str]) -> bytes:
    return pb.UnsubscribeTopicRoute(topics=topics).SerializeToString()


def encode_subscribe_ack(versions: Iterable[tuple[str, int, bool]], epoch: str) -> bytes:
    """``versions`` holds (topic, version, exists) for every topic of the request."""
    entries = [
        pb.TopicVersion(topic=topic, version=version, exists=exists)
        for topic, version, exists in versions
    ]
    return pb.SubscribeAck(topics=entries, epoch=epoch).SerializeToString()


def encode_notification(
    changes: Sequence[tuple[str, int, int]],
    sequence: int,
    emitted_at_ms: int,
    epoch: str,
    brokers: Sequence[BrokerChangeTuple] = (),
) -> bytes:
    """A NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED body; ``changes`` holds (topic, version, kind)."""
    entries = [
        pb.TopicChange(topic=topic, version=version, kind=ChangeKind(kind).value)
        for topic, version, kind in changes
    ]
    message = pb.TopicRouteChanged(
        changes=entries, sequence=sequence, emitted_at_ms=emitted_at_ms, epoch=epoch
    )
    for change in brokers:
        add_broker_change(message, change)
    return message.SerializeToString()


def encode_go_away(grace_period_ms: int, alternative_addrs: Iterable[str], reason: str) -> bytes:
    message = pb.GoAway(
        grace_period_ms=grace_period_ms, alternative_addrs=alternative_addrs, reason=reason
    )
    return message.SerializeToString()
