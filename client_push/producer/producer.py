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
import random
from collections.abc import Iterable, Mapping
from typing import Any

from twisted.internet import defer, task

from client_push.errors import ConnectionLostError, RequestTimeoutError
from client_push.producer.broker_conns import BrokerConnections
from client_push.producer.config import ProducerConfig
from client_push.producer.message import EncodedMessage
from client_push.producer.routing import ProducerRouting
from client_push.producer.send_attempts import SendAttempts, Step
from client_push.producer.send_core import BrokerRefusedError, SendCore, SendError, SendResult
from client_push.routes.client import RouteClient
from client_push.routes.route_cache import MessageQueue
from client_push.wire.remoting import describe

log = logging.getLogger(__name__)

TIDY_INTERVAL_S = 30.0
"""How often connections to brokers that left every held route are closed."""

__all__ = ["BrokerRefusedError", "Producer", "SendError", "SendResult"]


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
        self.core = SendCore(self.config, group, rng, self.routing)
        self.counters = self.core.counters
        self.first_attempts_by_broker = self.core.first_attempts_by_broker
        self.statuses = self.core.statuses
        self._addr_names: dict[str, str] = {}
        self._started = False
        self._stopped = False
        self._tidy_loop: task.LoopingCall | None = None

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
        return self.core.encode(topic, body, keys, tags, properties)

    async def _send(self, message: EncodedMessage, timeout_ms: int) -> SendResult:
        core = self.core
        core.sending()
        plan = SendAttempts(self.config, timeout_ms, self._now_ms())
        while plan.next_attempt(self._now_ms()):
            try:
                queue = await self.routing.select_queue(
                    message.topic, plan.last_broker, wait_ms=plan.time_left(self._now_ms())
                )
            except Exception:
                core.no_route()
                raise
            addr = self.routing.broker_addr(message.topic, queue.broker_name)
            if addr is not None:
                route_wait = plan.route_wait(addr, self._now_ms())
                if route_wait:
                    core.waiting_for_route()
                    await self.routing.wait_for_route(message.topic, route_wait)
                    continue
            core.began(plan, queue.broker_name)
            if addr is None:
                plan.no_address(queue.broker_name)
                continue
            result = await self._attempt(message, queue, addr, plan)
            if result is not None:
                return result
        raise core.exhausted(plan, message)

    async def _attempt(
        self, message: EncodedMessage, queue: MessageQueue, addr: str, plan: SendAttempts
    ) -> SendResult | None:
        """One attempt: the result once stored, None when the next attempt should follow."""
        self._addr_names[addr] = queue.broker_name
        request = self.core.request(message, queue)
        started = self._now_ms()
        watchdog = self._watch_attempt(queue.broker_name)
        try:
            response = await self.connections.request(addr, request, plan.attempt_timeout(started))
        except (ConnectionLostError, RequestTimeoutError) as exc:
            connection = isinstance(exc, ConnectionLostError)
            latency = self._now_ms() - started
            self.core.unreachable(plan, queue, addr, describe(exc), latency, connection=connection)
            log.debug("send attempt failed: %s", plan.last_error)
            return None
        finally:
            if watchdog is not None and watchdog.active():
                watchdog.cancel()
        outcome = self.core.answered(plan, message, queue, response, self._now_ms() - started)
        if isinstance(outcome, SendResult):
            return outcome
        if outcome.step is Step.RETRY and outcome.delay_ms:
            await task.deferLater(self._clock, outcome.delay_ms / 1000.0, lambda: None)
        return None

    async def _send_oneway(self, message: EncodedMessage, timeout_ms: int) -> None:
        queue = await self.routing.select_queue(message.topic, wait_ms=timeout_ms)
        self.core.oneway_began(queue.broker_name)
        addr = self.routing.broker_addr(message.topic, queue.broker_name)
        if addr is None:
            raise self.core.oneway_no_address(queue.broker_name)
        self._addr_names[addr] = queue.broker_name
        request = self.core.request(message, queue, oneway=True)
        started = self._now_ms()
        try:
            await self.connections.oneway(addr, request, timeout_ms)
        except (ConnectionLostError, RequestTimeoutError) as exc:
            raise self.core.oneway_failed(queue, describe(exc), self._now_ms() - started) from None
        self.core.oneway_sent()

    def _watch_attempt(self, broker_name: str) -> Any:
        """Isolate the broker as soon as an attempt has waited long enough to earn it, so
        the sends that follow avoid it before this one is answered or times out."""
        waited = self.core.watch_after_ms()
        if waited is None:
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
        self.core.go_away(self._addr_names.get(addr), grace_ms)

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)
