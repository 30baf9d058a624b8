"""The topics deleted in this epoch: the newest ``push.deleted_topics_remembered`` of them.

A topic whose route left because it was deleted (DELETE_TOPIC_IN_NAMESRV, or a live broker
registering its full table without it) is remembered here until it is registered again, so a
SUBSCRIBE (``TopicVersion.deleted``) and a lookup (``topicDeleted=true``) can say "deleted"
rather than "no broker serves it now". Whoever may delete topics decides how many are
deleted, so the set is bounded: past the bound the oldest deletion is forgotten (a client then
sees the topic as unrouted, and keeps a route it holds). Every operation is O(1).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable


class DeletedTopics:
    __slots__ = ("_topics", "forgotten", "limit")

    def __init__(self, limit: int) -> None:
        """``limit`` 0 remembers none."""
        self.limit = limit
        self._topics: OrderedDict[str, None] = OrderedDict()
        self.forgotten = 0
        """Deletions dropped at the bound, oldest first."""

    def __contains__(self, topic: object) -> bool:
        return topic in self._topics

    def __len__(self) -> int:
        return len(self._topics)

    def __bool__(self) -> bool:
        return bool(self._topics)

    def add(self, topic: str) -> None:
        """``topic`` was deleted now: it is the newest deletion."""
        topics = self._topics
        if topic in topics:
            topics.move_to_end(topic)
            return
        if self.limit <= 0:
            return
        topics[topic] = None
        if len(topics) > self.limit:
            topics.popitem(last=False)
            self.forgotten += 1

    def discard(self, topic: str) -> None:
        """``topic`` has a route again: no longer deleted."""
        self._topics.pop(topic, None)

    def discard_all(self, topics: Iterable[str]) -> None:
        """:meth:`discard` for each of ``topics``."""
        remembered = self._topics
        if remembered:
            # The search in C: a large register's batch is thousands of topics, rarely deleted.
            for topic in list(filter(remembered.__contains__, topics)):
                del remembered[topic]
