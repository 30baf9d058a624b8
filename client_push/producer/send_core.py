"""A producer's sends, written once over the runtime: select, wait for a route, attempt,
decide, back off, retry.

A send tries up to ``1 + retries`` times within its timeout, each attempt on another broker
where the route has one (``RoutingCore.select_queue``). The plan of one send (deadline, retry
budget, what an answer means next) is ``SendAttempts``'s and what an answer says is
``send_answer``'s, both sans-I/O; this class carries them out on the broker connections and
the runtime's clock, counts, and reports every attempt's latency and outcome to the fault
table. An attempt still unanswered at an isolating latency isolates its broker at once, before
it is answered or times out. A GoAway answer (1500) keeps new sends off the broker without
counting as a failure; a GoAway request (7004) on a send connection is taken as from the broker
last sent to at that address (``addr_names``).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Any

from client_push.errors import (
    ConnectionLostError,
    RequestsInFlightError,
    RequestTimeoutError,
    RouteClientError,
)
from client_push.producer.broker_conns import BrokerConnections
from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import SendOutcome
from client_push.producer.routing_core import RoutingCore
from client_push.producer.send_answer import Answer, SendStatus, classify, parse_stored
from client_push.producer.send_attempts import Decision, SendAttempts, Step
from client_push.routes.route_cache import MessageQueue
from client_push.runtime.interface import Future, Runtime, settle
from protocol.codes import RequestCode
from protocol.errors import HeaderError
from protocol.frame import RemotingCommand
from protocol.message import EncodedMessage, send_header

UNREACHABLE = (ConnectionLostError, RequestTimeoutError, RequestsInFlightError)
"""What an attempt that reached no broker raises: the next attempt goes elsewhere."""


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


class SendCore:
    def __init__(
        self,
        config: ProducerConfig,
        group: str,
        runtime: Runtime,
        routing: RoutingCore,
        connections: BrokerConnections,
    ) -> None:
        if not group:
            raise ValueError("producer group must not be empty")
        self.config = config
        self.group = group
        self._runtime = runtime
        self.routing = routing
        self.connections = connections
        self.counters: Counter[str] = Counter()
        self.first_attempts_by_broker: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.addr_names: dict[str, str] = {}
        """Broker address -> the broker name sends to it went to (whose GoAway it is)."""
        self.watch_after_ms = (
            routing.table.first_isolating_latency() if config.fault.enabled else None
        )
        """How long an attempt may wait unanswered before its broker is isolated as slow;
        None: never."""

    def _now_ms(self) -> int:
        return int(self._runtime.clock.time() * 1000)

    # -- a send --------------------------------------------------------------------------------

    async def send(self, message: EncodedMessage, timeout_ms: int) -> SendResult:
        """Up to ``1 + retries`` attempts within ``timeout_ms``; the result, or the error of the
        last attempt (``SendError``, ``BrokerRefusedError``, or what the selection raised)."""
        routing = self.routing
        self.counters["sends"] += 1
        plan = SendAttempts(self.config, timeout_ms, self._now_ms())
        while plan.next_attempt(self._now_ms()):
            try:
                queue = await routing.select_queue(
                    message.topic, plan.last_broker, wait_ms=plan.time_left(self._now_ms())
                )
            except Exception:
                self.counters["failed"] += 1
                self.counters["failed_no_route"] += 1
                raise
            addr = routing.broker_addr(message.topic, queue.broker_name)
            if addr is not None:
                route_wait = plan.route_wait(addr, self._now_ms())
                if route_wait:
                    self.counters["waits_for_route_after_unreachable"] += 1
                    await routing.wait_for_route(message.topic, route_wait)
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
        self.addr_names[addr] = queue.broker_name  # a GoAway there is this broker's
        request = self.request(message, queue)
        started = self._now_ms()
        watchdog = None
        if self.watch_after_ms is not None:
            watchdog = self._runtime.clock.call_later(
                self.watch_after_ms / 1000.0,
                partial(self.unanswered, queue.broker_name, self.watch_after_ms),
            )
        try:
            response = await self.connections.request(addr, request, plan.attempt_timeout(started))
        except UNREACHABLE as exc:
            now = self._now_ms()
            connection = isinstance(exc, ConnectionLostError)
            self.unreachable(plan, queue, addr, _describe(exc), now - started, now, connection)
            return None
        finally:
            if watchdog is not None:
                watchdog.cancel()
        now = self._now_ms()
        outcome = self.answered(plan, message, queue, response, now - started, now)
        if isinstance(outcome, SendResult):
            return outcome
        if outcome.step is Step.RETRY and outcome.delay_ms:
            await self._sleep(outcome.delay_ms)
        return None

    async def _sleep(self, delay_ms: int) -> None:
        done: Future[None] = self._runtime.future()
        timer = self._runtime.clock.call_later(delay_ms / 1000.0, partial(settle, done, None))
        try:
            await done
        finally:
            timer.cancel()

    async def send_oneway(self, message: EncodedMessage, timeout_ms: int) -> None:
        """Written once to a broker's connection: no answer, no retry (upstream's
        ``sendOneway``)."""
        queue = await self.routing.select_queue(message.topic, wait_ms=timeout_ms)
        self.first_attempts_by_broker[queue.broker_name] += 1
        addr = self.routing.broker_addr(message.topic, queue.broker_name)
        if addr is None:
            raise SendError(f"broker {queue.broker_name} has no master address in the route", 1)
        self.addr_names[addr] = queue.broker_name
        request = self.request(message, queue, oneway=True)
        started = self._now_ms()
        try:
            await self.connections.oneway(addr, request, timeout_ms)
        except UNREACHABLE as exc:
            now = self._now_ms()
            self.routing.table.report(
                queue.broker_name, now - started, SendOutcome.UNREACHABLE, now
            )
            self.counters["oneway_failed"] += 1
            detail = _describe(exc)
            raise SendError(f"oneway send to {queue.broker_name} failed: {detail}", 1) from None
        self.counters["oneway_sent"] += 1

    # -- what each step means ------------------------------------------------------------------

    def request(
        self, message: EncodedMessage, queue: MessageQueue, *, oneway: bool = False
    ) -> RemotingCommand:
        """The SEND_MESSAGE_V2 command of one attempt."""
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

    def unanswered(self, broker_name: str, waited_ms: int) -> None:
        """An attempt to ``broker_name`` is still unanswered after ``waited_ms``: the broker is
        isolated as that slow at once."""
        self.routing.table.waiting(broker_name, waited_ms, self._now_ms())

    def unreachable(
        self,
        plan: SendAttempts,
        queue: MessageQueue,
        addr: str,
        detail: str,
        latency_ms: int,
        now_ms: int,
        connection: bool,
    ) -> None:
        """No connection (``connection``: refused, lost) or no answer in time: the broker is
        reported unreachable, the plan moves on."""
        self.routing.table.report(queue.broker_name, latency_ms, SendOutcome.UNREACHABLE, now_ms)
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
        """A ``SendResult`` when stored, else the ``Decision`` for the next attempt (``AVOID``:
        a GoAway answer, already reported; ``RETRY`` after ``delay_ms``); raises
        ``SendError`` / ``BrokerRefusedError`` when the send must end."""
        routing = self.routing
        answer = classify(response.code, response.remark)
        if answer is Answer.STORED:
            result = self._stored(message, queue, response, plan.attempts)
            routing.table.report(queue.broker_name, latency_ms, SendOutcome.OK, now_ms)
            return result
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
        routing.table.report(queue.broker_name, latency_ms, SendOutcome.FAILED, now_ms)
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

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.counters)
        out["statuses"] = dict(self.statuses)
        out["first_attempts_by_broker"] = dict(self.first_attempts_by_broker)
        out["routing"] = self.routing.stats()
        out["connections"] = dict(self.connections.counters)
        return out


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def wall_ms() -> int:
    """Born timestamps and message ids carry wall-clock time, as upstream's."""
    return int(time.time() * 1000)
