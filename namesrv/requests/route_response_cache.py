"""Whole GET_ROUTEINFO_BY_TOPIC response frames, answered without decoding the request.

Clients ask for the same routes over and over (every 30 s per topic per client, more on
push), with request frames that differ only in ``opaque``. This cache keys a request by its
raw JSON header with the opaque digits cut out (its shape) and holds the response as a
frame template (``protocol.frame.TemplateAnswers``), so a repeat request is answered by one
dictionary lookup and a splice of its opaque.

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

from collections.abc import Callable, Iterable

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.frame import FrameTemplate, RemotingCommand, TemplateAnswers, encode_command

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
"""What an entry costs beyond its byte strings (dict slot, template object, list slot, ints)."""


class RouteResponseCache:
    answer: Callable[[bytes], bytes | None]
    """The response to a frame (without its length prefix), or None: go decode."""

    def __init__(self, max_entries: int = 65_536, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._answers = TemplateAnswers()
        self.answer = self._answers.answer  # the lookup path: no call in between
        self._shapes_of_topic: dict[str, list[bytes]] = {}
        self.stores = 0
        self.resets = 0
        self.uncacheable = 0
        """Successful answers not stored: unusual header fields or an oversized header."""

    def figures(self) -> dict[str, int]:
        """The cache's figures for the server's stats."""
        return {
            "route_cache_hits": self.hits,
            "route_cache_bytes": self.size_bytes,
            "route_cache_entries": len(self),
            "route_cache_resets": self.resets,
            "route_cache_uncacheable": self.uncacheable,
        }

    def __len__(self) -> int:
        return len(self._answers)

    @property
    def hits(self) -> int:
        return self._answers.hits

    @property
    def size_bytes(self) -> int:
        """What the entries hold, counted as ``max_bytes`` counts it."""
        return self._bytes

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
        ):
            return
        if (
            len(frame) - 4 > MAX_SHAPE_BYTES
            or request.remark is not None
            or not CACHEABLE_EXT_FIELDS.issuperset(request.ext_fields)
        ):
            self.uncacheable += 1
            return
        shape = TemplateAnswers.shape(frame, request.opaque)
        if shape is None:
            return
        template = FrameTemplate.of(encode_command(response) if encoded is None else encoded)
        if template is None:
            return
        cost = _cost(shape, template)
        if cost > self._max_bytes:
            self.uncacheable += 1
            return
        old = self._answers.pop(shape)
        if old is not None:
            self._bytes -= _cost(shape, old)
        elif len(self._answers) >= self._max_entries or self._bytes + cost > self._max_bytes:
            self.clear()
            self.resets += 1
        self._answers.put(shape, template)
        self._bytes += cost
        shapes = self._shapes_of_topic.setdefault(topic, [])
        if old is None:
            shapes.append(shape)
        self.stores += 1

    def clear(self) -> None:
        self._answers.clear()
        self._shapes_of_topic.clear()
        self._bytes = 0

    def invalidate(self, topics: Iterable[str]) -> None:
        shapes_of_topic = self._shapes_of_topic
        for topic in shapes_of_topic.keys() & topics if shapes_of_topic else ():
            for shape in shapes_of_topic.pop(topic):
                template = self._answers.pop(shape)
                if template is not None:
                    self._bytes -= _cost(shape, template)


def _cost(shape: bytes, template: FrameTemplate) -> int:
    return len(shape) + template.nbytes + ENTRY_OVERHEAD_BYTES
