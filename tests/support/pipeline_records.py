"""Journal and telemetry records as the name server and clients write them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NS = "127.0.0.1:9876"


def write_lines(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for rec in records:
            fh.write((rec if isinstance(rec, str) else json.dumps(rec)) + "\n")
    return path


def journal_file(directory: Path, records: list[Any], start: int = 1, seq: int = 1) -> Path:
    return write_lines(directory / f"journal-{start}-{seq:06d}.jsonl", records)


def changed(ts: int, topic: str, version: int, notify: bool = True, kind: str = "UPDATED") -> dict:
    return {
        "ts_ms": ts,
        "event": "route_changed",
        "topic": topic,
        "version": version,
        "kind": kind,
        "causes": ["wipe_write_perm"],
        "notify": notify,
    }


def fetch(topic: str, version: int, cause: str, at: int, notified: int | None = None) -> dict:
    return {
        "topic": topic,
        "version": version,
        "exists": True,
        "cause": cause,
        "notified_at_ms": notified,
        "requested_at_ms": at - 1,
        "fetched_at_ms": at,
        "namesrv": NS,
    }


def degradation(ts: int, degraded: bool, cpu: float, memory: float, pending: int = 0) -> dict:
    return {
        "ts_ms": ts,
        "event": "degradation",
        "degraded": degraded,
        "cpu_percent": cpu,
        "memory_percent": memory,
        "pending_connections": pending,
    }


def backlog_drained(ts: int, frames: int, duration: int) -> dict:
    return {"ts_ms": ts, "event": "backlog_drained", "frames": frames, "duration_ms": duration}


def sent(ts: int, frames: int, size: int) -> dict:
    return {
        "ts_ms": ts,
        "event": "notification_sent",
        "connections": frames,
        "frames": frames,
        "topics": 1,
        "bytes": size,
        "topic_list": ["t"],
        "broker_entries": 0,
    }


T0 = 1_700_000_000_000


@dataclass(frozen=True)
class DegradedRun:
    """A journal (and one client's telemetry) with a known degraded window.

    Tick 200 ms on a grid from ``T0``. Change ``i`` (0..``changes``-1), of topic ``t<i>`` to
    version 2, is mutated at ``T0 + 1000 i + 30`` and detected at the next tick,
    ``+ 200``; push is degraded from ``T0 + 50 s`` to ``T0 + 60 s`` (CPU 95 %, then 10 %),
    so changes 50..59 are held, and the backlog drains by ``T0 + 60.5 s``. Every tick
    outside the window sends one frame; none inside. The client fetches each change 6 ms
    after it went out (notified 1 ms after), so delivery is 5 ms and a held change's
    end-to-end lag runs from its mutation to the drain.
    """

    changes: int = 100
    degraded_at: int = T0 + 50_000
    recovered_at: int = T0 + 60_000
    drain_ms: int = 500

    @property
    def held(self) -> list[int]:
        return [
            i
            for i in range(self.changes)
            if self.degraded_at <= self.detected(i) < self.recovered_at
        ]

    def mutated(self, i: int) -> int:
        return T0 + 1_000 * i + 30

    def detected(self, i: int) -> int:
        return self.mutated(i) + 170

    def sent_at(self, i: int) -> int:
        return self.recovered_at + self.drain_ms if i in self.held else self.detected(i)

    def journal(self) -> list[dict]:
        out: list[dict] = [sent(T0, 1, 300)]
        for i in range(self.changes):
            rec = changed(self.detected(i), f"t{i}", 2, notify=True)
            out.append(dict(rec, causes=["register"], mutated_at_ms=self.mutated(i)))
        last = self.detected(self.changes - 1)
        out += [
            sent(ts, 1, 300)
            for ts in range(T0 + 200, last + 1, 200)
            if not self.degraded_at <= ts < self.recovered_at
        ]
        out += [
            degradation(self.degraded_at, True, 95.0, 40.0, 0),
            degradation(self.recovered_at, False, 10.0, 40.0, 1),
            backlog_drained(self.recovered_at + self.drain_ms, 1, self.drain_ms),
        ]
        return sorted(out, key=lambda r: r["ts_ms"])

    def telemetry(self) -> list[dict]:
        return [fetch(f"t{i}", 1, "first", T0 - 5_000) for i in range(self.changes)] + [
            fetch(f"t{i}", 2, "notify", self.sent_at(i) + 6, notified=self.sent_at(i) + 1)
            for i in range(self.changes)
        ]
