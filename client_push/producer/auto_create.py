"""Sending to a topic that does not exist yet, through the default topic, as upstream's producer.

Pure. Upstream's ``DefaultMQProducerImpl.tryToFindTopicPublishInfo`` falls back, when the name
server has no route for a topic, to the route of the default topic (``createTopicKey``,
``TBW102``), which the brokers that allow auto-creation (``autoCreateTopicEnable=true``)
register with a perm that includes INHERIT. ``MQClientInstance.updateTopicRouteInfoFromNameServer``
with ``isDefault`` takes that route with each broker's queue count cut to
``min(defaultTopicQueueNums, readQueueNums)`` (read and write alike), and the producer sends
under the new topic's name to those queues. The broker then creates the topic (queues at most
the default topic's, perm the default topic's minus INHERIT) and registers it, and the name
server announces its route; a broker that does not allow it answers TOPIC_NOT_EXIST (or
NO_PERMISSION), which ``refusal`` turns into a message saying what the broker must allow.

Events in and decisions out, for any event loop:

* ``borrowed_route(default_route, config)`` -> the route a send to a topic without one uses;
  ``publish_info(topic, that route)`` gives its queues;
* ``refusal(broker_name, topic, config, code, remark)`` -> the error text of a broker's refusal
  to create the topic, or None when the answer is not such a refusal;
* ``BorrowedRoutes``: per topic without a route, the publish info and route its sends use,
  built once per default-topic route held (``borrow``), dropped when the topic's own route
  arrives (``own_route``); at most ``MAX_BORROWED_TOPICS``, the oldest making room.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, replace

from client_push.errors import TopicNotExistError
from client_push.routes.route_cache import CachedRoute, PublishInfo, publish_info
from protocol.codes import ResponseCode
from protocol.route_model import TopicRouteData

log = logging.getLogger("client_push.producer.routing")

MAX_BORROWED_TOPICS = 1_024
"""Topics sent to through the default topic's route at once; the oldest makes room."""

REFUSAL_CODES = frozenset({int(ResponseCode.TOPIC_NOT_EXIST), int(ResponseCode.NO_PERMISSION)})


@dataclass(frozen=True, slots=True)
class AutoCreateTopic:
    create_topic_key: str = "TBW102"
    """Upstream's ``createTopicKey``: the default topic whose route new topics borrow."""
    default_topic_queue_nums: int = 4
    """Upstream's ``defaultTopicQueueNums``: queues per broker of a topic created this way."""


class NoDefaultTopicError(TopicNotExistError):
    """The topic does not exist and the default topic has no route either: no broker allows
    auto-creation (or none is registered)."""

    def __init__(self, topic: str, config: AutoCreateTopic) -> None:
        self.topic = topic
        self.retry_at_ms = None
        self.retry_in_ms = None
        self.cached = False
        key = config.create_topic_key
        Exception.__init__(
            self,
            f"topic {topic!r} does not exist and cannot be created on sending: the default "
            f"topic {key} has no route (no broker runs with autoCreateTopicEnable=true)",
        )


def borrowed_route(default_route: TopicRouteData, config: AutoCreateTopic) -> TopicRouteData:
    """The default topic's route with each broker's queues cut to the configured count."""
    return replace(
        default_route,
        queue_datas=[
            replace(
                qd,
                read_queue_nums=min(config.default_topic_queue_nums, qd.read_queue_nums),
                write_queue_nums=min(config.default_topic_queue_nums, qd.read_queue_nums),
            )
            for qd in default_route.queue_datas
        ],
        order_topic_conf=None,
    )


def refusal(
    broker_name: str, topic: str, config: AutoCreateTopic, code: int, remark: str | None
) -> str | None:
    if code not in REFUSAL_CODES:
        return None
    key = config.create_topic_key
    return (
        f"broker {broker_name} did not create topic {topic} from {key} (code {code}: "
        f"{remark}); a broker creates topics on sending only with autoCreateTopicEnable=true "
        f"and {key} registered with a perm that includes inherit (7)"
    )


class BorrowedRoutes:
    def __init__(self, config: AutoCreateTopic, counters: Counter[str]) -> None:
        self.config = config
        self._counters = counters
        self._held: dict[str, tuple[CachedRoute, PublishInfo, TopicRouteData]] = {}
        """Topic -> (the default topic's route it was built from, the publish info and route
        its sends use); while the default topic's route is held."""

    def __contains__(self, topic: str) -> bool:
        return topic in self._held

    def __len__(self) -> int:
        return len(self._held)

    def own_route(self, topic: str) -> None:
        """The name server has a route for ``topic`` now: sends use it."""
        if self._held:
            self._held.pop(topic, None)

    def no_default(self, topic: str) -> NoDefaultTopicError:
        self._counters["auto_create_no_default_topic"] += 1
        return NoDefaultTopicError(topic, self.config)

    def borrow(self, topic: str, default: CachedRoute) -> tuple[PublishInfo, TopicRouteData]:
        """The publish info and route a send to ``topic`` (which has no route) uses, from the
        default topic's held route ``default``."""
        held = self._held.get(topic)
        if held is not None and held[0] is default:
            return held[1], held[2]
        route = borrowed_route(default.route, self.config)
        info = publish_info(topic, route)
        if len(self._held) >= MAX_BORROWED_TOPICS:
            self._held.pop(next(iter(self._held)))
        self._held[topic] = (default, info, route)
        self._counters["auto_create_routes"] += 1
        log.info(
            "topic %s has no route: sending through %s for the broker to create it",
            topic,
            self.config.create_topic_key,
        )
        return info, route

    def route(self, topic: str) -> TopicRouteData | None:
        held = self._held.get(topic)
        return None if held is None else held[2]
