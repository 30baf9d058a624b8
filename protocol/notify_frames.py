"""NOTIFY frames for a fan-out, built once per distinct change set rather than per connection.

Within one tick every connection notified of the same changes gets the same body but for its
own ``sequence``: a frame is the shared :func:`~protocol.push_codec.notification_prefix`
followed by the connection's :func:`~protocol.push_codec.sequence_suffix`, one small varint
per connection instead of a full serialisation.

A connection that asked for inline routes gets the same change set with one route body per
change (``routes``): such frames are shared in the same way by every inline connection owed
the same changes and routes, and a plain frame's key and cost stay as they were.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Hashable, Sequence

from protocol.codes import RequestCode, SerializeType
from protocol.frame import RemotingCommand, encode_command
from protocol.push_codec import SMALL_SEQUENCE_SUFFIXES, notification_prefix, sequence_suffix
from protocol.push_events import BrokerChange, TopicChange

_PREFIX = struct.Struct(">II")
_TOPIC = operator.itemgetter(0)
_SMALL = len(SMALL_SEQUENCE_SUFFIXES)

Changes = Sequence[TopicChange] | Sequence[tuple[str, int, int]]
Brokers = Sequence[BrokerChange]


class NotifyFrames:
    """Builds NOTIFY frames one tick at a time: call :meth:`start_tick`, then :meth:`frame`.

    ``changes`` and ``brokers`` are used as cache keys, so callers pass tuples (the same tuple
    for every connection owed the same change set, ideally).
    """

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
        self._parts: dict[int, dict[Hashable, tuple[bytes, int, int]]] = {
            int(st): {} for st in SerializeType
        }
        self._bodies: dict[Hashable, bytes] = {}
        self.topics: set[str] = set()
        """Every topic in a frame built since :meth:`start_tick`."""

    def start_tick(self, emitted_at_ms: int) -> None:
        self._emitted_at = emitted_at_ms
        self._bodies.clear()
        for parts in self._parts.values():
            parts.clear()
        self.topics = set()

    def body_prefix(
        self, changes: Changes, brokers: Brokers = (), routes: Sequence[bytes] = ()
    ) -> bytes:
        """The body without its sequence, shared by every receiver of this change set."""
        key = (changes, brokers, routes) if routes else (changes, brokers)
        shared = self._bodies.get(key)
        if shared is None:
            shared = notification_prefix(changes, self._emitted_at, self._epoch, brokers, routes)
            self.topics.update(map(_TOPIC, changes))
            self._bodies[key] = shared
        return shared

    def frame(
        self,
        changes: Changes,
        brokers: Brokers,
        sequence: int,
        serialize_type: int = SerializeType.JSON,
        routes: Sequence[bytes] = (),
    ) -> bytes:
        """The whole frame (length prefix, header, body) for one connection; ``routes``, when
        given, holds one inline route body per change (empty bytes for none)."""
        parts_of = self._parts[serialize_type]
        key = (changes, brokers, routes) if routes else (changes, brokers)
        parts = parts_of.get(key)
        if parts is None:
            header = self._headers[serialize_type]
            head = header + self.body_prefix(changes, brokers, routes)
            parts = (head, (int(serialize_type) << 24) | len(header), 4 + len(head))
            parts_of[key] = parts
        head, word, length_before_tail = parts
        tail = SMALL_SEQUENCE_SUFFIXES[sequence] if sequence < _SMALL else sequence_suffix(sequence)
        return _PREFIX.pack(length_before_tail + len(tail), word) + head + tail
