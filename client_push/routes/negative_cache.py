"""Remembered absences: TOPIC_NOT_EXIST believed for a TTL.

Without it a producer asking for a missing topic sends one request per lookup; with it the
lookups inside the TTL fail at once and send nothing.
"""

from __future__ import annotations

from client_push.errors import TopicNotExistError


class NegativeCache:
    def __init__(self, ttl_ms: int) -> None:
        self._ttl = ttl_ms
        self._until: dict[str, int] = {}
        self.hits = 0

    def put(self, topic: str, now_ms: int) -> None:
        if self._ttl > 0:
            self._until[topic] = now_ms + self._ttl

    def check(self, topic: str, now_ms: int) -> None:
        """Raise ``TopicNotExistError`` while the topic's absence is still believed."""
        until = self._until.get(topic)
        if until is None:
            return
        if now_ms < until:
            self.hits += 1
            raise TopicNotExistError(topic, until, now_ms=now_ms, cached=True)
        del self._until[topic]

    def is_absent(self, topic: str, now_ms: int) -> bool:
        until = self._until.get(topic)
        return until is not None and now_ms < until

    def retry_at(self, topic: str) -> int | None:
        return self._until.get(topic)

    def clear(self, topic: str) -> bool:
        """Forget the absence (a CREATED notification or a successful fetch); True if held."""
        return self._until.pop(topic, None) is not None

    def __contains__(self, topic: object) -> bool:
        return topic in self._until

    def __len__(self) -> int:
        return len(self._until)
