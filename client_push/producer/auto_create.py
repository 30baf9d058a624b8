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
  to create the topic, or None when the answer is not such a refusal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from client_push.errors import TopicNotExistError
from protocol.codes import ResponseCode
from protocol.route_model import TopicRouteData

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
