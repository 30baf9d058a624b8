"""A producer's routing, written once over the runtime: where each send goes.

The route client's publish info, the fault strategy, the active broker detector, broker GoAway
and departures behind one object. ``Producer`` asks it for every attempt; an application with
its own sending can use it alone (``ProducerRouting``, its face on each loop): ask
``select_queue`` where to send and tell ``report_send`` how it went::

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

Every decision is ``RoutingDecisions``'s (sans-I/O); this class looks routes up (borrowing the
default topic's for auto-creation), runs the detector's timer and probes, and holds the waits,
each taken back at once when the send waiting on it is cancelled.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from functools import partial

from client_push.errors import TopicNotExistError
from client_push.producer.auto_create import AutoCreateTopic, BorrowedRoutes
from client_push.producer.broker_probe import BrokerProber
from client_push.producer.fault_table import FaultStrategyConfig, FaultTable, SendOutcome
from client_push.producer.queue_select import NoWritableQueueError, QueueSelector
from client_push.producer.routing_decisions import (
    AwaitRoute,
    FirstAnswerWait,
    Probe,
    RoutingDecisions,
    held_brokers,
    log,
    master_addr,
)
from client_push.routes.client_core import RouteClientCore
from client_push.routes.events import CACHED, BrokerEvent, RouteEvent
from client_push.routes.route_cache import MessageQueue, PublishInfo
from client_push.runtime.interface import Future, Runtime, Task, Timer, settle
from client_push.wire.timer import Timer as Rearmable
from protocol.route_model import TopicRouteData


class NoMasterError(NoWritableQueueError):
    """No group of the topic could take the send: some had no master, and no route with one
    came within the time the send had."""

    def __init__(self, wait: AwaitRoute, waited_ms: int) -> None:
        self.topic = wait.topic
        self.groups = wait.groups
        self.waited_ms = waited_ms
        groups = ", ".join(wait.groups)
        super().__init__(
            f"topic {wait.topic}: no broker group can take a send; {groups} "
            f"{'has' if len(wait.groups) == 1 else 'have'} no master (a failover in progress?) "
            f"and no route with one came within {waited_ms} ms"
        )


def no_queue_error(wait: AwaitRoute, waited_ms: int) -> NoWritableQueueError:
    """What a selection raises when no route that can take the send came in ``waited_ms``."""
    if wait.groups:
        return NoMasterError(wait, waited_ms)
    return NoWritableQueueError(f"topic {wait.topic} has no writable queue")


class RoutingCore:
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
        self._client = client
        self._runtime = runtime = runtime or client.runtime
        self.decisions = decisions = RoutingDecisions(config, rng, Counter())
        self.counters = decisions.counters
        self.config: FaultStrategyConfig = decisions.config
        self.table: FaultTable = decisions.table
        self.selector: QueueSelector = decisions.selector
        self.auto_create = auto_create
        self._borrowed = None if auto_create is None else BorrowedRoutes(auto_create, self.counters)
        self.prober = BrokerProber(runtime, self._broker_addr_going_away)
        self._detector = Rearmable(runtime, self._detect_round)
        self._probes: set[Task] = set()
        self._started = False
        self._remove_listener: Callable[[], None] | None = None
        self._first_waits: dict[FirstAnswerWait, Future[None]] = {}
        self._route_waiters: dict[str, set[Future[bool]]] = {}
        """Per topic, the waits for its next route."""
        self._route_listeners: dict[str, Callable[[], None]] = {}

    def start(self) -> None:
        """Follow the route client's broker events, and start the detector (when enabled);
        selection works without either."""
        if self._started:
            return
        self._started = True
        self._remove_listener = self._client.add_broker_listener(self._broker_event)
        if self.decisions.detector_wanted:
            self._detector.arm(self.config.detect_interval_ms / 1000.0)
            self.decisions.start_detector()

    def stop(self) -> None:
        """Stop the detector and its probes; waiting selections go on without waiting."""
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        self._detector.cancel()
        probes = list(self._probes)
        self._probes.clear()
        for probe in probes:
            probe.cancel()
        self.prober.stop()
        for wait in self.decisions.stop_detector():
            self._end_first_wait(wait)
        for waiters in list(self._route_waiters.values()):
            for done in list(waiters):
                settle(done, False)

    def outstanding(self) -> dict[str, int]:
        """Waits and probes under way (for tests and debugging)."""
        return {
            "first_answer_waits": len(self._first_waits),
            "core_first_answer_waits": self.decisions.open_waits,
            "route_waits": sum(len(w) for w in self._route_waiters.values()),
            "route_listeners": len(self._route_listeners),
            "probes": len(self._probes),
        }

    def stats(self) -> dict[str, int]:
        out = dict(self.counters)
        out.update({f"probe.{k}": v for k, v in self.prober.counters.items()})
        out["fault_items"] = len(self.table)
        out["probe_connections"] = self.prober.connections
        return out

    def _now_ms(self) -> int:
        return int(self._runtime.clock.time() * 1000)

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
        decisions = self.decisions
        started = now = self._now_ms()
        waiting: AwaitRoute | None = None
        while True:
            info, route = await self._publish_info(topic)
            if decisions.detecting or decisions.departed:  # else route_used has nothing to do
                for probe in decisions.route_used(topic, info, route, now):
                    self._spawn_probe(probe, self._first_probed)
            if decisions.first_probing:  # else no selection waits for a first answer
                wait = decisions.first_answer_wait(info, last_broker_name)
                if wait is not None:
                    await self._wait_for_first_answer(wait)
                    now = self._now_ms()
            choice = decisions.select(info, route, last_broker_name, now)
            if type(choice) is MessageQueue:
                if waiting is not None:
                    self._waited(waiting, now - started)
                return choice
            assert isinstance(choice, AwaitRoute)
            if waiting is None:
                self.counters[f"route_waits.{choice.reason}"] += 1
            waiting = choice
            now = self._now_ms()
            waited = now - started
            if waited >= wait_ms:
                self._waited(choice, waited)
                self.counters[f"route_wait_timeouts.{choice.reason}"] += 1
                if choice.groups:
                    self.counters["no_master_in_time"] += 1
                raise no_queue_error(choice, wait_ms)
            await self.wait_for_route(topic, wait_ms - waited)
            now = self._now_ms()

    def _waited(self, wait: AwaitRoute, waited_ms: int) -> None:
        self.counters[f"route_wait_ms.{wait.reason}"] += max(0, waited_ms)

    async def _publish_info(self, topic: str) -> tuple[PublishInfo, TopicRouteData]:
        """The topic's publish info and route; for a topic the name server has no route for,
        those borrowed from the default topic's (``auto_create`` module)."""
        borrowed = self._borrowed
        try:
            entry = await self._client.get_route(topic)
        except TopicNotExistError:
            if borrowed is None:
                raise
        else:
            if borrowed:  # None, or no topic borrows: nothing to drop
                borrowed.own_route(topic)
            return entry.publish_info, entry.route
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

    # -- waits ---------------------------------------------------------------------------------

    async def wait_for_route(self, topic: str, timeout_ms: int) -> bool:
        """True with the next route state the client learns for ``topic`` (a push, a poll, a
        departure dropped locally), False after ``timeout_ms`` or once the routing stops."""
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

    async def _wait_for_first_answer(self, wait: FirstAnswerWait) -> None:
        """Until ``wait`` ends (an answer, its probes all failed) or ``first_probe_wait_ms``."""
        done: Future[None] = self._runtime.future()
        self._first_waits[wait] = done
        timer = self._call_later(
            self.config.first_probe_wait_ms, partial(self._first_wait_expired, wait)
        )
        try:
            await done
        finally:
            timer.cancel()
            if self._first_waits.pop(wait, None) is not None:
                self.decisions.wait_given_up(wait)

    def _first_wait_expired(self, wait: FirstAnswerWait) -> None:
        if self.decisions.wait_expired(wait):
            self._end_first_wait(wait)

    def _end_first_wait(self, wait: FirstAnswerWait) -> None:
        done = self._first_waits.pop(wait, None)
        if done is not None:
            settle(done, None)

    def _call_later(self, delay_ms: int, call: Callable[[], None]) -> Timer:
        return self._runtime.clock.call_later(delay_ms / 1000.0, call)

    # -- what happened to sends and brokers ----------------------------------------------------

    def report_send(
        self, broker_name: str, latency_ms: int, outcome: SendOutcome = SendOutcome.OK
    ) -> None:
        """How a send to ``broker_name`` went; slow or failed sends isolate the broker."""
        self.table.report(broker_name, latency_ms, outcome, self._now_ms())

    def report_waiting(self, broker_name: str, waited_ms: int) -> None:
        """A send to ``broker_name`` is still unanswered after ``waited_ms``."""
        self.table.waiting(broker_name, waited_ms, self._now_ms())

    def broker_going_away(self, broker_name: str, grace_ms: int) -> None:
        """A broker announced a graceful shutdown (to the application's send connection, say):
        new sends avoid it for the grace period and until it answers a probe again."""
        self.decisions.broker_going_away(broker_name, grace_ms, self._now_ms())

    def broker_gone(self, broker_name: str) -> None:
        """The name server announced the broker left (unregistered, expired, its channel
        closed): new sends avoid it until a route shows it back, at most
        ``departed_avoid_ms``. The hook for the route client's broker-departure events."""
        self.decisions.broker_gone(broker_name, self._now_ms())

    def held_broker_addrs(self) -> dict[str, tuple[str, str]]:
        """Broker name -> (master address, one topic it serves), over every held route."""
        client = self._client
        routes = []
        for topic in client.held_topics():
            entry = client.cached_route(topic)
            if entry is not None:
                routes.append((topic, entry.route))
        return held_brokers(routes)

    def _broker_event(self, event: BrokerEvent) -> None:
        self.decisions.broker_event(event, self._now_ms())

    def _broker_addr_going_away(self, addr: str, grace_ms: int) -> None:
        self.decisions.addr_going_away(addr, grace_ms, self._now_ms())

    # -- the detector --------------------------------------------------------------------------

    def _detect_round(self) -> None:
        try:
            held = self.held_broker_addrs()
            held_topics = set(self._client.held_topics())
            probes = self.decisions.detect_round(held, held_topics, self._now_ms())
            self.prober.retain(self.decisions.probe_addrs())
            for probe in probes:
                self._spawn_probe(probe, self._probed)
        except Exception:  # the detector must survive anything one round meets
            self.counters["detect_errors"] += 1
            log.exception("broker detection round failed")
        if self._remove_listener is not None:
            self._detector.arm(self.config.detect_interval_ms / 1000.0)

    def _probed(self, ok: bool, name: str) -> None:
        self.decisions.probed(name, ok, self._now_ms())

    def _first_probed(self, ok: bool, name: str) -> None:
        for wait in self.decisions.first_probed(name, ok, self._now_ms()):
            self._end_first_wait(wait)

    def _spawn_probe(self, probe: Probe, done: Callable[[bool, str], None]) -> None:
        timeout = self.config.detect_timeout_ms
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
