"""Whole GET_ROUTEINFO_BY_TOPIC response frames, answered without decoding the request.

Clients ask for the same routes over and over (every 30 s per topic per client, more on
push), with request frames that differ only in ``opaque``. This cache keys a request by its
raw JSON header with the opaque digits cut out, and holds the response frame split around its
own opaque, so a repeat request is answered by one dictionary lookup and a splice.

It is a view of :class:`~namesrv.routes.route_bodies.RouteBodies` plus the topic's route
version, and is dropped with them: the server invalidates both for every topic the registry
reports, which is also the only way a topic's version can move. Only successful answers to
JSON requests without a body are cached; anything unusual takes the full path.

A key is a request shape a client chose, so a hostile client could make every one distinct
(a padding field, a made-up version): only requests carrying nothing but the fields upstream
clients send, in a header of at most ``MAX_SHAPE_BYTES``, are cached, and memory is bounded by
``max_bytes`` and ``max_entries`` (the whole cache is dropped when full: request shapes are few
in practice, so a legitimate working set refills it at once).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.frame import RemotingCommand, encode_command

_OPAQUE = re.compile(rb'"opaque":(-?[0-9]+)')
_PREFIX = struct.Struct(">II")

CACHEABLE_EXT_FIELDS = frozenset(
    {"topic", "acceptStandardJsonOnly", "lo", "ns", "nsd", "bname", "oway"}
    | {"__ZONE_MODE", "__ZONE_NAME"}
)
"""``GetRouteInfoRequestHeader``'s fields and those it inherits upstream (the RPC header's
namespace, broker name, oneway and logic-queue flags), and the zone-mode fields. A request's
shape holds them all, so a zone-filtered answer is keyed by its zone fields."""

MAX_SHAPE_BYTES = 1024
"""Request headers longer than this are answered but not cached."""

ENTRY_OVERHEAD_BYTES = 400
"""What an entry costs beyond its byte strings (dict slot, tuple, list slot, int objects)."""


class RouteResponseCache:
    def __init__(self, max_entries: int = 65_536, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: dict[bytes, tuple[bytes, bytes, bytes, int, int]] = {}
        """request shape → (response header before the opaque digits, header after, body,
        header length without the digits, frame length without them)."""
        self._shapes_of_topic: dict[str, list[bytes]] = {}
        self.hits = 0
        self.stores = 0
        self.resets = 0
        self.uncacheable = 0
        """Successful answers not stored: unusual header fields or an oversized header."""

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """What the entries hold, counted as ``max_bytes`` counts it."""
        return self._bytes

    def answer(self, frame: bytes) -> bytes | None:
        """The response to ``frame`` (a frame without its length prefix), or None: go decode."""
        size = len(frame)
        # JSON (type byte 0) and no body: the header runs to the end of the frame.
        if size < 4 or frame[0] or size != 4 + int.from_bytes(frame[1:4], "big"):
            return None
        start = frame.find(b'"opaque":', 4) + 9
        if start == 8 or start >= size:
            return None
        end = start + 1  # the first character may be "-"
        size_limit = min(size, start + 12)
        while end < size_limit and 47 < frame[end] < 58:
            end += 1
        if not 47 < frame[end - 1] < 58:
            return None
        entry = self._entries.get(frame[4:start] + frame[end:])
        if entry is None:
            return None
        digits = frame[start:end]
        lead = 1 if digits[0] == 45 else 0  # "-"
        if digits[lead] == 48 and end - start > lead + 1:  # a leading zero is not JSON
            return None
        head, tail, body, header_base, frame_base = entry
        self.hits += 1
        n = end - start
        return b"".join((_PREFIX.pack(frame_base + n, header_base + n), head, digits, tail, body))

    def store(
        self,
        frame: bytes,
        request: RemotingCommand,
        response: RemotingCommand,
        topic: str,
        encoded: bytes | None = None,
    ) -> None:
        """Remember ``response`` for requests shaped like ``frame``, when that is safe.

        ``encoded`` is the response frame when the caller already encoded it to send it.
        """
        if (
            request.code != RequestCode.GET_ROUTEINFO_BY_TOPIC
            or response.code != ResponseCode.SUCCESS
            or request.serialize_type != SerializeType.JSON
            or request.body
            or len(frame) != 4 + int.from_bytes(frame[1:4], "big")
        ):
            return
        if (
            len(frame) - 4 > MAX_SHAPE_BYTES
            or request.remark is not None
            or not CACHEABLE_EXT_FIELDS.issuperset(request.ext_fields)
        ):
            self.uncacheable += 1
            return
        header = frame[4:]
        matches = list(_OPAQUE.finditer(header))
        if len(matches) != 1 or header.count(b'"opaque"') != 1:
            return
        start, end = matches[0].span(1)
        if header[start:end] != str(request.opaque).encode():
            return
        if encoded is None:
            encoded = encode_command(response)
        response_header_length = int.from_bytes(encoded[5:8], "big")
        response_header = encoded[8 : 8 + response_header_length]
        own = list(_OPAQUE.finditer(response_header))
        if len(own) != 1:
            return
        r_start, r_end = own[0].span(1)
        shape = header[:start] + header[end:]
        head, tail = response_header[:r_start], response_header[r_end:]
        body = encoded[8 + response_header_length :]
        cost = _cost(shape, head, tail, body)
        if cost > self._max_bytes:
            self.uncacheable += 1
            return
        old = self._entries.pop(shape, None)
        if old is not None:
            self._bytes -= _cost(shape, old[0], old[1], old[2])
        elif len(self._entries) >= self._max_entries or self._bytes + cost > self._max_bytes:
            self.clear()
            self.resets += 1
        header_base = len(head) + len(tail)
        self._entries[shape] = (head, tail, body, header_base, 4 + header_base + len(body))
        self._bytes += cost
        shapes = self._shapes_of_topic.setdefault(topic, [])
        if old is None:
            shapes.append(shape)
        self.stores += 1

    def clear(self) -> None:
        self._entries.clear()
        self._shapes_of_topic.clear()
        self._bytes = 0

    def invalidate(self, topics: Iterable[str]) -> None:
        shapes_of_topic = self._shapes_of_topic
        for topic in shapes_of_topic.keys() & topics if shapes_of_topic else ():
            for shape in shapes_of_topic.pop(topic):
                entry = self._entries.pop(shape, None)
                if entry is not None:
                    self._bytes -= _cost(shape, entry[0], entry[1], entry[2])


def _cost(shape: bytes, head: bytes, tail: bytes, body: bytes) -> int:
    return len(shape) + len(head) + len(tail) + len(body) + ENTRY_OVERHEAD_BYTES
