"""What route push needs of a connection, declared once: the subscriber.

The subscription registry keys on it, the change detector owes it notifications, the tick
sends it frames. ``namesrv.net.connection.NamesrvConnection`` is one; the push rooms never
import it, so they are tested with plain objects.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from protocol.codes import SerializeType


class Subscriber(Hashable, Protocol):
    """A connection that may subscribe to topics and be sent notification frames."""

    @property
    def conn_id(self) -> int:
        """Names the connection in the journal and to the registry."""

    @property
    def peer(self) -> str:
        """``HOST:PORT`` of the remote end, for logs."""

    @property
    def serialize_type(self) -> SerializeType:
        """The encoding its notifications are written in."""

    @property
    def output_blocked(self) -> bool:
        """Its output is over its bound: a frame now would wait in memory."""

    closed: bool

    def send(self, data: bytes) -> None:
        """Queue one encoded frame for writing."""
