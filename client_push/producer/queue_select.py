"""Choosing the queue a message goes to: round-robin over the topic's writable queues, through
the tiers of the fault strategy.

Pure: callers pass the time. With the strategy on, the first tier that has a queue wins:

1. queues of **available** brokers (not isolated by slow or failed sends),
2. queues of **reachable** brokers (isolated, but answering the detector),
3. queues of brokers not going away,
4. any queue: sending somewhere beats not sending.

While the detector runs (``prefer_heard``), the first tier is split: available brokers that
have answered (a probe or a send) come before available brokers not heard from yet. The
detector probes each broker as soon as a route in use names it, so a broker is unheard of only
until its first probe is answered (a round trip) or missed (then it is not available): sends
made right after a route arrives go to the brokers known to answer, not a third of them to a
black hole nobody has tried yet.

The broker of the attempt that just failed (``last_broker_name``) is left out of the first two
tiers, so a retry goes elsewhere when it can. A broker that announced a graceful shutdown
(GoAway) is neither available nor reachable until its grace period is over and it has answered
a probe; it still serves through its grace period, so it is the last resort rather than
excluded. With the strategy off, queues are taken round-robin, skipping the last broker and
brokers going away when another queue exists.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from client_push.errors import RouteClientError
from client_push.producer.fault_table import FaultTable
from client_push.routes.route_cache import MessageQueue, PublishInfo

QueueFilter = Callable[[MessageQueue], bool]


class NoWritableQueueError(RouteClientError):
    """The topic's route has no queue a producer may write to."""


class QueueSelector:
    def __init__(self, table: FaultTable, rng: random.Random | None = None) -> None:
        self.table = table
        self.prefer_heard = False
        """Set while the detector runs: without its probes, only brokers already sent to would
        be heard from, and the others would never get a message."""
        self._rng = rng or random.Random()
        self._index: dict[str, int] = {}
        """Per topic, the next round-robin position; starts at random, as upstream's."""

    def select(self, info: PublishInfo, last_broker_name: str | None, now_ms: int) -> MessageQueue:
        queues = info.message_queues
        if not queues:
            raise NoWritableQueueError(f"topic {info.topic} has no writable queue")
        table = self.table
        # The common case first: the next queue in turn passes the first tier. Otherwise the
        # position is stepped back, and the tiers below scan from that queue as they would.
        topic = info.topic
        queue = queues[self._advance(topic, len(queues))]
        name = queue.broker_name
        if name != last_broker_name and (
            table.is_available(name, now_ms)
            and (not self.prefer_heard or table.is_heard_from(name))
            if table.config.enabled
            else not table.is_going_away(name, now_ms)
        ):
            return queue
        self._index[topic] -= 1

        def elsewhere(q: MessageQueue) -> bool:
            return q.broker_name != last_broker_name

        def staying(q: MessageQueue) -> bool:
            return not table.is_going_away(q.broker_name, now_ms)

        def available(q: MessageQueue) -> bool:
            return elsewhere(q) and table.is_available(q.broker_name, now_ms)

        def reachable(q: MessageQueue) -> bool:
            return elsewhere(q) and table.is_reachable(q.broker_name, now_ms)

        def heard(q: MessageQueue) -> bool:
            return available(q) and table.is_heard_from(q.broker_name)

        tiers: tuple[QueueFilter, ...]
        if table.config.enabled and self.prefer_heard:
            tiers = (heard, available, reachable, staying)
        elif table.config.enabled:
            tiers = (available, reachable, staying)
        else:
            tiers = (lambda q: elsewhere(q) and staying(q), staying)
        for accept in tiers:
            chosen = self._scan(info.topic, queues, accept)
            if chosen is not None:
                return chosen
        return queues[self._advance(info.topic, len(queues))]

    def has_heard_from(self, info: PublishInfo, last_broker_name: str | None) -> bool:
        """Whether a broker of the route (other than the last) has ever answered."""
        table = self.table
        return any(
            q.broker_name != last_broker_name and table.is_heard_from(q.broker_name)
            for q in info.message_queues
        )

    def forget(self, keep_topics: set[str]) -> None:
        """Drop the positions of topics no longer held."""
        for topic in [t for t in self._index if t not in keep_topics]:
            del self._index[topic]

    def _scan(
        self, topic: str, queues: tuple[MessageQueue, ...], accept: QueueFilter
    ) -> MessageQueue | None:
        for _ in range(len(queues)):
            queue = queues[self._advance(topic, len(queues))]
            if accept(queue):
                return queue
        return None

    def _advance(self, topic: str, size: int) -> int:
        index = self._index.get(topic)
        if index is None:
            index = self._rng.randrange(size)
        self._index[topic] = index + 1
        return index % size
