"""What one send is, whatever event loop carries it: the request, what an answer or a failure
means, what is counted and reported to the fault strategy.

Pure: no Twisted, no asyncio; the caller passes latencies and the time measured on its clock. Both
producers (Twisted's ``client_push.producer.producer`` and asyncio's
``client_push.aio.producer``) run the same loop over ``SendAttempts`` and hand every outcome
here, so they count, isolate and fail alike. Events in and decisions out:

* ``encode(topic, body, ...)`` -> the ``EncodedMessage`` (``MessageError`` before sending);
* ``request(message, queue, oneway=...)`` -> the SEND_MESSAGE_V2 command of one attempt;
* ``unreachable(plan, queue, addr, detail, latency_ms, now_ms, connection=...)`` -> no
  connection or no answer in time: the broker is reported unreachable, the plan moves on;
* ``answered(plan, message, queue, response, latency_ms, now_ms)`` -> a ``SendResult`` when
  stored,
  else the ``Decision`` for the next attempt (``AVOID``: a GoAway answer, already reported;
  ``RETRY`` after ``delay_ms``); raises ``SendError`` / ``BrokerRefusedError`` when the send
  must end;
* ``unanswered(broker_name, waited_ms, now_ms)`` -> an attempt still unanswered at an isolating
  latency (``watch_after_ms``): the broker is isolated at once;
* ``exhausted(plan, message)`` -> the ``SendError`` of a send out of attempts or time;
* ``oneway_failed(queue, detail, latency_ms, now_ms)`` -> the ``SendError`` of a oneway send;
* ``go_away(addr, grace_ms)`` -> a broker's GoAway on a send connection, reported for the
  broker last sent to at ``addr`` (``addr_names``, kept by the send loop); ``tidy(held)``
  forgets the addresses no held route names.

Every report of how an attempt went is one call to the fault table (``FaultReports``), given
to the constructor with the routing it belongs to.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from client_push.errors import RouteClientError
from client_push.producer.auto_create import AutoCreateTopic
from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import SendOutcome
from client_push.producer.send_answer import Answer, SendStatus, classify, parse_stored
from client_push.producer.send_attempts import Decision, SendAttempts, Step
from client_push.routes.route_cache import MessageQueue
from protocol.codes import RequestCode
from protocol.errors import HeaderError
from protocol.frame import RemotingCommand
from protocol.message import EncodedMessage, MessageIdGenerator, encode_message, send_header


class SendError(RouteClientError):
    """No broker took the message; ``attempts`` says how many were tried."""

    def __init__(self, message: str, attempts: int = 0, code: int | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.code = code


class BrokerRefusedError(SendError):
    """A broker refused the message itself (MESSAGE_ILLEGAL, ...): no retry would help."""


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    msg_id: str
    """The unique key (``UNIQ_KEY``) consumers see as the message id."""
    offset_msg_id: str
    """The broker's store id (store host and commit-log offset)."""
    queue: MessageQueue
    queue_offset: int
    attempts: int
    transaction_id: str | None = None


class Routing(Protocol):
    """What the send core asks and tells a producer's routing (either loop's
    ``ProducerRouting``)."""

    @property
    def auto_create(self) -> AutoCreateTopic | None: ...

    def broker_going_away(self, broker_name: str, grace_ms: int) -> None: ...

    def via_default_topic(self, topic: str) -> bool: ...


class FaultReports(Protocol):
    """The routing's fault table (``fault_table.FaultTable``), as the send core reports to it."""

    def report(
        self, broker_name: str, latency_ms: int, outcome: SendOutcome, now_ms: int
    ) -> None: ...

    def waiting(self, broker_name: str, latency_ms: int, now_ms: int) -> None: ...

    def first_isolating_latency(self) -> int | None: ...


class SendCore:
    def __init__(
        self,
        config: ProducerConfig,
        group: str,
        rng: random.Random,
        routing: Routing,
        faults: FaultReports,
    ) -> None:
        if not group:
            raise ValueError("producer group must not be empty")
        self.config = config
        self.group = group
        self.routing = routing
        self.faults = faults
        self.counters: Counter[str] = Counter()
        self.first_attempts_by_broker: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self._ids = MessageIdGenerator(local_ip(), os.getpid(), rng.getrandbits(31))
        self.addr_names: dict[str, str] = {}
        """Broker address -> the broker name sends to it went to (whose GoAway it is)."""
        self.watch_after_ms = faults.first_isolating_latency() if config.fault.enabled else None
        """How long an attempt may wait unanswered before its broker is isolated as slow (the
        caller then calls ``unanswered``); None: never."""

    def encode(
        self,
        topic: str,
        body: bytes,
        keys: Iterable[str] = (),
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> EncodedMessage:
        cfg = self.config
        return encode_message(
            topic,
            body,
            keys=keys,
            tags=tags,
            properties=properties,
            uniq_key=self._ids.next_id(wall_ms()),
            compress_over=cfg.compress_over_bytes,
            compress_level=cfg.compress_level,
            max_body_size=cfg.max_message_size,
        )

    def request(
        self, message: EncodedMessage, queue: MessageQueue, *, oneway: bool = False
    ) -> RemotingCommand:
        header = send_header(
            message,
            producer_group=self.group,
            queue_id=queue.queue_id,
            broker_name=queue.broker_name,
            born_timestamp_ms=wall_ms(),
            default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
        )
        return RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, header.to_wire(), message.body, oneway=oneway
        )

    # -- one send's events ---------------------------------------------------------------------

    def unanswered(self, broker_name: str, waited_ms: int, now_ms: int) -> None:
        """An attempt to ``broker_name`` is still unanswered after ``waited_ms``: the broker is
        isolated as that slow at once."""
        self.faults.waiting(broker_name, waited_ms, now_ms)

    def no_route(self) -> None:
        """The selection raised (no route, no master in time): the send fails with it."""
        self.counters["failed"] += 1
        self.counters["failed_no_route"] += 1

    def waiting_for_route(self) -> None:
        self.counters["waits_for_route_after_unreachable"] += 1

    def unreachable(
        self,
        plan: SendAttempts,
        queue: MessageQueue,
        addr: str,
        detail: str,
        latency_ms: int,
        now_ms: int,
        *,
        connection: bool,
    ) -> None:
        """``connection``: no connection (refused, lost), rather than no answer in time."""
        self.faults.report(queue.broker_name, latency_ms, SendOutcome.UNREACHABLE, now_ms)
        self.counters["attempts_unreachable"] += 1
        plan.unreachable(queue.broker_name, addr, detail, connection=connection)

    def answered(
        self,
        plan: SendAttempts,
        message: EncodedMessage,
        queue: MessageQueue,
        response: RemotingCommand,
        latency_ms: int,
        now_ms: int,
    ) -> SendResult | Decision:
        answer = classify(response.code, response.remark)
        if answer is Answer.STORED:
            result = self._stored(message, queue, response, plan.attempts)
            self.faults.report(queue.broker_name, latency_ms, SendOutcome.OK, now_ms)
            return result
        routing = self.routing
        auto_create = routing.auto_create
        via_default = None
        if auto_create is not None and routing.via_default_topic(message.topic):
            via_default = (message.topic, auto_create)
        decision = plan.answered(
            queue.broker_name, answer, response.code, response.remark, via_default=via_default
        )
        if decision.step is Step.AVOID:
            self.counters["answers_go_away"] += 1
            if self.config.honour_go_away:
                routing.broker_going_away(queue.broker_name, self.config.go_away_answer_avoid_ms)
            return decision
        self.faults.report(queue.broker_name, latency_ms, SendOutcome.FAILED, now_ms)
        if answer is Answer.BUSY:
            self.counters["answers_busy"] += 1
        elif answer is Answer.RETRY:
            self.counters["answers_retryable"] += 1
        if decision.step is Step.STOP:
            self.counters["failed"] += 1
            raise SendError(plan.failure(message.uniq_key, message.topic), plan.attempts)
        if decision.step is Step.REFUSE:
            self.counters["refused"] += 1
            raise BrokerRefusedError(plan.last_error, plan.attempts, response.code)
        return decision

    def exhausted(self, plan: SendAttempts, message: EncodedMessage) -> SendError:
        self.counters["failed"] += 1
        return SendError(
            plan.failure(message.uniq_key, message.topic), plan.attempts, plan.last_code
        )

    def _stored(
        self,
        message: EncodedMessage,
        queue: MessageQueue,
        response: RemotingCommand,
        attempts: int,
    ) -> SendResult:
        try:
            stored = parse_stored(response.code, response.ext_fields)
        except HeaderError as exc:
            # The broker stored it but its answer is unreadable: not worth a duplicate.
            self.counters["malformed_answers"] += 1
            raise SendError(
                f"broker {queue.broker_name} stored the message but answered a "
                f"malformed header: {exc.remark}",
                attempts,
                response.code,
            ) from None
        self.counters["sent_ok"] += 1
        self.statuses[stored.status.value] += 1
        return SendResult(
            stored.status,
            message.uniq_key,
            stored.offset_msg_id,
            MessageQueue(message.topic, queue.broker_name, stored.queue_id),
            stored.queue_offset,
            attempts,
            stored.transaction_id,
        )

    # -- oneway --------------------------------------------------------------------------------

    def oneway_began(self, broker_name: str) -> None:
        self.first_attempts_by_broker[broker_name] += 1

    @staticmethod
    def oneway_no_address(broker_name: str) -> SendError:
        return SendError(f"broker {broker_name} has no master address in the route", 1)

    def oneway_failed(
        self, queue: MessageQueue, detail: str, latency_ms: int, now_ms: int
    ) -> SendError:
        self.faults.report(queue.broker_name, latency_ms, SendOutcome.UNREACHABLE, now_ms)
        self.counters["oneway_failed"] += 1
        return SendError(f"oneway send to {queue.broker_name} failed: {detail}", 1)

    def oneway_sent(self) -> None:
        self.counters["oneway_sent"] += 1

    # -- a send connection's broker --------------------------------------------------------

    def go_away(self, addr: str, grace_ms: int) -> None:
        """A broker's GoAway (7004) on the send connection to ``addr``."""
        self.counters["go_away_received"] += 1
        name = self.addr_names.get(addr)
        if name is not None:
            self.routing.broker_going_away(name, grace_ms)

    def tidy(self, held_addrs: set[str]) -> None:
        """Forget the addresses no held route names (their connections are closed)."""
        for addr in [a for a in self.addr_names if a not in held_addrs]:
            del self.addr_names[addr]

    def stats(self, routing: dict[str, int], connections: Mapping[str, int]) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.counters)
        out["statuses"] = dict(self.statuses)
        out["first_attempts_by_broker"] = dict(self.first_attempts_by_broker)
        out["routing"] = routing
        out["connections"] = dict(connections)
        return out


def wall_ms() -> int:
    """Born timestamps and message ids carry wall-clock time, as upstream's."""
    return int(time.time() * 1000)


def local_ip() -> bytes:
    """This host's IPv4 address for message ids; upstream's fake one (from the time) when
    only loopback is found."""
    try:
        addr = socket.gethostbyname(socket.gethostname())
        if not addr.startswith("127."):
            return socket.inet_aton(addr)
    except OSError:
        pass
    return struct.pack(">Q", wall_ms())[4:]
