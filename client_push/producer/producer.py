"""The producer: sends messages over SEND_MESSAGE_V2 to the queue ``ProducerRouting`` picks.

Twisted glue: the send loop is ``send_flow``'s and what each step means ``send_attempts`` and
``send_core``'s (asyncio's producer runs the same), where to send ``ProducerRouting``'s; this
module supplies the reactor's connections, timers and clock::

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
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from twisted.internet import defer, task

from client_push.producer import send_flow
from client_push.producer.broker_conns import BrokerConnections
from client_push.producer.config import ProducerConfig
from client_push.producer.message import EncodedMessage
from client_push.producer.routing import ProducerRouting
from client_push.producer.send_core import BrokerRefusedError, SendCore, SendError, SendResult
from client_push.routes.client import RouteClient

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
        return defer.ensureDeferred(send_flow.send(self.core, self.routing, self, message, timeout))

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
        return defer.ensureDeferred(
            send_flow.send_oneway(self.core, self.routing, self, message, timeout)
        )

    def stats(self) -> dict[str, Any]:
        return self.core.stats(self.routing.stats(), self.connections.counters)

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

    # -- send_flow.SenderGlue ----------------------------------------------------------------------

    def now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)

    def call_later(self, delay_ms: int, call: Callable[[], None]) -> Callable[[], None]:
        timer = self._clock.callLater(delay_ms / 1000.0, call)

        def cancel() -> None:
            if timer.active():
                timer.cancel()

        return cancel

    def sleep(self, delay_ms: int) -> defer.Deferred[None]:
        return task.deferLater(self._clock, delay_ms / 1000.0, lambda: None)

    def _tidy(self) -> None:
        """Close the connections of brokers no held route names any more."""
        try:
            held = {addr for addr, _topic in self.routing.held_broker_addrs().values()}
        except Exception:  # the loop must survive anything one round meets
            self.counters["tidy_errors"] += 1
            log.exception("closing unused broker connections failed")
            return
        self.connections.retain(held)
        self.core.tidy(held)

    def _broker_go_away(self, addr: str, grace_ms: int) -> None:
        self.core.go_away(addr, grace_ms)
