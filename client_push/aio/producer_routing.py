"""Queue selection for the asyncio producer: the route client's publish info, the fault
strategy, the active broker detector, broker GoAway and departures, behind one object.

asyncio glue. The lookups, the selection loop (with its waits for a first probe answer and for
a route with a master), auto-creation through the default topic and what sends report are
``client_push.producer.routing_flow.RoutingFlow``'s, every decision
``client_push.producer.routing_core.RoutingCore``'s: the Twisted producer runs the very same.
This module runs the detector's timer and probes on the injected clock and holds the waits,
each taken back at once when the send waiting on it is cancelled.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from client_push.aio.client import RouteClient
from client_push.aio.clock import Clock, LoopClock, Timer, TimerHandle
from client_push.aio.producer_conns import BrokerProber
from client_push.producer.auto_create import AutoCreateTopic
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.routing_core import FirstAnswerWait, Probe, log
from client_push.producer.routing_flow import RoutingFlow
from client_push.routes.events import CACHED, RouteEvent


class ProducerRouting(RoutingFlow):
    def __init__(
        self,
        client: RouteClient,
        config: FaultStrategyConfig | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        auto_create: AutoCreateTopic | None = None,
    ) -> None:
        """``clock``: the detector's and the waits' timers (default: the wall clock with the
        running loop's timers)."""
        super().__init__(client, config, rng=rng, auto_create=auto_create)
        self._client: RouteClient = client
        self._given_clock = clock
        self._clock: Clock | None = None
        self._prober: BrokerProber | None = None
        self._detector: Timer | None = None
        self._remove_listener: Callable[[], None] | None = None
        self._first_waits: dict[FirstAnswerWait, asyncio.Future[None]] = {}
        self._route_waiters: dict[str, set[asyncio.Future[bool]]] = {}
        """Per topic, the waits for its next route."""
        self._route_listeners: dict[str, Callable[[], None]] = {}
        self._probes: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """On the running loop: follow the route client's broker events, and start the
        detector (when enabled)."""
        if self._clock is not None:
            return
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._clock = clock = self._given_clock or LoopClock(loop)
        self._prober = BrokerProber(loop, clock, self._broker_addr_going_away)
        self._remove_listener = self._client.add_broker_listener(self._broker_event)
        if self.core.detector_wanted:
            self._detector = Timer(clock, self._detect_round)
            self._detector.arm(self.config.detect_interval_ms / 1000.0)
            self.core.start_detector()

    def stop(self) -> None:
        """Stop the detector and its probes; waiting selections go on without waiting."""
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        if self._detector is not None:
            self._detector.cancel()
            self._detector = None
        for probe in list(self._probes):
            probe.cancel()
        if self._prober is not None:
            self._prober.stop()
        for wait in self.core.stop_detector():
            self._end_wait(wait)
        for waiters in list(self._route_waiters.values()):
            for done in list(waiters):
                if not done.done():
                    done.set_result(False)

    def outstanding(self) -> dict[str, int]:
        """Waits and probes under way (for tests and debugging)."""
        return {
            "first_answer_waits": len(self._first_waits),
            "core_first_answer_waits": self.core.open_waits,
            "route_waits": sum(len(w) for w in self._route_waiters.values()),
            "route_listeners": len(self._route_listeners),
            "probes": len(self._probes),
        }

    def stats(self) -> dict[str, int]:
        out = dict(self.counters)
        prober = self._prober
        if prober is not None:
            out.update({f"probe.{k}": v for k, v in prober.counters.items()})
        out["fault_items"] = len(self.table)
        out["probe_connections"] = 0 if prober is None else prober.connections
        return out

    # -- waits ---------------------------------------------------------------------------------

    async def wait_for_route(self, topic: str, timeout_ms: int) -> bool:
        """True with the next route state the client learns for ``topic`` (a push, a poll, a
        departure dropped locally), False after ``timeout_ms`` or on ``stop``."""
        done: asyncio.Future[bool] = self._running_loop().create_future()
        waiters = self._route_waiters.get(topic)
        if waiters is None:
            waiters = self._route_waiters[topic] = set()
            self._route_listeners[topic] = self._client.add_listener(
                topic, partial(self._route_learned, topic)
            )
        waiters.add(done)
        self.counters["route_waits"] += 1
        timer = self._call_later(max(0, timeout_ms), partial(_settle, done, False))
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
                _settle(done, True)

    async def _wait_for_first_answer(self, wait: FirstAnswerWait) -> None:
        done: asyncio.Future[None] = self._running_loop().create_future()
        self._first_waits[wait] = done
        timer = self._call_later(self.config.first_probe_wait_ms, partial(self._wait_expired, wait))
        try:
            await done
        finally:
            timer.cancel()
            if self._first_waits.pop(wait, None) is not None:
                self.core.wait_given_up(wait)

    def _end_wait(self, wait: FirstAnswerWait) -> None:
        done = self._first_waits.pop(wait, None)
        if done is not None:
            _settle(done, None)

    # -- the detector --------------------------------------------------------------------------

    def _detect_round(self) -> None:
        prober = self._prober
        if prober is None:
            return
        try:
            probes = self._due_probes()
            prober.retain(self.core.probe_addrs())
            for probe in probes:
                self._spawn_probe(probe, self._probed)
        except Exception:  # the detector must survive anything one round meets
            self.counters["detect_errors"] += 1
            log.exception("broker detection round failed")
        if self._detector is not None:
            self._detector.arm(self.config.detect_interval_ms / 1000.0)

    def _probe_first(self, probe: Probe) -> None:
        self._spawn_probe(probe, self._first_probed)

    def _spawn_probe(self, probe: Probe, done: Callable[[bool, str], None]) -> None:
        prober = self._prober
        if prober is None:  # not started: a selection without the detector
            return
        timeout = self.config.detect_timeout_ms

        async def run() -> None:
            ok = await prober.probe(probe.addr, probe.topic, timeout)
            done(ok, probe.broker_name)

        task = self._running_loop().create_task(run())
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    # -- helpers -------------------------------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        self._started_clock()
        return self._loop

    def _started_clock(self) -> Clock:
        """The clock; a routing used on its own (without a producer) starts on first use."""
        if self._clock is None:
            self.start()
        clock = self._clock
        if clock is None:
            raise RuntimeError("producer routing did not start")
        return clock

    def _call_later(self, delay_ms: int, call: Callable[[], None]) -> TimerHandle:
        return self._started_clock().call_later(delay_ms / 1000.0, call)

    def _now_ms(self) -> int:
        return int(self._started_clock().time() * 1000)


V = TypeVar("V")


def _settle(done: asyncio.Future[V], value: V) -> None:
    if not done.done():
        done.set_result(value)
