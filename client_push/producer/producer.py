"""The producer: sends messages over SEND_MESSAGE_V2 to the queue ``ProducerRouting`` picks.

Twisted glue over the pure ``message`` (encoding, answers) and ``fault_table`` /
``queue_select`` (where to send) modules::

    producer = Producer(client, "my-group")
    producer.start()
    result = await producer.send("TopicTest", b"hello", keys=["order-1"], tags="TagA")

A send tries up to ``1 + retries`` times, each attempt on another broker where the route has
one, within ``send_timeout_ms``; every attempt's latency and outcome go to the fault strategy.
Busy answers are retried elsewhere after a backoff; a broker's GoAway (7004, or a 1500 answer)
keeps new sends off it for its grace period while the sends already on it finish.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import struct
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from twisted.internet import defer, task

from client_push.errors import ConnectionLostError, RequestTimeoutError, RouteClientError
from client_push.producer.broker_conns import BrokerConnections
from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import SendOutcome
from client_push.producer.message import (
    Answer,
    EncodedMessage,
    MessageIdGenerator,
    SendStatus,
    classify,
    encode_message,
    parse_stored,
    send_header,
)
from client_push.producer.routing import ProducerRouting
from client_push.producer.send_attempts import SendAttempts, Step
from client_push.routes.client import RouteClient
from client_push.routes.route_cache import MessageQueue
from client_push.wire.remoting import describe
from protocol.codes import RequestCode
from protocol.errors import HeaderError
from protocol.frame import RemotingCommand

log = logging.getLogger(__name__)

TIDY_INTERVAL_S = 30.0
"""How often connections to brokers that left every held route are closed."""


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


class Producer:
    def __init__(
        self,
        client: RouteClient,
        group: str,
        config: ProducerConfig | None = None,
        *,
        reactor: Any = None,
        clock: Any = None,
        rng: random.Random | None = None,
        routing: ProducerRouting | None = None,
    ) -> None:
        if not group:
            raise ValueError("producer group must not be empty")
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.config = config or ProducerConfig()
        self.group = group
        self._clock = clock if clock is not None else reactor
        rng = rng or random.Random()
        self.routing = routing or ProducerRouting(
            client,
            self.config.fault,
            reactor=reactor,
            clock=self._clock,
            rng=rng,
            auto_create=self.config.auto_create(),
        )
        self.connections = BrokerConnections(
            reactor,
            self._clock,
            self._broker_go_away,
            max_frame_size=self.config.max_frame_size,
            honour_go_away=self.config.honour_go_away,
        )
        self._ids = MessageIdGenerator(_local_ip(), os.getpid(), rng.getrandbits(31))
        self._addr_names: dict[str, str] = {}
        self._started = False
        self._stopped = False
        self._tidy_loop: task.LoopingCall | None = None
        self.counters: Counter[str] = Counter()
        self.first_attempts_by_broker: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()

    def start(self) -> None:
        if not self._started:
            self._started = True
            self.routing.start()
            self._tidy_loop = task.LoopingCall(self._tidy)
            self._tidy_loop.clock = self._clock
            self._tidy_loop.start(TIDY_INTERVAL_S, now=False)

    def stop(self) -> None:
        """Close the broker connections and stop the detector; sends in flight fail."""
        self._stopped = True
        if self._tidy_loop is not None and self._tidy_loop.running:
            self._tidy_loop.stop()
        self.routing.stop()
        self.connections.stop()

    # -- sending ---------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        body: bytes,
        *,
        keys: Iterable[str] = (),
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> defer.Deferred[SendResult]:
        """Fires with the ``SendResult`` once a broker stored the message; errbacks with
        ``MessageError`` (refused before sending), ``BrokerRefusedError``, ``SendError`` (no
        broker took it), or what the route lookup raises (``TopicNotExistError``, ...)."""
        try:
            message = self._encode(topic, body, keys, tags, properties)
        except Exception as exc:
            return defer.fail(exc)
        timeout = self.config.send_timeout_ms if timeout_ms is None else timeout_ms
        return defer.ensureDeferred(self._send(message, timeout))

    def send_oneway(
        self,
        topic: str,
        body: bytes,
        *,
        keys: Iterable[str] = (),
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> defer.Deferred[None]:
        """Fires once the message is written to a broker's connection; no answer, no retry
        (as upstream's ``sendOneway``)."""
        try:
            message = self._encode(topic, body, keys, tags, properties)
        except Exception as exc:
            return defer.fail(exc)
        timeout = self.config.send_timeout_ms if timeout_ms is None else timeout_ms
        return defer.ensureDeferred(self._send_oneway(message, timeout))

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.counters)
        out["statuses"] = dict(self.statuses)
        out["first_attempts_by_broker"] = dict(self.first_attempts_by_broker)
        out["routing"] = self.routing.stats()
        out["connections"] = dict(self.connections.counters)
        return out

    def _encode(
        self,
        topic: str,
        body: bytes,
        keys: Iterable[str],
        tags: str | None,
        properties: Mapping[str, str] | None,
    ) -> EncodedMessage:
        if self._stopped:
            raise SendError("producer stopped")
        cfg = self.config
        return encode_message(
            topic,
            body,
            keys=keys,
            tags=tags,
            properties=properties,
            uniq_key=self._ids.next_id(_wall_ms()),
            compress_over=cfg.compress_over_bytes,
            compress_level=cfg.compress_level,
            max_body_size=cfg.max_message_size,
        )

    async def _send(self, message: EncodedMessage, timeout_ms: int) -> SendResult:
        self.counters["sends"] += 1
        plan = SendAttempts(self.config, timeout_ms, self._now_ms())
        while plan.next_attempt(self._now_ms()):
            try:
                queue = await self.routing.select_queue(
                    message.topic, plan.last_broker, wait_ms=plan.time_left(self._now_ms())
                )
            except Exception:
                self.counters["failed"] += 1
                self.counters["failed_no_route"] += 1
                raise
            addr = self.routing.broker_addr(message.topic, queue.broker_name)
            if addr is not None:
                route_wait = plan.route_wait(addr, self._now_ms())
                if route_wait:
                    self.counters["waits_for_route_after_unreachable"] += 1
                    await self.routing.wait_for_route(message.topic, route_wait)
                    continue
            if plan.begin(queue.broker_name):
                self.first_attempts_by_broker[queue.broker_name] += 1
            else:
                self.counters["retries"] += 1
            if addr is None:
                plan.no_address(queue.broker_name)
                continue
            result = await self._attempt(message, queue, addr, plan)
            if result is not None:
                return result
        self.counters["failed"] += 1
        raise SendError(
            plan.failure(message.uniq_key, message.topic), plan.attempts, plan.last_code
        )

    async def _attempt(
        self, message: EncodedMessage, queue: MessageQueue, addr: str, plan: SendAttempts
    ) -> SendResult | None:
        """One attempt: the result once stored, None when the next attempt should follow."""
        self._addr_names[addr] = queue.broker_name
        request = self._request(message, queue)
        started = self._now_ms()
        watchdog = self._watch_attempt(queue.broker_name)
        try:
            response = await self.connections.request(addr, request, plan.attempt_timeout(started))
        except (ConnectionLostError, RequestTimeoutError) as exc:
            latency = self._now_ms() - started
            self.routing.report_send(queue.broker_name, latency, SendOutcome.UNREACHABLE)
            self.counters["attempts_unreachable"] += 1
            connection = isinstance(exc, ConnectionLostError)
            plan.unreachable(queue.broker_name, addr, describe(exc), connection=connection)
            log.debug("send attempt failed: %s", plan.last_error)
            return None
        finally:
            if watchdog is not None and watchdog.active():
                watchdog.cancel()
        latency = self._now_ms() - started
        answer = classify(response.code, response.remark)
        if answer is Answer.STORED:
            return self._stored(message, queue, response, latency, plan.attempts)
        auto_create = self.routing.auto_create
        via_default = None
        if auto_create is not None and self.routing.via_default_topic(message.topic):
            via_default = (message.topic, auto_create)
        decision = plan.answered(
            queue.broker_name, answer, response.code, response.remark, via_default=via_default
        )
        if decision.step is Step.AVOID:
            self.counters["answers_go_away"] += 1
            if self.config.honour_go_away:
                self.routing.broker_going_away(
                    queue.broker_name, self.config.go_away_answer_avoid_ms
                )
            return None
        self.routing.report_send(queue.broker_name, latency, SendOutcome.FAILED)
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
        if decision.delay_ms:
            await task.deferLater(self._clock, decision.delay_ms / 1000.0, lambda: None)
        return None

    def _stored(
        self,
        message: EncodedMessage,
        queue: MessageQueue,
        response: RemotingCommand,
        latency: int,
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
        self.routing.report_send(queue.broker_name, latency, SendOutcome.OK)
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

    async def _send_oneway(self, message: EncodedMessage, timeout_ms: int) -> None:
        queue = await self.routing.select_queue(message.topic, wait_ms=timeout_ms)
        self.first_attempts_by_broker[queue.broker_name] += 1
        addr = self.routing.broker_addr(message.topic, queue.broker_name)
        if addr is None:
            raise SendError(f"broker {queue.broker_name} has no master address in the route", 1)
        self._addr_names[addr] = queue.broker_name
        request = self._request(message, queue, oneway=True)
        started = self._now_ms()
        try:
            await self.connections.oneway(addr, request, timeout_ms)
        except (ConnectionLostError, RequestTimeoutError) as exc:
            latency = self._now_ms() - started
            self.routing.report_send(queue.broker_name, latency, SendOutcome.UNREACHABLE)
            self.counters["oneway_failed"] += 1
            raise SendError(
                f"oneway send to {queue.broker_name} failed: {describe(exc)}", 1
            ) from None
        self.counters["oneway_sent"] += 1

    def _request(
        self, message: EncodedMessage, queue: MessageQueue, *, oneway: bool = False
    ) -> RemotingCommand:
        header = send_header(
            message,
            producer_group=self.group,
            queue_id=queue.queue_id,
            broker_name=queue.broker_name,
            born_timestamp_ms=_wall_ms(),
            default_topic=self.config.create_topic_key,
            default_topic_queue_nums=self.config.default_topic_queue_nums,
        )
        return RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, header.to_wire(), message.body, oneway=oneway
        )

    def _watch_attempt(self, broker_name: str) -> Any:
        """Isolate the broker as soon as an attempt has waited long enough to earn it, so
        the sends that follow avoid it before this one is answered or times out."""
        waited = self.routing.table.first_isolating_latency()
        if waited is None or not self.config.fault.enabled:
            return None
        return self._clock.callLater(
            waited / 1000.0, self.routing.report_waiting, broker_name, waited
        )

    def _tidy(self) -> None:
        """Close the connections of brokers no held route names any more."""
        try:
            held = {addr for addr, _topic in self.routing.held_broker_addrs().values()}
        except Exception:  # the loop must survive anything one round meets
            self.counters["tidy_errors"] += 1
            log.exception("closing unused broker connections failed")
            return
        self.connections.retain(held)
        for addr in [a for a in self._addr_names if a not in held]:
            del self._addr_names[addr]

    def _broker_go_away(self, addr: str, grace_ms: int) -> None:
        name = self._addr_names.get(addr)
        self.counters["go_away_received"] += 1
        if name is not None:
            self.routing.broker_going_away(name, grace_ms)

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)


def _wall_ms() -> int:
    """Born timestamps and message ids carry wall-clock time, as upstream's."""
    return int(time.time() * 1000)


def _local_ip() -> bytes:
    """This host's IPv4 address for message ids; upstream's fake one (from the time) when
    only loopback is found."""
    try:
        addr = socket.gethostbyname(socket.gethostname())
        if not addr.startswith("127."):
            return socket.inet_aton(addr)
    except OSError:
        pass
    return struct.pack(">Q", _wall_ms())[4:]
