"""Route changes gathered into compact ``route_changes`` journal records (docs/journal.md).

A broker restart changes the route of every topic it serves in one tick; one record per topic
made the journal's volume follow topics, so its flood cut dropped exactly those records. Here
the changes detected in one millisecond that share kind, causes and ``notify`` become one record
listing their topics and versions, at most ``max_topics`` of them, so the records follow ticks
and a record's size stays bounded. Pure: the journal gives the time and writes what comes out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from namesrv.ops.events import RouteChanged

ROUTE_CHANGES_EVENT = "route_changes"

DEFAULT_MAX_TOPICS = 1_000
"""Topics one ``route_changes`` record lists at most (``journal.max_topics_per_record``)."""

_Key = tuple[str, tuple[str, ...], bool, bool]
"""(kind, causes, notify, with mutation times)."""


@dataclass(slots=True)
class _Batch:
    key: _Key
    topics: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    waits: list[int] = field(default_factory=list)
    rules: list[str] | None = None

    def fields(self) -> dict[str, Any]:
        kind, causes, notify, timed = self.key
        out: dict[str, Any] = {"kind": kind, "causes": list(causes), "notify": notify}
        if self.rules is not None:
            out["rules"] = self.rules
        out["topics"] = self.topics
        out["versions"] = self.versions
        if timed:
            out["waited_ms"] = self.waits
        return out


Record = tuple[int, dict[str, Any]]
"""A record to write: its ``ts_ms`` (the detection) and its fields."""


class RouteChangeBatches:
    """Open ``route_changes`` records of the current millisecond, one per kind, causes,
    ``notify`` and whether mutation times are known.

    :meth:`add` takes one settled change (the change detector's ``RouteChanged``) and returns
    the records it completed: those of an earlier millisecond, and a record that was full
    before this change. :meth:`drain` completes every open record (the tick's end).
    """

    def __init__(self, max_topics: int = DEFAULT_MAX_TOPICS) -> None:
        if max_topics < 1:
            raise ValueError(f"max_topics must be at least 1, got {max_topics}")
        self._max = max_topics
        self._ms = 0
        self._open: dict[_Key, _Batch] = {}
        self._last: _Batch | None = None
        """The record holding the latest change: a ``suppressed`` event that follows it names
        its rules."""

    def add(self, ts_ms: int, change: RouteChanged) -> list[Record]:
        done: list[Record] = []
        if ts_ms != self._ms and self._open:
            done = self.drain()
        self._ms = ts_ms
        mutated = change.mutated_at_ms
        key: _Key = (change.kind, tuple(change.causes), bool(change.notify), mutated is not None)
        batch = self._open.get(key)
        if batch is not None and len(batch.topics) >= self._max:
            done.append((ts_ms, batch.fields()))
            batch = None
        if batch is None:
            batch = self._open[key] = _Batch(key)
        batch.topics.append(change.topic)
        batch.versions.append(change.version)
        if mutated is not None:
            batch.waits.append(ts_ms - mutated)
        self._last = batch
        return done

    def add_rules(self, topic: str, version: int, rules: Sequence[str]) -> bool:
        """Name the suppression rules of the latest change, when it is ``topic`` at
        ``version`` and silent; False when no open record holds that change (the caller then
        writes a ``suppressed`` record of its own)."""
        batch = self._last
        if (
            batch is None
            or batch.key[2]
            or not batch.topics
            or batch.topics[-1] != topic
            or batch.versions[-1] != version
        ):
            return False
        if batch.rules is None:
            # The rules follow from the causes (part of the record's key) and the run's
            # ``[push.suppress]``: the first change's rules are every change's.
            batch.rules = list(rules)
        return True

    def drain(self) -> list[Record]:
        """Every open record, complete."""
        done = [(self._ms, batch.fields()) for batch in self._open.values()]
        self._open.clear()
        self._last = None
        return done
