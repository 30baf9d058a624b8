"""What the registry tells its owner after each mutation: the topics whose route it touched,
with their :class:`~namesrv.routes.change_cause.ChangeCause`, and broker arrivals and departures.

The push code (``namesrv.push``) consumes these; the registry declares them here so that routes
import nothing from push.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from namesrv.routes.change_cause import ChangeCause
from protocol.push_events import BrokerChangeKind

Listener = Callable[[Collection[str], ChangeCause], None]
"""Told the topics whose assembled route a mutation may have changed, and why."""


class TableProgress(Protocol):
    """A broker's topic table being applied in slices, as its arrival sees it: each slice's
    topics are marked changed as it is applied."""

    @property
    def names(self) -> Sequence[str]:
        """The topics it applies, in order."""

    @property
    def applied(self) -> int:
        """How many of :attr:`names` are applied (and marked)."""

    @property
    def done(self) -> bool:
        """Applied whole, or given up (superseded, the broker gone)."""


@dataclass(frozen=True, slots=True)
class BrokerEvent:
    """What the registry reports when a broker address leaves or joins a broker name."""

    kind: BrokerChangeKind
    cause: ChangeCause
    cluster: str
    broker_name: str
    addrs: tuple[tuple[int, str], ...]
    """(broker id, address) of every address that left or arrived."""
    topics: tuple[str, ...]
    """Topics whose route the event may have changed (what the registry reported)."""
    name_gone: bool = False
    """Departures: the broker name has no address left; its queue data left every topic."""
    read_only: bool = False
    """Departures: the remaining group has no master under acting master: queues read-only."""
    replaced: tuple[tuple[int, str], ...] = ()
    """Arrivals: (broker id, address) that id was registered at before, now replaced."""
    channel: object = None
    """The channel the address was registered over (its register's, for an arrival)."""
    table: TableProgress | None = None
    """Arrivals: the broker's table while it is applied in slices (its later topics are not
    marked yet)."""


BrokerListener = Callable[[BrokerEvent], None]


class Announcer:
    """The registry's two outlets, shared by its parts: ``listener`` hears touched topics,
    ``broker_listener`` (told after it) hears broker events; either may be None.

    It also counts the registry's changes (:attr:`generation`): whatever is derived from the
    whole registry (topic lists, cluster info) is valid while the count stands."""

    __slots__ = ("broker_listener", "generation", "listener")

    def __init__(self, listener: Listener | None, broker_listener: BrokerListener | None) -> None:
        self.listener = listener
        self.broker_listener = broker_listener
        self.generation = 0
        """Moves on every change of the registry's topics, brokers or clusters."""

    def changed(self) -> None:
        """The registry changed in a way no topic report says (a broker group, a cluster)."""
        self.generation += 1

    def topics(
        self, topics: Collection[str], cause: ChangeCause, *, in_order: bool = False
    ) -> list[str]:
        """Tell the listener; ``topics`` sorted first unless ``in_order`` (a job slice's list
        in its table's order, deterministic already). Returns the list told."""
        ordered = list(topics) if in_order else sorted(topics)
        if ordered:
            self.generation += 1
            if self.listener is not None:
                self.listener(ordered, cause)
        return ordered

    def broker(self, event: BrokerEvent) -> None:
        self.generation += 1
        if self.broker_listener is not None:
            self.broker_listener(event)
