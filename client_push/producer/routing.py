"""Queue selection for a producer: the route client's publish info, the fault strategy, the
active broker detector, broker GoAway and departures, behind one object.

``client_push.producer.producer.Producer`` uses it for every attempt; an application with its
own sending can use it alone: ask ``select_queue`` where to send and tell ``report_send``
how it went::

    routing = ProducerRouting(client)
    routing.start()
    queue = await routing.select_queue("TopicTest")
    ...send to queue.broker_name / queue.queue_id, timing it...
    routing.report_send(queue.broker_name, elapsed_ms, SendOutcome.OK)
    # on failure, retry elsewhere:
    queue = await routing.select_queue("TopicTest", last_broker_name=queue.broker_name)

With the detector on, a route's brokers are probed as soon as a selection first uses the route,
and a selection for a route none of whose brokers has answered yet waits (at most
``first_probe_wait_ms``) for the first answer, so the first sends go to a broker known to
answer rather than round-robin onto brokers nobody has heard from.

Twisted glue: every decision is ``routing_core.RoutingCore``'s; this module looks routes up,
runs the detector's timer and probes, and holds the waits.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from twisted.internet import defer, task

from client_push.errors import TopicNotExistError
from client_push.producer.auto_create import AutoCreateTopic, NoDefaultTopicError, borrowed_route
from client_push.producer.broker_probe import BrokerProber
from client_push.producer.fault_table import FaultStrategyConfig, FaultTable, SendOutcome
from client_push.producer.queue_select import QueueSelector
from client_push.producer.routing_core import (
    FirstAnswerWait,
    NoMasterError,
    Probe,
    RoutingCore,
    held_brokers,
    log,
    master_addr,
)
from client_push.routes.client import RouteClient
from client_push.routes.events import CACHED, BrokerEvent, RouteEvent
from client_push.routes.route_cache import CachedRoute, MessageQueue, PublishInfo, publish_info
from protocol.route_model import TopicRouteData

MAX_BORROWED_TOPICS = 1_024
"""Topics sent to through the default topic's route at once; the oldest makes room."""


class ProducerRouting:
    def __init__(
        self,
        client: RouteClient,
        config: FaultStrategyConfig | None = None,
        *,
        reactor: Any = None,
        clock: Any = None,
        rng: random.Random | None = None,
        auto_create: AutoCreateTopic | None = None,
    ) -> None:
        """``auto_create``: send to topics without a route through the default topic's route
        (``auto_create`` module); None: such sends fail with ``TopicNotExistError``."""
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self._client = client
        self._clock = clock if clock is not None else reactor
        self.counters: Counter[str] = Counter()
        self.core = RoutingCore(config, rng, self.counters)
        self.config: FaultStrategyConfig = self.core.config
        self.table: FaultTable = self.core.table
        self.selector: QueueSelector = self.core.selector
        self.prober = BrokerProber(reactor, self._clock, self._broker_addr_going_away)
        self._loop: task.LoopingCall | None = None
        self._remove_listener: Callable[[], None] | None = None
        self._waits: dict[FirstAnswerWait, tuple[defer.Deferred[None], Any]] = {}
        self._route_waiters: dict[str, dict[defer.Deferred[bool], Any]] = {}
        """Per topic, the waits for its next route (each with its timer)."""
        self._route_listeners: dict[str, Callable[[], None]] = {}
        self.auto_create = auto_create
        self._borrowed: dict[str, tuple[CachedRoute, PublishInfo, TopicRouteData]] = {}
        """Topics without a route -> (the default topic's route it was built from, the
        publish info and route their sends use); while the default topic's route is held."""

    def start(self) -> None:
        """Follow the route client's broker events, and start the detector (when enabled);
        selection works without either."""
        if self._remove_listener is None:
            self._remove_listener = self._client.add_broker_listener(self._broker_event)
        if self._loop is not None or not self.core.detector_wanted:
            return
        self._loop = task.LoopingCall(self._detect_round)
        self._loop.clock = self._clock
        self._loop.start(self.config.detect_interval_ms / 1000.0, now=False)
        self.core.start_detector()

    def stop(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        self.prober.stop()
        for wait in self.core.stop_detector():
            self._end_wait(wait)
        for topic, waiters in list(self._route_waiters.items()):
            for done in list(waiters):
                self._route_wait_over(topic, done, False)

    async def select_queue(
        self, topic: str, last_broker_name: str | None = None, *, wait_ms: int = 0
    ) -> MessageQueue:
        """A queue to send to; ``last_broker_name``: the broker whose send just failed.

        When no group of the route can take a send only because some group has no master (a
        failover in progress), waits up to ``wait_ms`` for a route of the topic that shows
        one, taking each route as it is announced. Raises what ``RouteClient.get_route``
        raises (TopicNotExistError, ...), ``NoMasterError`` when no master came in time, and
        ``NoWritableQueueError`` when the route has no writable queue for another reason.
        """
        started = self._now_ms()
        while True:
            info, route = await self._route_of(topic)
            for probe in self.core.route_used(
                topic, info, partial(master_addr, route), self._now_ms()
            ):
                self._probe(probe).addCallback(self._first_probed, probe.broker_name)
            wait = self.core.first_answer_wait(info, last_broker_name)
            if wait is not None:
                await self._wait_for_first_answer(wait)
            choice = self.core.select(info, route, last_broker_name, self._now_ms())
            if isinstance(choice, MessageQueue):
                return choice
            waited = self._now_ms() - started
            if waited >= wait_ms:
                self.counters["no_master_in_time"] += 1
                raise NoMasterError(choice, wait_ms)
            await self.wait_for_route(topic, wait_ms - waited)

    async def _route_of(self, topic: str) -> tuple[PublishInfo, TopicRouteData]:
        """The topic's publish info and route; with auto-creation on, those borrowed from the
        default topic while the name server has no route for the topic."""
        try:
            entry = await self._client.get_route(topic)
        except TopicNotExistError:
            if self.auto_create is None:
                raise
        else:
            if self._borrowed:
                self._borrowed.pop(topic, None)
            return entry.publish_info, entry.route
        key = self.auto_create.create_topic_key
        try:
            default = await self._client.get_route(key)
        except TopicNotExistError:
            self.counters["auto_create_no_default_topic"] += 1
            raise NoDefaultTopicError(topic, self.auto_create) from None
        held = self._borrowed.get(topic)
        if held is not None and held[0] is default:
            return held[1], held[2]
        route = borrowed_route(default.route, self.auto_create)
        info = publish_info(topic, route)
        if len(self._borrowed) >= MAX_BORROWED_TOPICS:
            self._borrowed.pop(next(iter(self._borrowed)))
        self._borrowed[topic] = (default, info, route)
        self.counters["auto_create_routes"] += 1
        log.info(
            "topic %s has no route: sending through %s for the broker to create it", topic, key
        )
        return info, route

    def via_default_topic(self, topic: str) -> bool:
        """Whether sends to ``topic`` go through the default topic's route now."""
        return topic in self._borrowed

    def wait_for_route(self, topic: str, timeout_ms: int) -> defer.Deferred[bool]:
        """Fires True with the next route state the client learns for ``topic`` (a push, a
        poll, a departure dropped locally), False after ``timeout_ms`` or on ``stop``."""
        done: defer.Deferred[bool] = defer.Deferred()
        waiters = self._route_waiters.get(topic)
        if waiters is None:
            waiters = self._route_waiters[topic] = {}
            self._route_listeners[topic] = self._client.add_listener(
                topic, lambda event: self._route_learned(topic, event)
            )
        timer = self._clock.callLater(
            max(0, timeout_ms) / 1000.0, self._route_wait_over, topic, done, False
        )
        waiters[done] = timer
        self.counters["route_waits"] += 1
        return done

    def _route_learned(self, topic: str, event: RouteEvent) -> None:
        if event.cause != CACHED:
            for done in list(self._route_waiters.get(topic, ())):
                self._route_wait_over(topic, done, True)

    def _route_wait_over(self, topic: str, done: defer.Deferred[bool], learned: bool) -> None:
        waiters = self._route_waiters.get(topic, {})
        timer = waiters.pop(done, None)
        if not waiters:
            self._route_waiters.pop(topic, None)
            remove = self._route_listeners.pop(topic, None)
            if remove is not None:
                remove()
        if timer is not None and timer.active():
            timer.cancel()
        if not done.called:
            done.callback(learned)

    def report_send(
        self, broker_name: str, latency_ms: int, outcome: SendOutcome = SendOutcome.OK
    ) -> None:
        """How a send to ``broker_name`` went; slow or failed sends isolate the broker."""
        self.core.report_send(broker_name, latency_ms, outcome, self._now_ms())

    def report_waiting(self, broker_name: str, waited_ms: int) -> None:
        """A send to ``broker_name`` is still unanswered after ``waited_ms``."""
        self.core.report_waiting(broker_name, waited_ms, self._now_ms())

    def broker_going_away(self, broker_name: str, grace_ms: int) -> None:
        """A broker announced a graceful shutdown (to the application's send connection, say):
        new sends avoid it for the grace period and until it answers a probe again."""
        self.core.broker_going_away(broker_name, grace_ms, self._now_ms())

    def broker_gone(self, broker_name: str) -> None:
        """The name server announced the broker left (unregistered, expired, its channel
        closed): new sends avoid it until a route shows it back, at most
        ``departed_avoid_ms``. The hook for the route client's broker-departure events."""
        self.core.broker_gone(broker_name, self._now_ms())

    def _broker_event(self, event: BrokerEvent) -> None:
        self.core.broker_event(event, self._now_ms())

    def broker_addr(self, topic: str, broker_name: str) -> str | None:
        """The master address of ``broker_name`` in the held route of ``topic``."""
        entry = self._client.cached_route(topic)
        if entry is not None:
            return master_addr(entry.route, broker_name)
        borrowed = self._borrowed.get(topic)
        return None if borrowed is None else master_addr(borrowed[2], broker_name)

    def stats(self) -> dict[str, int]:
        out = dict(self.counters)
        out.update({f"probe.{k}": v for k, v in self.prober.counters.items()})
        out["fault_items"] = len(self.table)
        out["probe_connections"] = self.prober.connections
        return out

    # -- detector ------------------------------------------------------------------------------

    def held_broker_addrs(self) -> dict[str, tuple[str, str]]:
        """Broker name -> (master address, one topic it serves), over every held route."""
        return held_brokers(self._held_routes())

    def _held_routes(self) -> list[tuple[str, Any]]:
        routes = []
        for topic in self._client.held_topics():
            entry = self._client.cached_route(topic)
            if entry is not None:
                routes.append((topic, entry.route))
        return routes

    def _detect_round(self) -> None:
        try:
            self._detect()
        except Exception:  # the loop must survive anything one round meets
            self.counters["detect_errors"] += 1
            log.exception("broker detection round failed")

    def _detect(self) -> None:
        held = self.held_broker_addrs()
        held_topics = set(self._client.held_topics())
        probes = self.core.detect_round(held, held_topics, self._now_ms())
        self.prober.retain(self.core.probe_addrs())
        for probe in probes:
            self._probe(probe).addCallback(self._probed, probe.broker_name)

    def _probe(self, probe: Probe) -> defer.Deferred[bool]:
        return self.prober.probe(probe.addr, probe.topic, self.config.detect_timeout_ms)

    def _probed(self, ok: bool, name: str) -> None:
        self.core.probed(name, ok, self._now_ms())

    def _first_probed(self, ok: bool, name: str) -> None:
        for wait in self.core.first_probed(name, ok, self._now_ms()):
            self._end_wait(wait)

    async def _wait_for_first_answer(self, wait: FirstAnswerWait) -> None:
        done: defer.Deferred[None] = defer.Deferred()
        timer = self._clock.callLater(
            self.config.first_probe_wait_ms / 1000.0, self._wait_expired, wait
        )
        self._waits[wait] = (done, timer)
        await done

    def _wait_expired(self, wait: FirstAnswerWait) -> None:
        if self.core.wait_expired(wait):
            self._end_wait(wait)

    def _end_wait(self, wait: FirstAnswerWait) -> None:
        held = self._waits.pop(wait, None)
        if held is None:
            return
        done, timer = held
        if timer.active():
            timer.cancel()
        if not done.called:
            done.callback(None)

    def _broker_addr_going_away(self, addr: str, grace_ms: int) -> None:
        self.core.addr_going_away(addr, grace_ms, self._now_ms())

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)
