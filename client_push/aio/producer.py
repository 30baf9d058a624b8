"""The asyncio producer: sends messages over SEND_MESSAGE_V2 to the queue its routing picks.

::

    async with RouteClient(ClientConfig(...)) as client:
        async with Producer(client, "my-group", ProducerConfig()) as producer:
            result = await producer.send("TopicTest", b"hello", keys=["order-1"], tags="TagA")

The same producer as Twisted's ``client_push.producer.producer.Producer``, by construction: the
send loop is ``client_push.producer.send_flow``'s, what each attempt and answer means
``send_attempts`` and ``send_core``'s, where to send ``RoutingFlow`` / ``RoutingCore``'s (the
latency fault table, the active detector's tiers available > reachable > any, GoAway, a
departed broker, the wait for a new master during a failover, auto-creation through the
default topic). This module supplies asyncio's connections, timers and clock; it imports no
Twisted.

A cancelled ``send`` leaves nothing behind: its request's table entry and timeout, its
watchdog, its waits for a route or a probe answer and, when it was the only caller, the
connect it started, all go with it (``outstanding()`` shows these tables).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from types import TracebackType
from typing import Any, TypeVar

from client_push.aio.client import RouteClient
from client_push.aio.clock import Clock, LoopClock, Timer
from client_push.aio.producer_conns import BrokerConnections
from client_push.aio.producer_routing import ProducerRouting
from client_push.producer import send_flow
from client_push.producer.config import ProducerConfig
from client_push.producer.message import EncodedMessage
from client_push.producer.send_core import BrokerRefusedError, SendCore, SendError, SendResult

log = logging.getLogger("client_push.producer.producer")

T = TypeVar("T")

__all__ = ["BrokerRefusedError", "Producer", "SendError", "SendResult"]

TIDY_INTERVAL_S = 30.0
"""How often connections to brokers that left every held route are closed."""


class Producer:
    def __init__(
        self,
        client: RouteClient,
        group: str,
        config: ProducerConfig | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """``clock``: every timer of the producer (attempt timeouts, backoffs, waits, the
        detector); default the wall clock with the running loop's timers. Pass the route
        client's own clock when it has one."""
        self.config = config or ProducerConfig()
        self.group = group
        rng = rng or random.Random()
        self._given_clock = clock
        self.routing = ProducerRouting(
            client,
            self.config.fault,
            clock=clock,
            rng=rng,
            auto_create=self.config.auto_create(),
        )
        self.core = SendCore(self.config, group, rng, self.routing)
        self.counters = self.core.counters
        self.first_attempts_by_broker = self.core.first_attempts_by_broker
        self.statuses = self.core.statuses
        self._connections: BrokerConnections | None = None
        self._tidy: Timer | None = None
        self._sends = 0
        """Sends (and oneway sends) under way."""
        self._stopped = False

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def start(self) -> None:
        """On the running loop: the routing (broker events, the detector) and the timer that
        closes connections to brokers no held route names."""
        if self._connections is not None:
            return
        loop = asyncio.get_running_loop()
        self._clock = clock = self._given_clock or LoopClock(loop)
        self.routing.start()
        self._connections = BrokerConnections(
            loop,
            clock,
            self._broker_go_away,
            max_frame_size=self.config.max_frame_size,
            honour_go_away=self.config.honour_go_away,
        )
        self._tidy = Timer(clock, self._tidy_round)
        self._tidy.arm(TIDY_INTERVAL_S)

    async def close(self) -> None:
        """Stop the detector, fail the sends in flight (``ConnectionLostError`` inside, a
        ``SendError`` out) and close the broker connections."""
        self._stopped = True
        if self._tidy is not None:
            self._tidy.cancel()
        self.routing.stop()
        if self._connections is not None:
            await self._connections.stop()

    @property
    def connections(self) -> BrokerConnections:
        if self._connections is None:
            raise SendError("producer not started: use `async with Producer(...)`")
        return self._connections

    # -- sending -------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        body: bytes,
        *,
        keys: Iterable[str] = (),
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """The ``SendResult`` once a broker stored the message. Raises ``MessageError``
        (refused before sending), ``BrokerRefusedError``, ``SendError`` (no broker took it),
        or what the route lookup raises (``TopicNotExistError``, ``NoMasterError``, ...)."""
        message = self._encode(topic, body, keys, tags, properties)
        timeout = self.config.send_timeout_ms if timeout_ms is None else timeout_ms
        return await self._tracked(send_flow.send(self.core, self.routing, self, message, timeout))

    async def send_oneway(
        self,
        topic: str,
        body: bytes,
        *,
        keys: Iterable[str] = (),
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """Returns once the message is written to a broker's connection; no answer, no retry
        (as upstream's ``sendOneway``)."""
        message = self._encode(topic, body, keys, tags, properties)
        timeout = self.config.send_timeout_ms if timeout_ms is None else timeout_ms
        await self._tracked(send_flow.send_oneway(self.core, self.routing, self, message, timeout))

    def stats(self) -> dict[str, Any]:
        conns = self._connections
        return self.core.stats(self.routing.stats(), {} if conns is None else conns.counters)

    def outstanding(self) -> dict[str, int]:
        """What the producer has in flight or armed, table by table (for tests and
        debugging): a cancelled send leaves none of it behind."""
        out = {"sends": self._sends}
        if self._connections is not None:
            out.update(self._connections.outstanding())
        out.update(self.routing.outstanding())
        return out

    async def _tracked(self, send: Awaitable[T]) -> T:
        self._sends += 1
        try:
            return await send
        finally:
            self._sends -= 1

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
        if self._connections is None:
            raise SendError("producer not started: use `async with Producer(...)`")
        return self.core.encode(topic, body, keys, tags, properties)

    # -- send_flow.SenderGlue ------------------------------------------------------------------

    def now_ms(self) -> int:
        return int(self._clock.time() * 1000)

    def call_later(self, delay_ms: int, call: Callable[[], None]) -> Callable[[], None]:
        return self._clock.call_later(delay_ms / 1000.0, call).cancel

    async def sleep(self, delay_ms: int) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer = self._clock.call_later(delay_ms / 1000.0, partial(_settle, done))
        try:
            await done
        finally:
            timer.cancel()

    # -- connections ---------------------------------------------------------------------------

    def _tidy_round(self) -> None:
        """Close the connections of brokers no held route names any more."""
        try:
            held = {addr for addr, _topic in self.routing.held_broker_addrs().values()}
            self.connections.retain(held)
            self.core.tidy(held)
        except Exception:  # the timer must survive anything one round meets
            self.counters["tidy_errors"] += 1
            log.exception("closing unused broker connections failed")
        if self._tidy is not None and not self._stopped:
            self._tidy.arm(TIDY_INTERVAL_S)

    def _broker_go_away(self, addr: str, grace_ms: int) -> None:
        self.core.go_away(addr, grace_ms)


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)
