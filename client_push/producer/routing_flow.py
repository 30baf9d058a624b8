"""A producer's routing, written once for every event loop: looking routes up (borrowing the
default topic's for auto-creation), the selection loop with its waits, and what sends and
brokers report.

Pure: it awaits only what the route client and its glue hand it, so Twisted's
``client_push.producer.routing.ProducerRouting`` and asyncio's
``client_push.aio.producer_routing.ProducerRouting`` run this very code. Every decision is
``RoutingCore``'s; the loop's part (``RoutingGlue``: its clock, first probes and waits) and the
route client (``RouteSource``) are given to the constructor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from client_push.errors import TopicNotExistError
from client_push.producer.auto_create import AutoCreateTopic, BorrowedRoutes
from client_push.producer.fault_table import FaultStrategyConfig, FaultTable, SendOutcome
from client_push.producer.queue_select import QueueSelector
from client_push.producer.routing_core import (
    AwaitRoute,
    FirstAnswerWait,
    Probe,
    RoutingCore,
    held_brokers,
    master_addr,
)
from client_push.routes.events import BrokerListener, RouteListener
from client_push.routes.route_cache import CachedRoute, MessageQueue, PublishInfo
from protocol.route_model import TopicRouteData


class RouteSource(Protocol):
    """What the routing needs of a route client (either loop's)."""

    def get_route(self, topic: str) -> Awaitable[CachedRoute]: ...

    def cached_route(self, topic: str) -> CachedRoute | None: ...

    def held_topics(self) -> list[str]: ...

    def add_listener(self, topic: str, callback: RouteListener) -> Callable[[], None]: ...

    def add_broker_listener(self, callback: BrokerListener) -> Callable[[], None]: ...


class RoutingGlue(Protocol):
    """What the routing's event loop supplies."""

    def now_ms(self) -> int: ...

    def probe_first(self, probe: Probe) -> None:
        """Probe a broker a first time now; its answer goes to ``RoutingCore.first_probed``."""
        ...

    def wait_for_first_answer(self, wait: FirstAnswerWait) -> Awaitable[None]:
        """Until ``wait`` ends (an answer, its probes all failed) or ``first_probe_wait_ms``."""
        ...

    def wait_for_route(self, topic: str, timeout_ms: int) -> Awaitable[bool]:
        """True with the topic's next route state, False at the timeout."""
        ...


class RoutingFlow:
    def __init__(
        self,
        client: RouteSource,
        core: RoutingCore,
        glue: RoutingGlue,
        *,
        auto_create: AutoCreateTopic | None = None,
    ) -> None:
        """``auto_create``: send to topics without a route through the default topic's route
        (``auto_create`` module); None: such sends fail with ``TopicNotExistError``."""
        self._client = client
        self._glue = glue
        self.core = core
        self.counters = core.counters
        self.config: FaultStrategyConfig = core.config
        self.table: FaultTable = core.table
        self.selector: QueueSelector = core.selector
        self.auto_create = auto_create
        self._borrowed = None if auto_create is None else BorrowedRoutes(auto_create, self.counters)

    # -- selection -----------------------------------------------------------------------------

    async def select_queue(
        self, topic: str, last_broker_name: str | None = None, *, wait_ms: int = 0
    ) -> MessageQueue:
        """A queue to send to; ``last_broker_name``: the broker whose send just failed.

        When the held route has no queue a send may go to (a group without master, a group
        turned read-only, a departure applied before the new master is announced), waits up
        to ``wait_ms`` for a route of the topic that has one, taking each route as it is
        announced; ``route_waits.<reason>`` counts such waits, ``route_wait_ms.<reason>`` their
        time, ``route_wait_timeouts.<reason>`` those that ran out. Raises what the route
        client's ``get_route`` raises (TopicNotExistError at once for a topic known absent,
        ...), ``NoMasterError`` when no master came in time, and ``NoWritableQueueError`` when
        no writable queue did.
        """
        core, glue = self.core, self._glue
        started = now = glue.now_ms()
        waiting: AwaitRoute | None = None
        while True:
            try:
                entry = await self._client.get_route(topic)
            except TopicNotExistError:
                borrowed = self._borrowed
                if borrowed is None:
                    raise
                info, route = await self._borrowed_route(topic, borrowed)
            else:
                info, route = entry.publish_info, entry.route
                if self._borrowed:  # None, or no topic borrows: nothing to drop
                    self._borrowed.own_route(topic)
            if core.detecting or core.departed:  # else route_used has nothing to do
                for probe in core.route_used(topic, info, route, now):
                    glue.probe_first(probe)
            if core.first_probing:  # else no selection waits for a first answer
                wait = core.first_answer_wait(info, last_broker_name)
                if wait is not None:
                    await glue.wait_for_first_answer(wait)
                    now = glue.now_ms()
            choice = core.select(info, route, last_broker_name, now)
            if type(choice) is MessageQueue:
                if waiting is not None:
                    self._waited(waiting, now - started)
                return choice
            assert isinstance(choice, AwaitRoute)
            if waiting is None:
                self.counters[f"route_waits.{choice.reason}"] += 1
            waiting = choice
            now = glue.now_ms()
            waited = now - started
            if waited >= wait_ms:
                self._waited(choice, waited)
                self.counters[f"route_wait_timeouts.{choice.reason}"] += 1
                if choice.groups:
                    self.counters["no_master_in_time"] += 1
                raise choice.error(wait_ms)
            await glue.wait_for_route(topic, wait_ms - waited)
            now = glue.now_ms()

    def _waited(self, wait: AwaitRoute, waited_ms: int) -> None:
        self.counters[f"route_wait_ms.{wait.reason}"] += max(0, waited_ms)

    async def _borrowed_route(
        self, topic: str, borrowed: BorrowedRoutes
    ) -> tuple[PublishInfo, TopicRouteData]:
        """The publish info and route of a topic the name server has no route for, borrowed
        from the default topic's (``auto_create`` module)."""
        try:
            default = await self._client.get_route(borrowed.config.create_topic_key)
        except TopicNotExistError:
            raise borrowed.no_default(topic) from None
        return borrowed.borrow(topic, default)

    def via_default_topic(self, topic: str) -> bool:
        """Whether sends to ``topic`` go through the default topic's route now."""
        return self._borrowed is not None and topic in self._borrowed

    def broker_addr(self, topic: str, broker_name: str) -> str | None:
        """The master address of ``broker_name`` in the held route of ``topic``."""
        entry = self._client.cached_route(topic)
        if entry is not None:
            return master_addr(entry.route, broker_name)
        if self._borrowed is None:
            return None
        return master_addr(self._borrowed.route(topic), broker_name)

    def wait_for_route(self, topic: str, timeout_ms: int) -> Awaitable[bool]:
        """True with the next route state the client learns for ``topic`` (a push, a poll, a
        departure dropped locally), False after ``timeout_ms`` or once the routing stops."""
        return self._glue.wait_for_route(topic, timeout_ms)

    # -- what happened to sends and brokers ----------------------------------------------------

    def report_send(
        self, broker_name: str, latency_ms: int, outcome: SendOutcome = SendOutcome.OK
    ) -> None:
        """How a send to ``broker_name`` went; slow or failed sends isolate the broker."""
        self.table.report(broker_name, latency_ms, outcome, self._glue.now_ms())

    def report_waiting(self, broker_name: str, waited_ms: int) -> None:
        """A send to ``broker_name`` is still unanswered after ``waited_ms``."""
        self.table.waiting(broker_name, waited_ms, self._glue.now_ms())

    def broker_going_away(self, broker_name: str, grace_ms: int) -> None:
        """A broker announced a graceful shutdown (to the application's send connection, say):
        new sends avoid it for the grace period and until it answers a probe again."""
        self.core.broker_going_away(broker_name, grace_ms, self._glue.now_ms())

    def broker_gone(self, broker_name: str) -> None:
        """The name server announced the broker left (unregistered, expired, its channel
        closed): new sends avoid it until a route shows it back, at most
        ``departed_avoid_ms``. The hook for the route client's broker-departure events."""
        self.core.broker_gone(broker_name, self._glue.now_ms())

    def held_broker_addrs(self) -> dict[str, tuple[str, str]]:
        """Broker name -> (master address, one topic it serves), over every held route."""
        return held_broker_addrs(self._client)


def held_broker_addrs(client: RouteSource) -> dict[str, tuple[str, str]]:
    """Broker name -> (master address, one topic it serves), over every route ``client``
    holds."""
    routes = []
    for topic in client.held_topics():
        entry = client.cached_route(topic)
        if entry is not None:
            routes.append((topic, entry.route))
    return held_brokers(routes)
