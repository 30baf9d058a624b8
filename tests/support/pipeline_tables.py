"""The per-change Parquet table's figures worked out by hand: plain Python over its rows, to
hold the job's own figures to (``ties.change_table`` and ``aggregations.staleness_fields``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Row = Mapping[str, Any]


def held_by_hand(row: Row, episodes: Iterable[Mapping[str, Any]], last_ts_ms: int) -> bool:
    """A notified change detected while push was degraded: from an episode's degradation to
    its recovery, or past the journal's end (``summary.json``'s episodes)."""
    return bool(row["notify"]) and any(
        e["namesrv"] == row["namesrv"]
        and e["degraded_at_ms"] <= row["changed_at_ms"] < (e["recovered_at_ms"] or last_ts_ms + 1)
        for e in episodes
    )


def staleness_by_hand(rows: Sequence[Row]) -> list[int | None]:
    """Per row: its mutation to the earliest moment a version of its topic and name server,
    detected no earlier, had reached its last client; None when none reached a client."""
    out: list[int | None] = []
    for row in rows:
        reached = [
            other["changed_at_ms"] + other["last_learned_ms"]
            for other in rows
            if other["namesrv"] == row["namesrv"]
            and other["topic"] == row["topic"]
            and other["changed_at_ms"] >= row["changed_at_ms"]
            and other["clients"] > 0
        ]
        out.append(min(reached) - row["mutated_at_ms"] if reached else None)
    return out


@dataclass(frozen=True, slots=True)
class Spread:
    count: int
    p50: int | None
    p99: int | None
    max: int | None


def spread(values: Iterable[int]) -> Spread:
    """Count, the values of rank ``ceil(q x count)`` and the largest."""
    ordered = sorted(values)
    if not ordered:
        return Spread(0, None, None, None)

    def rank(q: float) -> int:
        return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered) - 1e-9))) - 1]

    return Spread(len(ordered), rank(0.5), rank(0.99), ordered[-1])


def close(job: float | None, exact: int | None) -> bool:
    """The job's percentile (a histogram bucket: exact below 2,048, within 0.1 % under the
    value above) against the exact one."""
    if job is None or exact is None:
        return job is None and exact is None
    if abs(exact) < 2_048:
        return job == exact
    return exact * (1 - 0.001) <= job <= exact


@dataclass(frozen=True, slots=True)
class HeldByHand:
    held: int
    reached: int
    superseded: int
    unresolved: int
    unlearned_topic: int
    """Of ``unresolved``, those of a topic no row shows any client learning."""
    staleness: Spread
    every: Spread


def held_figures(rows: Sequence[Row], episodes: Sequence[Mapping[str, Any]], last_ts: int):
    """The headline's held-change and staleness figures from the table's rows alone (its own
    ``held`` and ``staleness_ms`` columns are not read)."""
    stale = staleness_by_hand(rows)
    held = [held_by_hand(r, episodes, last_ts) for r in rows]
    in_held = [(r, s) for r, s, h in zip(rows, stale, held, strict=True) if h]
    learned_topics = {(r["namesrv"], r["topic"]) for r in rows if r["clients"] > 0}
    return (
        HeldByHand(
            held=len(in_held),
            reached=sum(1 for r, _ in in_held if r["clients"] > 0),
            superseded=sum(1 for r, s in in_held if r["clients"] == 0 and s is not None),
            unresolved=sum(1 for _, s in in_held if s is None),
            unlearned_topic=sum(
                1
                for r, s in in_held
                if s is None and (r["namesrv"], r["topic"]) not in learned_topics
            ),
            staleness=spread(s for _, s in in_held if s is not None),
            every=spread(s for s in stale if s is not None),
        ),
        stale,
        held,
    )
