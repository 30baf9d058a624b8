"""Producer settings: upstream's defaults where upstream has them, every one checked once.

``from_mapping`` reads the ``[producer]`` table of a TOML file (keys as the field names, plus
``strategy`` = off / 4x / 5x, ``detector`` = true / false and ``first_probe_wait_ms`` for the
fault strategy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from client_push.producer.auto_create import AutoCreateTopic
from client_push.producer.fault_table import FaultConfigError, FaultStrategyConfig
from client_push.wire.remoting import ConnectionBounds
from protocol.message import DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS, MessageError, check_topic

MIB = 1024 * 1024


class ProducerConfigError(ValueError):
    """A producer setting is not acceptable; the message names the setting and the value."""


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    send_timeout_ms: int = 3_000
    """The whole send, retries included (upstream's ``sendMsgTimeout``)."""
    attempt_timeout_ms: int = 0
    """One attempt's share; 0: the send timeout split evenly over the attempts, so a broker
    that never answers leaves time to try the others."""
    retries: int = 2
    """Upstream's ``retryTimesWhenSendFailed``: attempts after the first, each on another
    broker where one exists."""
    retry_on_busy: bool = True
    """Retry SYSTEM_BUSY / flow-control answers on another broker (upstream gives up)."""
    busy_backoff_ms: int = 20
    """Wait before retrying a busy answer; doubles per busy answer of one send ..."""
    busy_backoff_max_ms: int = 500
    """... up to this."""
    compress_over_bytes: int = 4_096
    """Bodies of at least this size are zlib-compressed (``compressMsgBodyOverHowmuch``)."""
    compress_level: int = 5
    max_message_size: int = 4 * MIB
    """Bodies above this are refused before sending (upstream's ``maxMessageSize``)."""
    honour_go_away: bool = True
    """Act on a broker's GoAway (7004) and 1500 answers; off, they are only counted."""
    go_away_answer_avoid_ms: int = 10_000
    """A 1500 answer announces no grace period: avoid the broker this long."""
    max_frame_size: int = 16 * MIB
    max_requests_in_flight: int = 10_000
    """Sends on one broker connection not answered yet; one more fails that attempt at once
    (``RequestsInFlightError``, retried elsewhere like a connection error)."""
    max_request_bytes_in_flight: int = 256 * MIB
    """Their encoded bytes, those held back from a broker that does not read included."""
    write_buffer_bytes: int = 1 * MIB
    """A connection's transport buffer above this means the broker is not reading: nothing
    more is written to it until it drains."""
    close_timeout_ms: int = 3_000
    """``stop``/``close`` returns within this; connections not closed by then are aborted."""
    unreachable_route_wait_ms: int = 1_000
    """After a connection error, a retry that would go to the same broker address again (no
    other group can take the send) first waits for the topic's next route at most this long:
    a failover announces the dead master's departure and then the new master there."""
    auto_create_topic: bool = False
    """Send to a topic the name server does not know through the default topic's route, for
    brokers with ``autoCreateTopicEnable`` to create it (upstream's producer always does)."""
    create_topic_key: str = DEFAULT_TOPIC
    """Upstream's ``createTopicKey``: the default topic (sent in every send's header)."""
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    """Upstream's ``defaultTopicQueueNums``: queues per broker of a topic created on sending."""
    fault: FaultStrategyConfig = field(default_factory=FaultStrategyConfig)

    def __post_init__(self) -> None:
        for name in (
            "send_timeout_ms",
            "busy_backoff_max_ms",
            "compress_over_bytes",
            "default_topic_queue_nums",
            "max_requests_in_flight",
            "max_request_bytes_in_flight",
            "write_buffer_bytes",
            "close_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise ProducerConfigError(f"{name} must be positive, got {getattr(self, name)}")
        for name in (
            "attempt_timeout_ms",
            "retries",
            "busy_backoff_ms",
            "go_away_answer_avoid_ms",
            "unreachable_route_wait_ms",
        ):
            if getattr(self, name) < 0:
                raise ProducerConfigError(f"{name} must not be negative, got {getattr(self, name)}")
        try:
            check_topic(self.create_topic_key)
        except MessageError as exc:
            raise ProducerConfigError(f"create_topic_key: {exc}") from None
        if not 0 <= self.compress_level <= 9:
            raise ProducerConfigError(f"compress_level must be 0..9, got {self.compress_level}")
        if not 0 < self.max_message_size <= self.max_frame_size:
            raise ProducerConfigError(
                f"max_message_size must be positive and at most max_frame_size, "
                f"got {self.max_message_size}"
            )

    def auto_create(self) -> AutoCreateTopic | None:
        if not self.auto_create_topic:
            return None
        return AutoCreateTopic(self.create_topic_key, self.default_topic_queue_nums)

    def bounds(self) -> ConnectionBounds:
        return ConnectionBounds(
            max_frame_size=self.max_frame_size,
            max_requests=self.max_requests_in_flight,
            max_request_bytes=self.max_request_bytes_in_flight,
            write_buffer_bytes=self.write_buffer_bytes,
        )

    def attempt_timeout(self) -> int:
        if self.attempt_timeout_ms:
            return self.attempt_timeout_ms
        return max(1, self.send_timeout_ms // (self.retries + 1))


def from_mapping(raw: Mapping[str, Any]) -> ProducerConfig:
    """A ``[producer]`` table; unknown keys and wrong types are refused by name."""
    values = dict(raw)
    strategy = values.pop("strategy", "4x")
    detector = values.pop("detector", True)
    first_probe_wait = values.pop("first_probe_wait_ms", None)
    if not isinstance(strategy, str) or not isinstance(detector, bool):
        raise ProducerConfigError("strategy must be a string and detector true or false")
    if first_probe_wait is not None and type(first_probe_wait) is not int:
        raise ProducerConfigError(f"first_probe_wait_ms must be int, got {first_probe_wait!r}")
    known = {f.name: f for f in dataclasses.fields(ProducerConfig) if f.name != "fault"}
    for key, value in values.items():
        spec = known.get(key)
        if spec is None:
            raise ProducerConfigError(f"unknown producer setting {key!r}")
        wanted = {"bool": bool, "str": str}.get(str(spec.type), int)
        if type(value) is not wanted:
            raise ProducerConfigError(f"{key} must be {wanted.__name__}, got {value!r}")
    try:
        fault = FaultStrategyConfig.preset(strategy, detector=detector)
        if first_probe_wait is not None:
            fault = dataclasses.replace(fault, first_probe_wait_ms=first_probe_wait)
    except FaultConfigError as exc:
        raise ProducerConfigError(str(exc)) from None
    return ProducerConfig(fault=fault, **values)
