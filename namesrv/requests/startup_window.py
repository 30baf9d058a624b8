"""The start-up window: how long a just-started name server may not claim a topic is absent.

Brokers register every 30 s, so a server that started seconds ago has not heard every broker
yet: "no route" may only mean "not heard of yet". For ``server.wait_for_service_ms`` after
the server starts it is *warming up*; a lookup of a topic it has not heard of is then
answered "not ready" (upstream's SYSTEM_ERROR while ``waitSecondsForService`` runs), which
upstream clients log and retry while keeping the route they hold.

Pure: the window reads the server's clock, so tests move it with a fake one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from namesrv.ops.clock import Clock, DelayedCall, now_ms

log = logging.getLogger(__name__)


class StartupWindow:
    """Whether the server is warming up, for how long still, and how long it has been up."""

    __slots__ = ("_clock", "_end_call", "_exempt", "_started_ms", "_warm_until_ms", "window_ms")

    def __init__(self, clock: Clock, window_ms: int, exempt: Iterable[str] = ()) -> None:
        """The window starts now (the server is built, and listens in the same turn);
        ``clock`` has ``seconds()``; ``window_ms`` 0: never warming up. ``exempt`` topics are
        answered as absent inside the window too (:meth:`not_ready_for`)."""
        self._clock = clock
        self.window_ms = window_ms
        self._exempt = frozenset(exempt)
        self._started_ms = self._now_ms()
        self._warm_until_ms = self._started_ms + window_ms
        self._end_call: DelayedCall | None = None

    def _now_ms(self) -> int:
        return now_ms(self._clock)

    def figures(self) -> dict[str, int]:
        """The window's figures for the server's stats."""
        return {"warming_up": int(self.warming_up), "uptime_ms": self.uptime_ms()}

    def announce(self, heard: Callable[[], tuple[int, int]]) -> None:
        """Log the window, and its end from a timer on the clock with what ``heard`` says was
        heard by then (brokers, topics)."""
        left = self.left_ms()
        if left <= 0:
            return
        log.info(
            "warming up for %d ms (server.wait_for_service_ms): a lookup of a topic no broker "
            "has registered yet is answered SYSTEM_ERROR 'not ready', not TOPIC_NOT_EXIST",
            left,
        )
        self._end_call = self._clock.callLater(left / 1000.0, self._ended, heard)

    def _ended(self, heard: Callable[[], tuple[int, int]]) -> None:
        self._end_call = None
        brokers, topics = heard()
        log.info(
            "warmed up after %d ms: %d brokers, %d topics heard; a topic without a route is "
            "answered TOPIC_NOT_EXIST from now on",
            self.uptime_ms(),
            brokers,
            topics,
        )

    def stop(self) -> None:
        """The server stops: no end is logged."""
        if self._end_call is not None and self._end_call.active():
            self._end_call.cancel()
        self._end_call = None

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
