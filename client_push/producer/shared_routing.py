"""Queue selection for a producer: the route client's publish info, the fault strategy, the
active broker detector, broker GoAway and departures, behind one object.

``Producer`` uses it for every attempt; an application with its own sending can use it alone:
ask ``select_queue`` where to send and tell ``report_send`` how it went::

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

Written once over the runtime: the lookups, the selection loop and the reports are
``routing_flow.RoutingFlow``'s, every decision ``routing_core.RoutingCore``'s; ``RoutingLoop``
is the flow's glue on the runtime: it runs the detector's timer and probes and holds the waits,
each taken back at once when the send waiting on it is cancelled.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from client_push.producer.auto_create import AutoCreateTopic
from client_push.producer.broker_probe import BrokerProber
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.routing_core import (
    FirstAnswerWait,
    Probe,
    RoutingCore,
    log,
)
from client_push.producer.routing_flow import RoutingFlow, held_broker_addrs
from client_push.routes.client_core import RouteClientCore
from client_push.routes.events import CACHED, BrokerEvent, RouteEvent
from client_push.runtime.interface import Future, Runtime, Task, settle
from client_push.wire.timer import Timer


class SharedRouting(RoutingFlow):
    def __init__(
        self,
        client: RouteClientCore,
        config: FaultStrategyConfig | None = None,
        *,
        runtime: Runtime | None = None,
        rng: random.Random | None = None,
        auto_create: AutoCreateTopic | None = None,
    ) -> None:
        """``runtime``: the loop and clock of the detector and the waits (default: the route
        client's). ``auto_create``: send to topics without a route through the default topic's
        route (``auto_create`` module); None: such sends fail with ``TopicNotExistError``."""
        core = RoutingCore(config, rng, Counter())
        self._loop = RoutingLoop(runtime or client.runtime, client, core)
        super().__init__(client, core, self._loop, auto_create=auto_create)
        self.prober = self._loop.prober

    def start(self) -> None:
        """Follow the route client's broker events, and start the detector (when enabled);
        selection works without either."""
        self._loop.start()

    def stop(self) -> None:
        """Stop the detector and its probes; waiting selections go on without waiting."""
        self._loop.stop()

    def outstanding(self) -> dict[str, int]:
        """Waits and probes under way (for tests and debugging)."""
        return self._loop.outstanding()

    def stats(self) -> dict[str, int]:
        out = dict(self.counters)
        out.update({f"probe.{k}": v for k, v in self.prober.counters.items()})
        out["fault_items"] = len(self.table)
        out["probe_connections"] = self.prober.connections
        return out


class RoutingLoop:
    """The routing's glue on a runtime (``routing_flow.RoutingGlue``): the detector's timer and
    probes, the first-answer and route waits, the route client's broker events, all told to
    the ``RoutingCore``."""

    def __init__(self, runtime: Runtime, client: RouteClientCore, core: RoutingCore) -> None:
        self._runtime = runtime
        self._client = client
        self._core = core
        self._config = core.config
        self.counters = core.counters
        self.prober = BrokerProber(runtime, self._broker_addr_going_away)
        self._detector = Timer(runtime, self._detect_round)
        self._started = False
        self._remove_listener: Callable[[], None] | None = None
        self._first_waits: dict[FirstAnswerWait, Future[None]] = {}
        self._route_waiters: dict[str, set[Future[bool]]] = {}
        """Per topic, the waits for its next route."""
        self._route_listeners: dict[str, Callable[[], None]] = {}
        self._probes: set[Task] = set()

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._remove_listener = self._client.add_broker_listener(self._broker_event)
        if self._core.detector_wanted:
            self._detector.arm(self._config.detect_interval_ms / 1000.0)
            self._core.start_detector()

    def stop(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        self._detector.cancel()
        probes = list(self._probes)
        self._probes.clear()
        for probe in probes:
            probe.cancel()
        self.prober.stop()
        for wait in self._core.stop_detector():
            self._end_wait(wait)
        for waiters in list(self._route_waiters.values()):
            for done in list(waiters):
                settle(done, False)

    def outstanding(self) -> dict[str, int]:
        return {
            "first_answer_waits": len(self._first_waits),
            "core_first_answer_waits": self._core.open_waits,
            "route_waits": sum(len(w) for w in self._route_waiters.values()),
            "route_listeners": len(self._route_listeners),
            "probes": len(self._probes),
        }

    def now_ms(self) -> int:
        return int(self._runtime.clock.time() * 1000)

    # -- waits ---------------------------------------------------------------------------------

    async def wait_for_route(self, topic: str, timeout_ms: int) -> bool:
        done: Future[bool] = self._runtime.future()
        waiters = self._route_waiters.get(topic)
        if waiters is None:
            waiters = self._route_waiters[topic] = set()
            self._route_listeners[topic] = self._client.add_listener(
                topic, partial(self._route_learned, topic)
            )
        waiters.add(done)
        self.counters["route_waits"] += 1
        timer = self._call_later(max(0, timeout_ms), partial(settle, done, False))
        try:
            return await done
        finally:
            timer.cancel()
            waiters.discard(done)
            if not waiters and self._route_waiters.get(topic) is waiters:
                del self._route_waiters[topic]
                self._route_listeners.pop(topic)()

    def _route_learned(self, topic: str, event: RouteEvent) -> None:
        if event.cause != CACHED:
            for done in list(self._route_waiters.get(topic, ())):
                settle(done, True)

    async def wait_for_first_answer(self, wait: FirstAnswerWait) -> None:
        done: Future[None] = self._runtime.future()
        self._first_waits[wait] = done
        timer = self._call_later(
            self._config.first_probe_wait_ms, partial(self._wait_expired, wait)
        )
        try:
            await done
        finally:
            timer.cancel()
            if self._first_waits.pop(wait, None) is not None:
                self._core.wait_given_up(wait)

    def _wait_expired(self, wait: FirstAnswerWait) -> None:
        if self._core.wait_expired(wait):
            self._end_wait(wait)

    def _end_wait(self, wait: FirstAnswerWait) -> None:
        done = self._first_waits.pop(wait, None)
        if done is not None:
            settle(done, None)

    # -- brokers' events -----------------------------------------------------------------------

    def _broker_event(self, event: BrokerEvent) -> None:
        self._core.broker_event(event, self.now_ms())

    def _broker_addr_going_away(self, addr: str, grace_ms: int) -> None:
        self._core.addr_going_away(addr, grace_ms, self.now_ms())

    # -- the detector --------------------------------------------------------------------------

    def _detect_round(self) -> None:
        try:
            held = held_broker_addrs(self._client)
            held_topics = set(self._client.held_topics())
            probes = self._core.detect_round(held, held_topics, self.now_ms())
            self.prober.retain(self._core.probe_addrs())
            for probe in probes:
                self._spawn_probe(probe, self._probed)
        except Exception:  # the detector must survive anything one round meets
            self.counters["detect_errors"] += 1
            log.exception("broker detection round failed")
        if self._started and self._remove_listener is not None:
            self._detector.arm(self._config.detect_interval_ms / 1000.0)

    def probe_first(self, probe: Probe) -> None:
        self._spawn_probe(probe, self._first_probed)

    def _probed(self, ok: bool, name: str) -> None:
        self._core.probed(name, ok, self.now_ms())

    def _first_probed(self, ok: bool, name: str) -> None:
        for wait in self._core.first_probed(name, ok, self.now_ms()):
            self._end_wait(wait)

    def _spawn_probe(self, probe: Probe, done: Callable[[bool, str], None]) -> None:
        timeout = self._config.detect_timeout_ms
        box: list[Task] = []

        async def run() -> None:
            try:
                ok = await self.prober.probe(probe.addr, probe.topic, timeout)
            finally:
                if box:
                    self._probes.discard(box[0])
            done(ok, probe.broker_name)

        task = self._runtime.spawn(run())
        if not task.done():
            box.append(task)
            self._probes.add(task)

    def _call_later(self, delay_ms: int, call: Callable[[], None]) -> Any:
        return self._runtime.clock.call_later(delay_ms / 1000.0, call)
