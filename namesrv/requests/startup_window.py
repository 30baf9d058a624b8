"""The start-up window: how long a just-started name server may not claim a topic is absent.

Brokers register every 30 s, so a server that started seconds ago has not heard every broker
yet: "no route" may only mean "not heard of yet". For ``server.wait_for_service_ms`` after
the server starts it is *warming up*; a lookup of a topic it has not heard of is then
answered "not ready" (upstream's SYSTEM_ERROR while ``waitSecondsForService`` runs), which
upstream clients log and retry while keeping the route they hold.

Pure: the window reads the server's clock (``seconds()``), so tests move it with a fake one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class StartupWindow:
    """Whether the server is warming up, for how long still, and how long it has been up."""

    __slots__ = ("_clock", "_exempt", "_started_ms", "_warm_until_ms", "window_ms")

    def __init__(self, clock: Any, window_ms: int, exempt: Iterable[str] = ()) -> None:
        """The window starts now (the server is built, and listens in the same turn);
        ``clock`` has ``seconds()``; ``window_ms`` 0: never warming up. ``exempt`` topics are
        answered as absent inside the window too (:meth:`not_ready_for`)."""
        self._clock = clock
        self.window_ms = window_ms
        self._exempt = frozenset(exempt)
        self._started_ms = self._now_ms()
        self._warm_until_ms = self._started_ms + window_ms

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)

    @property
    def warming_up(self) -> bool:
        """Inside the window (a window of 0 never is)."""
        return self.left_ms() > 0

    def not_ready_for(self, topic: str) -> bool:
        """Whether a lookup of ``topic``, not heard of, is answered "not ready": inside the
        window, unless it is a system topic a client creates when told it is absent."""
        return topic not in self._exempt and self.warming_up

    def left_ms(self) -> int:
        """Milliseconds left in the window; 0 once it is over."""
        return max(0, self._warm_until_ms - self._now_ms())

    def uptime_ms(self) -> int:
        """Milliseconds since the server started."""
        return max(0, self._now_ms() - self._started_ms)
