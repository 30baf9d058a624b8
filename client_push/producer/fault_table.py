"""Which brokers a producer should avoid: the latency fault strategy and reachability.

Pure: callers pass the time. Two states per broker name, as upstream's fault tolerance keeps
them (RIP "active broker detection"):

* **available**: not isolated. A send that took long, or failed, isolates its broker for a time
  that grows with the latency (``latency_levels_ms`` -> ``isolation_ms``); isolation only ever
  extends, so a fast send does not cut short a penalty a slow one earned.
* **reachable**: the broker answers at all. A send that could not reach it clears the flag; only
  the active detector (``broker_probe``) sets it again, when the broker answers a probe.

Beyond upstream, availability also waits for evidence: a send still unanswered at an isolating
latency isolates its broker at once (``waiting``); an isolated broker that misses a probe stays
unavailable until one is answered (``probe_failed``); and a broker that went away (GoAway, a
departure) is available again only after its grace and once heard from (a probe, a send, or a
route showing it back), when the detector runs.

The detector also probes every broker as soon as a route the producer uses names it
(``track``), rather than only those a send has already gone wrong on, and the table remembers
which brokers have ever answered (``is_heard_from``). A broker never heard from that misses
that first probe is what the RIP calls not reachable: it is neither available nor reachable
until it answers one. So a black-holed broker is known before the first sends reach it.

A broker never reported on is available and reachable. Items exist only for brokers reported
on, and are dropped when the broker leaves every route the client holds (``retain``), so the
table is bounded by the brokers of held routes.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum


class FaultConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class FaultStrategyConfig:
    enabled: bool = True
    """Upstream's ``sendLatencyFaultEnable``: off, queues are taken round-robin, only the broker
    of a failed attempt being avoided on the retry."""
    latency_levels_ms: tuple[int, ...] = (50, 100, 550, 1_000, 2_000, 3_000, 15_000)
    """A send at least this slow ..."""
    isolation_ms: tuple[int, ...] = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
    """... isolates its broker this long (same position)."""
    failure_latency_ms: int = 30_000
    """A failed send counts as this slow (600 s of isolation with the default levels)."""
    detector_enabled: bool = True
    """Upstream's ``startDetectorEnable``: probe isolated brokers to learn they are reachable."""
    detect_interval_ms: int = 2_000
    """A broker is probed at most once per this interval."""
    detect_timeout_ms: int = 200
    """A probe unanswered this long fails."""
    departed_avoid_ms: int = 30_000
    """A broker the name server announced gone is avoided until a route shows it back, at
    most this long (a route poll's period)."""
    first_probe_wait_ms: int = 50
    """With the detector on, a send to a route none of whose brokers has answered yet waits
    for the first probe answer at most this long, then is sent as it would have been; 0: never
    wait (brokers heard from are still preferred once one answers)."""

    def __post_init__(self) -> None:
        levels, isolation = self.latency_levels_ms, self.isolation_ms
        if len(levels) != len(isolation) or not levels:
            raise FaultConfigError(
                "latency_levels_ms and isolation_ms must be non-empty and of the same length"
            )
        if list(levels) != sorted(set(levels)) or min(levels) < 0:
            raise FaultConfigError("latency_levels_ms must be ascending and not negative")
        if min(isolation) < 0:
            raise FaultConfigError("isolation_ms must not be negative")
        for name in ("detect_interval_ms", "detect_timeout_ms"):
            if getattr(self, name) <= 0:
                raise FaultConfigError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("failure_latency_ms", "departed_avoid_ms", "first_probe_wait_ms"):
            if getattr(self, name) < 0:
                raise FaultConfigError(f"{name} must not be negative, got {getattr(self, name)}")

    @classmethod
    def preset(cls, name: str, *, detector: bool = True) -> FaultStrategyConfig:
        """``off``, ``4x`` (upstream 4.x tiers, no detector there) or ``5x`` (5.x tiers)."""
        if name == "off":
            return cls(enabled=False, detector_enabled=False)
        if name == "4x":
            return cls(detector_enabled=detector)
        if name == "5x":
            return cls(
                latency_levels_ms=(50, 100, 550, 1_800, 3_000, 5_000, 15_000),
                isolation_ms=(0, 0, 2_000, 5_000, 6_000, 10_000, 30_000),
                failure_latency_ms=10_000,
                detector_enabled=detector,
            )
        raise FaultConfigError(f"fault strategy must be one of off, 4x, 5x; got {name!r}")

    def isolation_for(self, latency_ms: int) -> int:
        """The isolation a send of this latency earns: the level at or below it."""
        at = bisect.bisect_right(self.latency_levels_ms, latency_ms)
        return self.isolation_ms[at - 1] if at else 0


class SendOutcome(Enum):
    OK = "ok"
    """The broker took the message."""
    FAILED = "failed"
    """The broker answered with an error, or the send went wrong past the connection: the broker
    is reachable but isolated as a failure."""
    UNREACHABLE = "unreachable"
    """No connection, or no answer in time: isolated as a failure and not reachable until the
    detector hears from it."""


@dataclass(slots=True)
class FaultItem:
    broker_name: str
    latency_ms: int = 0
    available_at_ms: int = 0
    reachable: bool = True
    next_probe_ms: int = 0
    going_away_until_ms: int = 0
    awaiting_contact: bool = False
    """Went away (GoAway, departure): not available until heard from again."""
    probe_failing: bool = False
    """Isolated (or never heard from) and missed its last probe: not available until a probe
    is answered."""
    heard_from: bool = False
    """Has answered a probe or taken a message since the table has known it."""


@dataclass(slots=True)
class FaultTable:
    config: FaultStrategyConfig = field(default_factory=FaultStrategyConfig)
    _items: dict[str, FaultItem] = field(default_factory=dict)
    counters: Counter[str] = field(default_factory=Counter)
    """``reported.<outcome>`` and ``reported.waiting``: the reports the table was given."""

    def __len__(self) -> int:
        return len(self._items)

    def item(self, broker_name: str) -> FaultItem | None:
        return self._items.get(broker_name)

    def report(self, broker_name: str, latency_ms: int, outcome: SendOutcome, now_ms: int) -> None:
        """A send to ``broker_name`` finished: record its latency and what it tells (nothing
        with the strategy off)."""
        self.counters[f"reported.{outcome.value}"] += 1
        if not self.config.enabled:
            return
        latency_ms = max(0, int(latency_ms))
        failed = outcome is not SendOutcome.OK
        isolation = self.config.isolation_for(
            self.config.failure_latency_ms if failed else latency_ms
        )
        item = self._items.get(broker_name)
        if item is None:
            item = self._items[broker_name] = FaultItem(broker_name)
        item.latency_ms = latency_ms
        if isolation > 0:
            item.available_at_ms = max(item.available_at_ms, now_ms + isolation)
        item.reachable = outcome is not SendOutcome.UNREACHABLE
        if not failed:
            item.heard_from = True
        if not failed and now_ms >= item.going_away_until_ms:
            item.awaiting_contact = False
        if not failed and isolation == 0:
            item.probe_failing = False

    def going_away(self, broker_name: str, grace_ms: int, now_ms: int) -> None:
        """The broker announced a graceful shutdown: keep new sends off it for the grace period
        and, with the detector on, until it is heard from again (it restarts, then answers a
        probe, or a route shows it back): a restarting broker is not tried while it is down."""
        item = self._items.get(broker_name)
        if item is None:
            item = self._items[broker_name] = FaultItem(broker_name)
        until = now_ms + max(0, grace_ms)
        item.going_away_until_ms = max(item.going_away_until_ms, until)
        item.available_at_ms = max(item.available_at_ms, until)
        item.reachable = False
        item.next_probe_ms = max(item.next_probe_ms, until)
        item.awaiting_contact = self.config.detector_enabled

    def returned(self, broker_name: str, now_ms: int) -> None:
        """The broker is back in the route after leaving it: its GoAway or departure no longer
        holds."""
        item = self._items.get(broker_name)
        if item is None:
            return
        if item.going_away_until_ms > now_ms:
            item.available_at_ms = min(item.available_at_ms, now_ms)
        item.going_away_until_ms = 0
        item.next_probe_ms = 0
        item.reachable = True
        item.awaiting_contact = False

    def forget(self, broker_name: str) -> None:
        """Drop what is known of the broker (a new master of its group took over): it is
        available and reachable, and the detector meets it anew."""
        self._items.pop(broker_name, None)

    def is_available(self, broker_name: str, now_ms: int) -> bool:
        item = self._items.get(broker_name)
        return item is None or (
            now_ms >= item.available_at_ms and not item.awaiting_contact and not item.probe_failing
        )

    def is_reachable(self, broker_name: str, now_ms: int) -> bool:
        item = self._items.get(broker_name)
        if item is None:
            return True
        return item.reachable and now_ms >= item.going_away_until_ms

    def is_heard_from(self, broker_name: str) -> bool:
        item = self._items.get(broker_name)
        return item is not None and item.heard_from

    def track(self, broker_names: set[str], now_ms: int) -> list[str]:
        """Brokers of a route about to be used that the table does not know yet: they get an
        item, their next round's probe is skipped, and the caller probes them now."""
        new = sorted(name for name in broker_names if name not in self._items)
        for name in new:
            self._items[name] = FaultItem(
                name, next_probe_ms=now_ms + self.config.detect_interval_ms
            )
        return new

    def due_probes(self, now_ms: int) -> list[str]:
        """Brokers to probe now, each at most once per ``detect_interval_ms``: every broker
        with an item (as upstream's detector), so a reachable flag cleared by a failed send or
        a GoAway is set again once the broker answers."""
        due = []
        for item in self._items.values():
            if now_ms >= item.next_probe_ms:
                item.next_probe_ms = now_ms + self.config.detect_interval_ms
                due.append(item.broker_name)
        return due

    def probe_answered(self, broker_name: str, now_ms: int) -> bool:
        """The broker answered a probe; True when that made it reachable again."""
        item = self._items.get(broker_name)
        if item is None:
            return False
        item.heard_from = True
        if now_ms < item.going_away_until_ms:
            return False
        item.probe_failing = False
        if item.reachable and not item.awaiting_contact:
            return False
        item.reachable = True
        item.awaiting_contact = False
        return True

    def probe_failed(self, broker_name: str, now_ms: int) -> bool:
        """The broker did not answer a probe in time. One isolated for being slow or failing
        is still so: it stays unavailable until a probe is answered, and its isolation starts
        again from now (True when this isolated it anew). Without this a broker that stays
        slow is chosen again each time its isolation ends. One never heard from is not
        reachable: held off until a probe is answered (True when this held it off anew)."""
        item = self._items.get(broker_name)
        if item is None or not self.config.enabled:
            return False
        if item.awaiting_contact:
            return False  # went away: held off until it answers, not punished while it restarts
        if item.available_at_ms == 0:
            if item.heard_from:
                return False  # one missed probe does not isolate a broker known to work
            item.reachable = False
            was_failing, item.probe_failing = item.probe_failing, True
            return not was_failing
        latency = item.latency_ms if item.reachable else self.config.failure_latency_ms
        isolation = self.config.isolation_for(latency)
        if isolation <= 0:
            return False
        item.available_at_ms = max(item.available_at_ms, now_ms + isolation)
        was_failing, item.probe_failing = item.probe_failing, True
        return not was_failing

    def waiting(self, broker_name: str, latency_ms: int, now_ms: int) -> None:
        """A send to the broker has waited ``latency_ms`` without an answer: it is at least
        that slow, so isolate it now rather than when the answer (or timeout) comes."""
        self.counters["reported.waiting"] += 1
        if not self.config.enabled:
            return
        isolation = self.config.isolation_for(latency_ms)
        if isolation <= 0:
            return
        item = self._items.get(broker_name)
        if item is None:
            item = self._items[broker_name] = FaultItem(broker_name)
        item.latency_ms = max(item.latency_ms, latency_ms)
        item.available_at_ms = max(item.available_at_ms, now_ms + isolation)

    def first_isolating_latency(self) -> int | None:
        """The lowest latency that earns an isolation (None: none does)."""
        for latency, isolation in zip(
            self.config.latency_levels_ms, self.config.isolation_ms, strict=True
        ):
            if isolation > 0:
                return latency
        return None

    def is_going_away(self, broker_name: str, now_ms: int) -> bool:
        item = self._items.get(broker_name)
        return item is not None and now_ms < item.going_away_until_ms

    def retain(self, broker_names: set[str]) -> list[str]:
        """Drop items of brokers not in ``broker_names`` (no held route names them)."""
        gone = [name for name in self._items if name not in broker_names]
        for name in gone:
            del self._items[name]
        return gone
