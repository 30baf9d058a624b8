"""One send's loop, written once for every event loop: select, wait for a route, attempt,
decide, back off, retry.

Pure: it awaits only what its two collaborators hand it (a Deferred under Twisted's
``ensureDeferred``, a Future or coroutine under asyncio), so Twisted's
``client_push.producer.producer.Producer`` and asyncio's ``client_push.aio.producer.Producer``
run this very code. What each step means is ``SendAttempts`` (the plan) and ``SendCore`` (the
request, the answers, the counts); the loop's glue supplies the I/O and the clock
(``SenderGlue``, its ``Connections``), the routing its selection (``Selection``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from client_push.errors import ConnectionLostError, RequestsInFlightError, RequestTimeoutError
from client_push.producer.send_attempts import SendAttempts, Step
from client_push.producer.send_core import SendCore, SendResult
from client_push.routes.route_cache import MessageQueue
from protocol.frame import RemotingCommand
from protocol.message import EncodedMessage

Cancel = Callable[[], None]


class Connections(Protocol):
    """The producer's broker connections (one per address)."""

    def request(
        self, addr: str, cmd: RemotingCommand, timeout_ms: int
    ) -> Awaitable[RemotingCommand]:
        """The broker's answer; raises ``ConnectionLostError`` or ``RequestTimeoutError``."""
        ...

    def oneway(self, addr: str, cmd: RemotingCommand, timeout_ms: int) -> Awaitable[None]: ...


class SenderGlue(Protocol):
    """What the loop's producer supplies."""

    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, call: Callable[[], None]) -> Cancel:
        """Call ``call`` after ``delay_ms`` on the producer's clock; returns a canceller."""
        ...

    def sleep(self, delay_ms: int) -> Awaitable[None]: ...

    @property
    def connections(self) -> Connections: ...


class Selection(Protocol):
    """What the loop's ``ProducerRouting`` supplies."""

    def select_queue(
        self, topic: str, last_broker_name: str | None = None, *, wait_ms: int = 0
    ) -> Awaitable[MessageQueue]: ...

    def broker_addr(self, topic: str, broker_name: str) -> str | None: ...

    def wait_for_route(self, topic: str, timeout_ms: int) -> Awaitable[bool]: ...


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def send(
    core: SendCore,
    routing: Selection,
    glue: SenderGlue,
    message: EncodedMessage,
    timeout_ms: int,
) -> SendResult:
    """Up to ``1 + retries`` attempts within ``timeout_ms``; the result, or the error of the
    last attempt (``SendError``, ``BrokerRefusedError``, or what the selection raised)."""
    core.counters["sends"] += 1
    plan = SendAttempts(core.config, timeout_ms, glue.now_ms())
    while plan.next_attempt(glue.now_ms()):
        try:
            queue = await routing.select_queue(
                message.topic, plan.last_broker, wait_ms=plan.time_left(glue.now_ms())
            )
        except Exception:
            core.no_route()
            raise
        addr = routing.broker_addr(message.topic, queue.broker_name)
        if addr is not None:
            route_wait = plan.route_wait(addr, glue.now_ms())
            if route_wait:
                core.waiting_for_route()
                await routing.wait_for_route(message.topic, route_wait)
                continue
        if plan.begin(queue.broker_name):
            core.first_attempts_by_broker[queue.broker_name] += 1
        else:
            core.counters["retries"] += 1
        if addr is None:
            plan.no_address(queue.broker_name)
            continue
        result = await _attempt(core, glue, message, queue, addr, plan)
        if result is not None:
            return result
    raise core.exhausted(plan, message)


async def _attempt(
    core: SendCore,
    glue: SenderGlue,
    message: EncodedMessage,
    queue: MessageQueue,
    addr: str,
    plan: SendAttempts,
) -> SendResult | None:
    """One attempt: the result once stored, None when the next attempt should follow."""
    core.addr_names[addr] = queue.broker_name  # a GoAway there is this broker's
    request = core.request(message, queue)
    started = glue.now_ms()
    # Isolate the broker as soon as the attempt has waited long enough to earn it, so the
    # sends that follow avoid it before this one is answered or times out.
    watch_after = core.watch_after_ms
    unwatch = None
    if watch_after is not None:

        def watchdog() -> None:
            core.unanswered(queue.broker_name, watch_after, glue.now_ms())

        unwatch = glue.call_later(watch_after, watchdog)
    try:
        response = await glue.connections.request(addr, request, plan.attempt_timeout(started))
    except (ConnectionLostError, RequestTimeoutError, RequestsInFlightError) as exc:
        connection = isinstance(exc, ConnectionLostError)
        now = glue.now_ms()
        core.unreachable(
            plan, queue, addr, describe(exc), now - started, now, connection=connection
        )
        return None
    finally:
        if unwatch is not None:
            unwatch()
    now = glue.now_ms()
    outcome = core.answered(plan, message, queue, response, now - started, now)
    if isinstance(outcome, SendResult):
        return outcome
    if outcome.step is Step.RETRY and outcome.delay_ms:
        await glue.sleep(outcome.delay_ms)
    return None


async def send_oneway(
    core: SendCore,
    routing: Selection,
    glue: SenderGlue,
    message: EncodedMessage,
    timeout_ms: int,
) -> None:
    """Written once to a broker's connection: no answer, no retry (upstream's
    ``sendOneway``)."""
    queue = await routing.select_queue(message.topic, wait_ms=timeout_ms)
    core.oneway_began(queue.broker_name)
    addr = routing.broker_addr(message.topic, queue.broker_name)
    if addr is None:
        raise core.oneway_no_address(queue.broker_name)
    core.addr_names[addr] = queue.broker_name
    request = core.request(message, queue, oneway=True)
    started = glue.now_ms()
    try:
        await glue.connections.oneway(addr, request, timeout_ms)
    except (ConnectionLostError, RequestTimeoutError, RequestsInFlightError) as exc:
        now = glue.now_ms()
        raise core.oneway_failed(queue, describe(exc), now - started, now) from None
    core.oneway_sent()
