"""What a NOTIFY frame means for a client, given what it has seen on its connection.

Versions of different name-server processes are not comparable (each start picks a new
epoch), and a frame lost to a gap in ``sequence`` may have named any topic: in both cases the
only safe reading is "every held topic may be stale".
"""

from __future__ import annotations

from enum import Enum


class Verdict(Enum):
    IN_ORDER = "in_order"
    GAP = "gap"
    """A frame was missed: refetch every held topic."""
    NEW_EPOCH = "epoch"
    """The server's epoch differs from the one the held versions came from: refetch all."""
    STALE = "stale"
    """A frame older than one already seen (never expected on one connection): ignored."""


class PushTracker:
    """Epoch and sequence bookkeeping for the current connection."""

    def __init__(self) -> None:
        self.epoch: str | None = None
        """The epoch the held versions belong to; None before any SUBSCRIBE ack."""
        self._last_sequence = 0

    def new_connection(self) -> None:
        """Sequences count per connection, from 1."""
        self._last_sequence = 0

    def on_ack(self, epoch: str) -> bool:
        """A SUBSCRIBE ack; True when it shows an epoch other than the held versions' one."""
        changed = self.epoch is not None and epoch != self.epoch
        self.epoch = epoch
        return changed

    def on_notify(self, epoch: str, sequence: int) -> Verdict:
        if self.epoch is not None and epoch and epoch != self.epoch:
            self.epoch = epoch
            self._last_sequence = sequence
            return Verdict.NEW_EPOCH
        if epoch:
            self.epoch = epoch
        if sequence <= self._last_sequence:
            return Verdict.STALE
        expected = self._last_sequence + 1
        self._last_sequence = sequence
        return Verdict.IN_ORDER if sequence == expected else Verdict.GAP


def needs_refetch(held_version: int | None, notified_version: int) -> bool:
    """Refetch unless the held route is already at least as new as the notified one."""
    return held_version is None or held_version < notified_version
