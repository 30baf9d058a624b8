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

Twisted glue: the lookups, the selection loop and the reports are ``routing_flow.RoutingFlow``'s
(which asyncio's producer runs too), every decision ``routing_core.RoutingCore``'s; this module
runs the detector's timer and probes, and holds the waits on the reactor.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from twisted.internet import defer, task

from client_push.producer.auto_create import AutoCreateTopic
from client_push.producer.broker_probe import BrokerProber
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.routing_core import FirstAnswerWait, Probe, log
from client_push.producer.routing_flow import RoutingFlow
from client_push.routes.client import RouteClient
from client_push.routes.events import CACHED, RouteEvent


class ProducerRouting(RoutingFlow):
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
        super().__init__(client, config, rng=rng, auto_create=auto_create)
        self._client: RouteClient = client
        self._clock = clock if clock is not None else reactor
        self.prober = BrokerProber(reactor, self._clock, self._broker_addr_going_away)
        self._loop: task.LoopingCall | None = None
        self._remove_listener: Callable[[], None] | None = None
        self._waits: dict[FirstAnswerWait, tuple[defer.Deferred[None], Any]] = {}
        self._route_waiters: dict[str, dict[defer.Deferred[bool], Any]] = {}
        """Per topic, the waits for its next route (each with its timer)."""
        self._route_listeners: dict[str, Callable[[], None]] = {}

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

    def stats(self) -> dict[str, int]:
        out = dict(self.counters)
        out.update({f"probe.{k}": v for k, v in self.prober.counters.items()})
        out["fault_items"] = len(self.table)
        out["probe_connections"] = self.prober.connections
        return out

    def _detect_round(self) -> None:
        try:
            self._detect()
        except Exception:  # the loop must survive anything one round meets
            self.counters["detect_errors"] += 1
            log.exception("broker detection round failed")

    def _detect(self) -> None:
        probes = self._due_probes()
        self.prober.retain(self.core.probe_addrs())
        for probe in probes:
            self._probe(probe).addCallback(self._probed, probe.broker_name)

    def _probe(self, probe: Probe) -> defer.Deferred[bool]:
        return self.prober.probe(probe.addr, probe.topic, self.config.detect_timeout_ms)

    def _probe_first(self, probe: Probe) -> None:
        self._probe(probe).addCallback(self._first_probed, probe.broker_name)

    async def _wait_for_first_answer(self, wait: FirstAnswerWait) -> None:
        done: defer.Deferred[None] = defer.Deferred()
        timer = self._clock.callLater(
            self.config.first_probe_wait_ms / 1000.0, self._wait_expired, wait
        )
        self._waits[wait] = (done, timer)
        await done

    def _end_wait(self, wait: FirstAnswerWait) -> None:
        held = self._waits.pop(wait, None)
        if held is None:
            return
        done, timer = held
        if timer.active():
            timer.cancel()
        if not done.called:
            done.callback(None)

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)
