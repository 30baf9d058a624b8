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
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet import defer, task

from client_push.producer.broker_probe import BrokerProber
from client_push.producer.fault_table import FaultStrategyConfig, FaultTable, SendOutcome
from client_push.producer.queue_select import QueueSelector
from client_push.routes.client import RouteClient
from client_push.routes.events import BrokerEvent
from client_push.routes.route_cache import MASTER_ID, MessageQueue, PublishInfo

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _FirstProbeWait:
    """A selection waiting for one of ``pending`` (brokers being probed a first time)."""

    pending: set[str]
    done: defer.Deferred[None]
    timer: Any


class ProducerRouting:
    def __init__(
        self,
        client: RouteClient,
        config: FaultStrategyConfig | None = None,
        *,
        reactor: Any = None,
        clock: Any = None,
        rng: random.Random | None = None,
    ) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self._client = client
        self._clock = clock if clock is not None else reactor
        self.config = config or FaultStrategyConfig()
        self.table = FaultTable(self.config)
        self.selector = QueueSelector(self.table, rng)
        self.prober = BrokerProber(reactor, self._clock, self._broker_addr_going_away)
        self._loop: task.LoopingCall | None = None
        self._addr_names: dict[str, str] = {}
        self._remove_listener: Callable[[], None] | None = None
        self._departed: dict[str, bool] = {}
        """Brokers announced gone -> whether a route without them has been seen since."""
        self._tracked: dict[str, PublishInfo] = {}
        """Per topic, the publish info whose brokers were last handed to the detector."""
        self._first_probing: set[str] = set()
        """Brokers whose first probe is in flight and that selections may still wait for (not
        once a wait for them has run out: one bounded wait per new broker, not one per send)."""
        self._waits: list[_FirstProbeWait] = []
        self.counters: Counter[str] = Counter()

    def start(self) -> None:
        """Follow the route client's broker events, and start the detector (when enabled);
        selection works without either."""
        if self._remove_listener is None:
            self._remove_listener = self._client.add_broker_listener(self._broker_event)
        if self._loop is not None or not (self.config.enabled and self.config.detector_enabled):
            return
        self._loop = task.LoopingCall(self._detect_round)
        self._loop.clock = self._clock
        self._loop.start(self.config.detect_interval_ms / 1000.0, now=False)
        self.selector.prefer_heard = True

    def stop(self) -> None:
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        self.selector.prefer_heard = False
        self.prober.stop()
        waits, self._waits = self._waits, []
        for wait in waits:
            self._end_wait(wait)

    async def select_queue(self, topic: str, last_broker_name: str | None = None) -> MessageQueue:
        """A queue to send to; ``last_broker_name``: the broker whose send just failed.

        Raises what ``RouteClient.get_publish_info`` raises (TopicNotExistError, ...) and
        ``NoWritableQueueError`` when the route has no writable queue.
        """
        info = await self._client.get_publish_info(topic)
        if self._departed:
            self._watch_departed(info.message_queues)
        if self._loop is not None:
            if self._tracked.get(topic) is not info:
                self._probe_new_brokers(topic, info)
            if self._first_probing and self.config.first_probe_wait_ms > 0:
                await self._wait_for_first_answer(info, last_broker_name)
        queue = self.selector.select(info, last_broker_name, self._now_ms())
        self.counters["selected"] += 1
        if last_broker_name is not None and queue.broker_name == last_broker_name:
            self.counters["selected_last_broker_again"] += 1
        return queue

    def report_send(
        self, broker_name: str, latency_ms: int, outcome: SendOutcome = SendOutcome.OK
    ) -> None:
        """How a send to ``broker_name`` went; slow or failed sends isolate the broker."""
        self.counters[f"reported.{outcome.value}"] += 1
        self.table.report(broker_name, latency_ms, outcome, self._now_ms())

    def report_waiting(self, broker_name: str, waited_ms: int) -> None:
        """A send to ``broker_name`` is still unanswered after ``waited_ms``."""
        self.counters["reported.waiting"] += 1
        self.table.waiting(broker_name, waited_ms, self._now_ms())

    def broker_going_away(self, broker_name: str, grace_ms: int) -> None:
        """A broker announced a graceful shutdown (to the application's send connection, say):
        new sends avoid it for the grace period and until it answers a probe again."""
        self.counters["brokers_going_away"] += 1
        self.table.going_away(broker_name, grace_ms, self._now_ms())

    def broker_gone(self, broker_name: str) -> None:
        """The name server announced the broker left (unregistered, expired, its channel
        closed): new sends avoid it until a route shows it back, at most
        ``departed_avoid_ms``. The hook for the route client's broker-departure events."""
        self.counters["brokers_gone"] += 1
        self.table.going_away(broker_name, self.config.departed_avoid_ms, self._now_ms())
        self._departed[broker_name] = False

    def _broker_event(self, event: BrokerEvent) -> None:
        """The name server announced a broker leaving or arriving (route-push broker events).

        A departure of the master (or of the whole broker name) is ``broker_gone``; the route
        client has already dropped it from held routes. An arrival of a departed broker lets
        the next route that shows it bring it back."""
        master_left = any(broker_id == MASTER_ID for broker_id, _addr in event.addrs)
        if event.kind == "departed" and (event.broker_name_gone or master_left):
            self.broker_gone(event.broker_name)
        elif event.kind == "arrived" and event.broker_name in self._departed:
            self._departed[event.broker_name] = True  # routes were without it until now

    def broker_addr(self, topic: str, broker_name: str) -> str | None:
        """The master address of ``broker_name`` in the held route of ``topic``."""
        entry = self._client.cached_route(topic)
        if entry is None:
            return None
        for broker in entry.route.broker_datas:
            if broker.broker_name == broker_name:
                return broker.broker_addrs.get(MASTER_ID)
        return None

    def _watch_departed(self, queues: tuple[MessageQueue, ...]) -> None:
        present = {q.broker_name for q in queues}
        now = self._now_ms()
        for name, seen_absent in list(self._departed.items()):
            if not self.table.is_going_away(name, now):
                del self._departed[name]
            elif name not in present:
                self._departed[name] = True
            elif seen_absent:
                del self._departed[name]
                self.table.returned(name, now)
                self.counters["brokers_returned"] += 1
                log.info("broker %s is back in the route of %s", name, queues[0].topic)

    def stats(self) -> dict[str, int]:
        out = dict(self.counters)
        out.update({f"probe.{k}": v for k, v in self.prober.counters.items()})
        out["fault_items"] = len(self.table)
        out["probe_connections"] = self.prober.connections
        return out

    # -- detector ------------------------------------------------------------------------------

    def held_broker_addrs(self) -> dict[str, tuple[str, str]]:
        """Broker name -> (master address, one topic it serves), over every held route."""
        return self._held_brokers()

    def _held_brokers(self) -> dict[str, tuple[str, str]]:
        """Broker name -> (master address, one topic it serves), over every held route."""
        brokers: dict[str, tuple[str, str]] = {}
        for topic in self._client.held_topics():
            entry = self._client.cached_route(topic)
            if entry is None:
                continue
            serving = {q.broker_name for q in entry.route.queue_datas}
            for broker in entry.route.broker_datas:
                addr = broker.broker_addrs.get(MASTER_ID)
                if addr and broker.broker_name in serving and broker.broker_name not in brokers:
                    brokers[broker.broker_name] = (addr, topic)
        return brokers

    def _detect_round(self) -> None:
        try:
            self._detect()
        except Exception:  # the loop must survive anything one round meets
            self.counters["detect_errors"] += 1
            log.exception("broker detection round failed")

    def _probe_new_brokers(self, topic: str, info: PublishInfo) -> None:
        """Probe the brokers of ``info`` the detector does not know yet, now rather than at the
        next round: until one answers, nothing says it is not a black hole."""
        self._tracked[topic] = info
        names = {q.broker_name for q in info.message_queues}
        for name in self.table.track(names, self._now_ms()):
            addr = self.broker_addr(topic, name)
            if addr is None:
                continue
            self._addr_names[addr] = name
            self._first_probing.add(name)
            self.counters["first_probes"] += 1
            d = self.prober.probe(addr, topic, self.config.detect_timeout_ms)
            d.addCallback(self._first_probed, name)

    def _first_probed(self, ok: bool, name: str) -> None:
        self._first_probing.discard(name)
        self._probed(ok, name)
        ended = []
        for wait in self._waits:
            wait.pending.discard(name)
            if ok or not wait.pending:
                ended.append(wait)
        if ended:
            self._waits = [w for w in self._waits if w not in ended]
            for wait in ended:
                self._end_wait(wait)

    async def _wait_for_first_answer(self, info: PublishInfo, last_broker_name: str | None) -> None:
        """Hold a selection while none of the route's brokers has ever answered and some are
        being probed a first time (a route just arrived): until one answers, all such probes
        end, or ``first_probe_wait_ms``; never longer, and never failing the send."""
        pending = {
            q.broker_name
            for q in info.message_queues
            if q.broker_name in self._first_probing and q.broker_name != last_broker_name
        }
        if not pending or self.selector.has_heard_from(info, last_broker_name):
            return
        done: defer.Deferred[None] = defer.Deferred()
        wait = _FirstProbeWait(pending, done, None)
        wait.timer = self._clock.callLater(
            self.config.first_probe_wait_ms / 1000.0, self._wait_expired, wait
        )
        self._waits.append(wait)
        self.counters["first_probe_waits"] += 1
        await done

    def _wait_expired(self, wait: _FirstProbeWait) -> None:
        self._first_probing -= wait.pending
        if wait in self._waits:
            self._waits.remove(wait)
            self.counters["first_probe_waits_expired"] += 1
            self._end_wait(wait)

    @staticmethod
    def _end_wait(wait: _FirstProbeWait) -> None:
        if wait.timer is not None and wait.timer.active():
            wait.timer.cancel()
        if not wait.done.called:
            wait.done.callback(None)

    def _detect(self) -> None:
        now = self._now_ms()
        held = self._held_brokers()
        for name in self.table.retain(set(held)):
            log.info("broker %s left every held route; its fault record is dropped", name)
        held_topics = set(self._client.held_topics())
        self.selector.forget(held_topics)
        for topic in [t for t in self._tracked if t not in held_topics]:
            del self._tracked[topic]
        self._addr_names = {addr: name for name, (addr, _) in held.items()}
        self.prober.retain(set(self._addr_names))
        self.counters["detect_rounds"] += 1
        for name in self.table.due_probes(now):
            addr, topic = held[name]
            d = self.prober.probe(addr, topic, self.config.detect_timeout_ms)
            d.addCallback(self._probed, name)

    def _probed(self, ok: bool, name: str) -> None:
        if not ok:
            heard = self.table.is_heard_from(name)
            if self.table.probe_failed(name, self._now_ms()):
                if heard:
                    self.counters["isolations_extended_by_probe"] += 1
                else:
                    self.counters["unheard_brokers_held_off"] += 1
                    log.info(
                        "broker %s has not answered the detector yet; not available until it does",
                        name,
                    )
            return
        if self.table.probe_answered(name, self._now_ms()):
            self.counters["brokers_reachable_again"] += 1
            log.info("broker %s answers again; it can be chosen when no broker is available", name)

    def _broker_addr_going_away(self, addr: str, grace_ms: int) -> None:
        name = self._addr_names.get(addr)
        if name is not None:
            self.broker_going_away(name, grace_ms)

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)
