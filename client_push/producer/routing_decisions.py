"""A producer's routing decisions, sans-I/O: where a send goes, when it waits, what to probe.

Pure: no event loop, no sockets; every call carries the time (``now_ms``) on the caller's
clock. ``routing_core.RoutingCore`` carries these decisions out on the runtime. Events in and
decisions out:

Events in
  ``route_used(topic, info, route, now_ms)``
      a selection is about to use ``info`` (``route``'s publish info); returns the ``Probe``\\ s
      of the brokers the detector must probe at once (brokers it has not met yet).
  ``detect_round(held, held_topics, now_ms)``
      the detector's timer fired; ``held`` comes from ``held_brokers`` over the routes the
      client holds. Returns the ``Probe``\\ s due now.
  ``first_probed(name, ok, now_ms)`` / ``probed(name, ok, now_ms)``
      a first probe / a round's probe of ``name`` ended; ``first_probed`` returns the
      ``FirstAnswerWait``\\ s that end with it (release those selections).
  ``wait_expired(wait)``
      a first-answer wait ran out its ``first_probe_wait_ms``; True when it was still open.
  ``wait_given_up(wait)``
      the selection holding a first-answer wait was cancelled.
  ``broker_going_away(name, grace_ms, now_ms)``, ``addr_going_away(addr, grace_ms, now_ms)``
      a broker's GoAway (on a send connection, on a probe connection).
  ``broker_event(event, now_ms)``, ``broker_gone(name, now_ms, gone_addrs)``
      the route client's broker arrival or departure (route push); a departure by hand.
  ``start_detector()`` / ``stop_detector()``
      the detector's timer started (when ``detector_wanted``) / stopped; ``stop_detector``
      returns the open first-answer waits to release. ``probe_addrs()`` after a round: the
      addresses still probed (close the other probe connections).

A selection may skip ``route_used`` while ``detecting`` is false and ``departed`` is empty,
and ``first_answer_wait`` while ``first_probing`` is empty: neither has anything to do then.

Decisions out
  ``first_answer_wait(info, last_broker_name)``
      a ``FirstAnswerWait`` when the selection should wait for a first probe answer (at most
      ``first_probe_wait_ms``), else None.
  ``select(info, route, last_broker_name, now_ms)``
      the ``MessageQueue`` to send to, or ``AwaitRoute`` when the held route has no queue a
      send may go to now (a group without master, a group turned read-only, a departure
      applied before the new master is announced): the caller waits for the next route of the
      topic, within the send's timeout, and asks again. A route change ends each of these.

The failover rule: publish info holds the queues of groups with a master and write permission
only, so a send goes at once to any group that has one; it waits only when no group can take
it (``AwaitRoute.reason``: ``no_master`` when some group lists brokers but no master, as while
the controller promotes a slave; else ``no_writable_queue``). A departed master's group is
avoided until a route shows it back or shows a master at a new address: the promoted slave is
used as soon as the name server announces it.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from client_push.producer.fault_table import FaultStrategyConfig, FaultTable
from client_push.producer.queue_select import QueueSelector
from client_push.routes.events import BrokerEvent
from client_push.routes.route_cache import MASTER_ID, MessageQueue, PublishInfo
from protocol.route_model import TopicRouteData

log = logging.getLogger("client_push.producer.routing")


@dataclass(frozen=True, slots=True)
class Probe:
    """Probe ``broker_name`` at ``addr`` with a request about ``topic`` (one it serves)."""

    broker_name: str
    addr: str
    topic: str


@dataclass(eq=False, slots=True)
class FirstAnswerWait:
    """A selection waiting for one of ``pending`` (brokers probed a first time) to answer."""

    pending: set[str]


NO_MASTER = "no_master"
NO_WRITABLE_QUEUE = "no_writable_queue"


@dataclass(frozen=True, slots=True)
class AwaitRoute:
    """No group can take a send now: wait for the next route of ``topic``. ``groups``: the
    groups without master (``reason`` ``no_master``); none when every group listed is
    read-only or the departures left no writable queue (``no_writable_queue``)."""

    topic: str
    groups: tuple[str, ...]
    reason: str = NO_MASTER


@dataclass(slots=True)
class _Departure:
    seen_absent: bool
    """A route without the group has been seen since it left."""
    gone_addrs: frozenset[str] = field(default_factory=frozenset)
    """The master addresses that left; a master at another address is a new master."""


def held_brokers(routes: Iterable[tuple[str, TopicRouteData]]) -> dict[str, tuple[str, str]]:
    """Broker name -> (master address, one topic it serves), over ``(topic, route)`` pairs."""
    brokers: dict[str, tuple[str, str]] = {}
    for topic, route in routes:
        serving = {q.broker_name for q in route.queue_datas}
        for broker in route.broker_datas:
            addr = broker.broker_addrs.get(MASTER_ID)
            if addr and broker.broker_name in serving and broker.broker_name not in brokers:
                brokers[broker.broker_name] = (addr, topic)
    return brokers


def master_addr(route: TopicRouteData | None, broker_name: str) -> str | None:
    """The master address of ``broker_name`` in ``route``."""
    if route is None:
        return None
    for broker in route.broker_datas:
        if broker.broker_name == broker_name:
            return broker.broker_addrs.get(MASTER_ID)
    return None


def masterless_groups(route: TopicRouteData) -> tuple[str, ...]:
    """Groups serving the topic that list brokers but no master (brokerId 0): a slave left
    alone while the controller elects it, or acting master read-only meanwhile."""
    serving = {q.broker_name for q in route.queue_datas}
    return tuple(
        sorted(
            b.broker_name
            for b in route.broker_datas
            if b.broker_name in serving and b.broker_addrs and MASTER_ID not in b.broker_addrs
        )
    )


class RoutingDecisions:
    def __init__(
        self,
        config: FaultStrategyConfig | None = None,
        rng: random.Random | None = None,
        counters: Counter[str] | None = None,
    ) -> None:
        self.config = config or FaultStrategyConfig()
        self.counters: Counter[str] = Counter() if counters is None else counters
        self.table = FaultTable(self.config, counters=self.counters)
        """How sends went is reported here directly (``FaultTable.report``/``waiting``)."""
        self.selector = QueueSelector(self.table, rng)
        self.detecting = False
        self._addr_names: dict[str, str] = {}
        self.departed: dict[str, _Departure] = {}
        """Groups announced gone, until a route shows them back (``route_used`` watches)."""
        self._tracked: dict[str, PublishInfo] = {}
        """Per topic, the publish info whose brokers were last handed to the detector."""
        self.first_probing: set[str] = set()
        """Brokers whose first probe is in flight and that selections may still wait for (not
        once a wait for them has run out: one bounded wait per new broker, not one per send)."""
        self._waits: list[FirstAnswerWait] = []

    @property
    def detector_wanted(self) -> bool:
        return self.config.enabled and self.config.detector_enabled

    def start_detector(self) -> None:
        self.detecting = True
        self.selector.prefer_heard = True

    def stop_detector(self) -> list[FirstAnswerWait]:
        """Stop detecting; returns the open waits, to release."""
        self.detecting = False
        self.selector.prefer_heard = False
        waits, self._waits = self._waits, []
        return waits

    # -- selection -------------------------------------------------------------------------------

    def route_used(
        self, topic: str, info: PublishInfo, route: TopicRouteData | None, now_ms: int
    ) -> tuple[Probe, ...]:
        """A selection is about to use ``info`` (of ``route``): the brokers to probe a first
        time, now rather than at the next round (until one answers, nothing says it is not a
        black hole)."""
        if self.departed:
            self._watch_departed(info.message_queues, route, now_ms)
        if not self.detecting or self._tracked.get(topic) is info:
            return ()
        self._tracked[topic] = info
        probes = []
        names = {q.broker_name for q in info.message_queues}
        for name in self.table.track(names, now_ms):
            addr = master_addr(route, name)
            if addr is None:
                continue
            self._addr_names[addr] = name
            self.first_probing.add(name)
            self.counters["first_probes"] += 1
            probes.append(Probe(name, addr, topic))
        return tuple(probes)

    def first_answer_wait(
        self, info: PublishInfo, last_broker_name: str | None
    ) -> FirstAnswerWait | None:
        """Hold a selection while none of the route's brokers has ever answered and some are
        being probed a first time (a route just arrived): until one answers, all such probes
        end, or ``first_probe_wait_ms``; never longer, and never failing the send."""
        if not self.first_probing or self.config.first_probe_wait_ms <= 0:
            return None
        pending = {
            q.broker_name
            for q in info.message_queues
            if q.broker_name in self.first_probing and q.broker_name != last_broker_name
        }
        if not pending or self.selector.has_heard_from(info, last_broker_name):
            return None
        wait = FirstAnswerWait(pending)
        self._waits.append(wait)
        self.counters["first_probe_waits"] += 1
        return wait

    def wait_expired(self, wait: FirstAnswerWait) -> bool:
        self.first_probing -= wait.pending
        if wait not in self._waits:
            return False
        self._waits.remove(wait)
        self.counters["first_probe_waits_expired"] += 1
        return True

    @property
    def open_waits(self) -> int:
        """First-answer waits holding selections now."""
        return len(self._waits)

    def wait_given_up(self, wait: FirstAnswerWait) -> None:
        """The selection holding ``wait`` was cancelled: forget the wait (its brokers' first
        probes go on, and may still hold other selections)."""
        if wait in self._waits:
            self._waits.remove(wait)

    def select(
        self,
        info: PublishInfo,
        route: TopicRouteData | None,
        last_broker_name: str | None,
        now_ms: int,
    ) -> MessageQueue | AwaitRoute:
        if not info.message_queues and route is not None:
            groups = masterless_groups(route)
            if groups:
                self.counters["awaiting_master"] += 1
                return AwaitRoute(info.topic, groups, NO_MASTER)
            return AwaitRoute(info.topic, (), NO_WRITABLE_QUEUE)
        queue = self.selector.select(info, last_broker_name, now_ms)
        self.counters["selected"] += 1
        if last_broker_name is not None and queue.broker_name == last_broker_name:
            self.counters["selected_last_broker_again"] += 1
        return queue

    # -- what happened to brokers ------------------------------------------------------------------

    def broker_going_away(self, broker_name: str, grace_ms: int, now_ms: int) -> None:
        self.counters["brokers_going_away"] += 1
        self.table.going_away(broker_name, grace_ms, now_ms)

    def addr_going_away(self, addr: str, grace_ms: int, now_ms: int) -> None:
        name = self._addr_names.get(addr)
        if name is not None:
            self.broker_going_away(name, grace_ms, now_ms)

    def broker_gone(self, broker_name: str, now_ms: int, gone_addrs: Iterable[str] = ()) -> None:
        """The broker left: avoid it until a route shows it back (or a new master of its
        group), at most ``departed_avoid_ms``."""
        self.counters["brokers_gone"] += 1
        self.table.going_away(broker_name, self.config.departed_avoid_ms, now_ms)
        self.departed[broker_name] = _Departure(False, frozenset(gone_addrs))

    def broker_event(self, event: BrokerEvent, now_ms: int) -> None:
        """A departure of the master (or of the whole broker name) is ``broker_gone``; the
        route client has already dropped it from held routes. An arrival of a departed broker
        lets the next route that shows it bring it back."""
        masters = [addr for broker_id, addr in event.addrs if broker_id == MASTER_ID]
        if event.kind == "departed" and (event.broker_name_gone or masters):
            self.broker_gone(event.broker_name, now_ms, masters)
        elif event.kind == "arrived" and event.broker_name in self.departed:
            self.departed[event.broker_name].seen_absent = True

    def _watch_departed(
        self, queues: tuple[MessageQueue, ...], route: TopicRouteData | None, now_ms: int
    ) -> None:
        present = {q.broker_name for q in queues}
        for name, departure in list(self.departed.items()):
            if not self.table.is_going_away(name, now_ms):
                del self.departed[name]
            elif name not in present:
                departure.seen_absent = True
            elif _new_master(departure, master_addr(route, name)):
                # Another process at another address: the old master's record says nothing
                # about it, and sends go there at once.
                del self.departed[name]
                self.table.forget(name)
                self.counters["new_masters"] += 1
                log.info("broker %s has a new master in the route of %s", name, queues[0].topic)
            elif departure.seen_absent:
                del self.departed[name]
                self.table.returned(name, now_ms)
                self.counters["brokers_returned"] += 1
                log.info("broker %s is back in the route of %s", name, queues[0].topic)

    # -- the detector ------------------------------------------------------------------------------

    def detect_round(
        self, held: Mapping[str, tuple[str, str]], held_topics: set[str], now_ms: int
    ) -> list[Probe]:
        for name in self.table.retain(set(held)):
            log.info("broker %s left every held route; its fault record is dropped", name)
        self.selector.forget(held_topics)
        for topic in [t for t in self._tracked if t not in held_topics]:
            del self._tracked[topic]
        self._addr_names = {addr: name for name, (addr, _) in held.items()}
        self.counters["detect_rounds"] += 1
        probes = []
        for name in self.table.due_probes(now_ms):
            addr, topic = held[name]
            probes.append(Probe(name, addr, topic))
        return probes

    def probe_addrs(self) -> set[str]:
        """The addresses the detector still probes (close connections to the others)."""
        return set(self._addr_names)

    def first_probed(self, name: str, ok: bool, now_ms: int) -> list[FirstAnswerWait]:
        self.first_probing.discard(name)
        self.probed(name, ok, now_ms)
        ended = []
        for wait in self._waits:
            wait.pending.discard(name)
            if ok or not wait.pending:
                ended.append(wait)
        if ended:
            self._waits = [w for w in self._waits if w not in ended]
        return ended

    def probed(self, name: str, ok: bool, now_ms: int) -> None:
        if not ok:
            heard = self.table.is_heard_from(name)
            if self.table.probe_failed(name, now_ms):
                if heard:
                    self.counters["isolations_extended_by_probe"] += 1
                else:
                    self.counters["unheard_brokers_held_off"] += 1
                    log.info(
                        "broker %s has not answered the detector yet; not available until it does",
                        name,
                    )
            return
        if self.table.probe_answered(name, now_ms):
            self.counters["brokers_reachable_again"] += 1
            log.info("broker %s answers again; it can be chosen when no broker is available", name)


def _new_master(departure: _Departure, addr: str | None) -> bool:
    return bool(departure.gone_addrs) and addr is not None and addr not in departure.gone_addrs
