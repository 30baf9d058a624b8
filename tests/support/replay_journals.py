"""Journals and telemetry of a simulated name-server fleet whose answer is known: each change
goes out at the tick after its mutation (a regular one, or one its name server brought forward
after a master arrived), or, detected while its name server's push is degraded, at the recovery
tick of its client's place in the paced drain; each client applies it a few ms later; a
suppressed change is learned by a poll. The recording is what the name server
and clients would write (docs/journal.md, docs/telemetry.md), so the pipeline's replay of the
recorded thresholds must give back the recorded end-to-end figures."""

from __future__ import annotations

import bisect
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

T0 = 1_700_000_000_000


@dataclass(frozen=True, slots=True)
class Degraded:
    """Push off from ``start_s`` to ``end_s`` (seconds after T0); the recovering sample read
    ``cpu_after`` % CPU."""

    start_s: float
    end_s: float
    cpu_after: float = 5.0


@dataclass(frozen=True, slots=True)
class Fleet:
    namesrvs: tuple[str, ...] = ("127.0.0.1:9876",)
    tick_ms: int = 200
    seconds: int = 120
    changes_per_s: float = 5.0
    topics: int = 20
    clients: int = 3
    """Per name server, each subscribed to all of its topics."""
    suppressed_share: float = 0.1
    recovery_per_s: int = 10
    degraded: dict[str, tuple[Degraded, ...]] = field(default_factory=dict)
    journal_degradation: bool = True
    """False: the journal lost its degradation records (the telemetry still shows the holds)."""
    config_tick_ms: int | None = None
    """The tick the config file given to the job says (None: the one the fleet ran with)."""
    arrivals: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Per name server, when (seconds after T0) a broker name got a new master: a tick runs
    ``early_tick_ms`` after it, unless a regular tick comes first or an arrival since the last
    regular tick brought one forward already (``push.master_arrival_tick_ms``)."""
    early_tick_ms: int = 50
    after_arrival_share: float = 0.0
    """The share of changes mutated within ``early_tick_ms`` after an arrival (the failover's
    routes), the others at any time."""
    journal_early_ticks: bool = True
    """False: the journal lost its ``early_tick`` records (the detections still follow them)."""
    seed: int = 7


@dataclass(frozen=True, slots=True)
class Recording:
    journals: dict[str, Path]
    telemetry: Path
    config: Path

    def args(self, out: Path) -> list[str]:
        journals = [f"{ns}={path}" for ns, path in self.journals.items()]
        return [
            *(a for j in journals for a in ("--journal", j)),
            *("--telemetry", str(self.telemetry)),
            *("--config", str(self.config), "--out", str(out)),
        ]


def _tick_at_or_after(ms: int, tick: int) -> int:
    return T0 + -(-(ms - T0) // tick) * tick


class _NameServer:
    def __init__(self, ns: str, fleet: Fleet, rng: random.Random) -> None:
        self.ns, self.fleet, self.rng = ns, fleet, rng
        self.journal: list[dict[str, Any]] = [
            {"ts_ms": T0, "event": "subscribe", "conn": c, "topics": self.topics()}
            for c in range(fleet.clients)
        ]
        self.learned: list[list[dict[str, Any]]] = [[] for _ in range(fleet.clients)]
        self.spans = [
            (T0 + int(d.start_s * 1000), T0 + int(d.end_s * 1000), d)
            for d in fleet.degraded.get(ns, ())
        ]
        self.arrivals = sorted(T0 + round(s * 1000) for s in fleet.arrivals.get(ns, ()))
        self.early = _early_ticks(self.arrivals, fleet)

    def detection(self, mutated: int) -> int:
        """The first tick at or after ``mutated``: regular, or brought forward."""
        regular = _tick_at_or_after(mutated, self.fleet.tick_ms)
        i = bisect.bisect_left(self.early, mutated)
        return min(regular, self.early[i]) if i < len(self.early) else regular

    def mutation(self) -> int:
        f, rng = self.fleet, self.rng
        if f.after_arrival_share and self.arrivals and rng.random() < f.after_arrival_share:
            return rng.choice(self.arrivals) + rng.randrange(f.early_tick_ms)
        return T0 + rng.randrange(1_000, f.seconds * 1_000)

    def topics(self) -> list[str]:
        return [f"{self.ns}/T{t}" for t in range(self.fleet.topics)]

    def drain_tick(self, end: int, client: int) -> int:
        """When the paced drain after a recovery at ``end`` reaches ``client``."""
        f = self.fleet
        per_tick = max(1, f.recovery_per_s * f.tick_ms // 1000)
        return _tick_at_or_after(end, f.tick_ms) + (client // per_tick) * f.tick_ms

    def quiet(self, detected: int) -> bool:
        """Inside a span or its drain: no change is made there but those the span holds."""
        return any(
            end <= detected <= self.drain_tick(end, self.fleet.clients) for _, end, _ in self.spans
        )

    def held_by(self, detected: int) -> tuple[int, int, Degraded] | None:
        return next((s for s in self.spans if s[0] <= detected < s[1]), None)


def _early_ticks(arrivals: list[int], fleet: Fleet) -> list[int]:
    """When the ticks the arrivals brought forward ran: one per regular interval at most, the
    first arrival's, unless the interval's regular tick comes first."""
    out: list[int] = []
    interval = None
    for arrived in arrivals:
        since = (arrived - T0) // fleet.tick_ms  # an arrival at a tick comes after it
        if since == interval:
            continue
        interval = since
        early = arrived + fleet.early_tick_ms
        if early < T0 + (since + 1) * fleet.tick_ms:
            out.append(early)
    return out


def _changes(server: _NameServer) -> list[tuple[int, int, str, int, bool]]:
    """(mutated, detected, topic, version, notify), one per topic and tick at most."""
    f, rng = server.fleet, server.rng
    versions: dict[str, int] = {}
    seen: set[tuple[str, int]] = set()
    out = []
    for _ in range(int(f.seconds * f.changes_per_s)):
        mutated = server.mutation()
        detected = server.detection(mutated)
        topic = rng.choice(server.topics())
        if (topic, detected) in seen or server.quiet(detected):
            continue
        seen.add((topic, detected))
        out.append((mutated, detected, topic, 0, rng.random() >= f.suppressed_share))
    out.sort(key=lambda c: (c[1], c[0]))
    numbered = []
    for mutated, detected, topic, _, notify in out:
        versions[topic] = versions.get(topic, 1) + 1
        numbered.append((mutated, detected, topic, versions[topic], notify))
    return numbered


def _fetch(server: _NameServer, topic: str, version: int, cause: str, at: int,
           notified: int | None) -> dict[str, Any]:  # fmt: skip
    return {
        "topic": topic, "version": version, "exists": True, "cause": cause,
        "notified_at_ms": notified, "requested_at_ms": at - 1, "fetched_at_ms": at,
        "namesrv": server.ns, "news": True,
    }  # fmt: skip


def _simulate(server: _NameServer) -> None:
    changes = _changes(server)
    rng, f = server.rng, server.fleet
    latest_held: dict[tuple[int, str], tuple[int, int, bool]] = {}
    for mutated, detected, topic, version, notify in changes:
        server.journal.append(
            {"ts_ms": detected, "event": "route_changed", "topic": topic, "version": version,
             "kind": "UPDATED", "causes": ["wipe_write_perm" if notify else "broker_startup"],
             "notify": notify, "mutated_at_ms": mutated}
        )  # fmt: skip
        span = server.held_by(detected)
        if span is not None:
            owed = notify or latest_held.get((span[1], topic), (0, 0, False))[2]
            latest_held[(span[1], topic)] = (version, mutated, owed)
        elif notify:
            for c in range(f.clients):
                at = detected + rng.randint(1, 20)
                server.learned[c].append(_fetch(server, topic, version, "notify", at, detected))
        else:
            later = [d for _, d, t, v, _ in changes if t == topic and v > version]
            at = mutated + rng.randint(200, 1_500)
            if not later or min(later) > at:
                for c in range(f.clients):
                    server.learned[c].append(_fetch(server, topic, version, "poll", at, None))
    for (end, topic), (version, _, owed) in latest_held.items():
        for c in range(f.clients if owed else 0):
            sent = server.drain_tick(end, c)
            at = sent + rng.randint(1, 20)
            server.learned[c].append(_fetch(server, topic, version, "notify", at, sent))
    _degradation_records(server)
    if f.journal_early_ticks:
        server.journal += [
            {"ts_ms": at, "event": "early_tick", "delay_ms": f.early_tick_ms} for at in server.early
        ]


def _degradation_records(server: _NameServer) -> None:
    f = server.fleet
    if not f.journal_degradation:
        return
    for start, end, d in server.spans:
        drained = server.drain_tick(end, f.clients - 1)
        server.journal += [
            {"ts_ms": start, "event": "degradation", "degraded": True, "cpu_percent": 95.0,
             "memory_percent": 40.0, "pending_connections": 0},
            {"ts_ms": end, "event": "degradation", "degraded": False,
             "cpu_percent": d.cpu_after, "memory_percent": 40.0,
             "pending_connections": f.clients},
            {"ts_ms": drained, "event": "backlog_drained", "frames": f.clients,
             "duration_ms": drained - end},
        ]  # fmt: skip


def _sent_ticks(server: _NameServer) -> None:
    """One ``notification_sent`` per tick that sent: a frame per client notified in it."""
    per_tick: dict[int, set[int]] = {}
    for c, records in enumerate(server.learned):
        for r in records:
            if r["notified_at_ms"] is not None:
                per_tick.setdefault(r["notified_at_ms"], set()).add(c)
    for ts, clients in sorted(per_tick.items()):
        server.journal.append(
            {"ts_ms": ts, "event": "notification_sent", "connections": len(clients),
             "frames": len(clients), "topics": 1, "bytes": 200 * len(clients),
             "topic_list": [], "broker_entries": 0}
        )  # fmt: skip


def write_recording(root: Path, fleet: Fleet) -> Recording:
    rng = random.Random(fleet.seed)
    journals: dict[str, Path] = {}
    telemetry = root / "telemetry"
    telemetry.mkdir(parents=True)
    for i, ns in enumerate(fleet.namesrvs):
        server = _NameServer(ns, fleet, rng)
        _simulate(server)
        _sent_ticks(server)
        journals[ns] = root / f"journal-{i}"
        journals[ns].mkdir()
        _write(
            journals[ns] / f"journal-{T0}-000001.jsonl",
            sorted(server.journal, key=lambda r: r["ts_ms"]),
        )
        for c, records in enumerate(server.learned):
            _write(
                telemetry / f"ns{i}-client-{c}.jsonl",
                sorted(records, key=lambda r: r["fetched_at_ms"]),
            )
    config = root / "namesrv.toml"
    config.write_text(
        f"[push]\ntick_interval_ms = {fleet.config_tick_ms or fleet.tick_ms}\n"
        f"recovery_notifications_per_second = {fleet.recovery_per_s}\n",
        encoding="utf-8",
    )
    return Recording(journals, telemetry, config)


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
