"""NOTIFY frames for a fan-out, built once per distinct change set rather than per connection.

Within one tick every connection notified of the same topics gets the same body but for its
own ``sequence``. Protobuf parsers merge concatenated encodings of a message, so a frame is the
shared encoding of (changes, emitted_at_ms, epoch) followed by the connection's sequence field:
one small varint per connection instead of a full serialisation.
"""

from __future__ import annotations

import struct

from namesrv.change_detector import Notification
from protocol import routepush_pb2 as pb
from protocol.codes import RequestCode, SerializeType
from protocol.frame import RemotingCommand, encode_command
from protocol.push_codec import BrokerChangeTuple, add_broker_change

_SEQUENCE_TAG = b"\x10"  # field 2, varint
_PREFIX = struct.Struct(">II")


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


_SMALL_VARINTS = [_varint(i) for i in range(1 << 14)]
"""Sequences below 16384 (two varint bytes) are looked up, not encoded."""

Changes = tuple[tuple[str, int, int], ...]
_Key = tuple[Changes, tuple[BrokerChangeTuple, ...]]


class NotificationFrames:
    """Builds NOTIFY frames for one tick at a time: call :meth:`start_tick`, then :meth:`frame`."""

    def __init__(self, epoch: str) -> None:
        self._epoch = epoch
        self._headers = {
            int(st): encode_command(
                RemotingCommand.request(
                    RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, oneway=True, serialize_type=st
                )
            )[8:]
            for st in SerializeType
        }
        self._emitted_at = 0
        self._parts: dict[int, dict[_Key, tuple[bytes, int, int]]] = {
            int(st): {} for st in SerializeType
        }
        self._bodies: dict[_Key, bytes] = {}
        self.topics: set[str] = set()
        """Every topic in a frame built since :meth:`start_tick`."""

    def start_tick(self, emitted_at_ms: int) -> None:
        self._emitted_at = emitted_at_ms
        self._bodies.clear()
        for parts in self._parts.values():
            parts.clear()
        self.topics = set()

    def body_prefix(self, changes: Changes, brokers: tuple[BrokerChangeTuple, ...] = ()) -> bytes:
        """The encoding of (changes, brokers, emitted_at_ms, epoch), shared by every receiver."""
        key = (changes, brokers)
        shared = self._bodies.get(key)
        if shared is None:
            msg = pb.TopicRouteChanged(emitted_at_ms=self._emitted_at, epoch=self._epoch)
            for topic, version, kind in changes:
                msg.changes.add(topic=topic, version=version, kind=kind)
                self.topics.add(topic)
            for broker in brokers:
                add_broker_change(msg, broker)
            shared = msg.SerializeToString()
            self._bodies[key] = shared
        return shared

    def frame(self, note: Notification, serialize_type: int = SerializeType.JSON) -> bytes:
        parts_of = self._parts[serialize_type]
        key = (note.changes, note.brokers)
        parts = parts_of.get(key)
        if parts is None:
            header = self._headers[serialize_type]
            head = header + self.body_prefix(note.changes, note.brokers) + _SEQUENCE_TAG
            parts = (head, (int(serialize_type) << 24) | len(header), 4 + len(head))
            parts_of[key] = parts
        head, word, length_before_tail = parts
        sequence = note.sequence
        tail = _SMALL_VARINTS[sequence] if sequence < 16384 else _varint(sequence)
        return _PREFIX.pack(length_before_tail + len(tail), word) + head + tail
