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

_SEQUENCE_TAG = b"\x10"  # field 2, varint


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


class NotificationFrames:
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
        self._emitted_at: int | None = None
        self._shared: dict[tuple[tuple[str, int, int], ...], bytes] = {}

    def body_prefix(self, changes: tuple[tuple[str, int, int], ...], emitted_at_ms: int) -> bytes:
        if emitted_at_ms != self._emitted_at:
            self._emitted_at = emitted_at_ms
            self._shared.clear()
        shared = self._shared.get(changes)
        if shared is None:
            msg = pb.TopicRouteChanged(emitted_at_ms=emitted_at_ms, epoch=self._epoch)
            for topic, version, kind in changes:
                msg.changes.add(topic=topic, version=version, kind=kind)
            shared = msg.SerializeToString()
            self._shared[changes] = shared
        return shared

    def frame(self, note: Notification, serialize_type: int = SerializeType.JSON) -> bytes:
        header = self._headers[int(serialize_type)]
        body = self.body_prefix(note.changes, note.emitted_at_ms)
        body += _SEQUENCE_TAG + _varint(note.sequence)
        length = 4 + len(header) + len(body)
        return struct.pack(">II", length, (int(serialize_type) << 24) | len(header)) + header + body
