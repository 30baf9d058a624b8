"""Which name server the client talks to: one picked at random and kept.

Keeping one name server for route requests and subscriptions alike means the versions a
client holds and the notifications it receives come from the same process.

One exception to keeping it: a server that says it is warming up (it started moments ago and
has not heard every broker yet) is left for one that has been up longer, when another is
configured (``server_up``). What is known of each server's start comes from its own
SubscribeAck (``uptime_ms``); a server never heard from, or heard from before it was last
lost, may have started earlier. A server whose connection failed since it was last heard
from is not moved to; moves are at least ``move_interval_ms`` apart. Pure: callers pass the
time; the tables hold configured addresses only.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence


class NameServerSelector:
    def __init__(
        self, addrs: Sequence[str], rng: random.Random, move_interval_ms: int = 10_000
    ) -> None:
        if not addrs:
            raise ValueError("at least one name-server address is needed")
        self._addrs = list(dict.fromkeys(addrs))
        self._rng = rng
        self._current = rng.choice(self._addrs)
        self._move_interval = move_interval_ms
        self._started: dict[str, int] = {}
        """addr → when it started (client clock ms), from its last SubscribeAck."""
        self._failed: set[str] = set()
        """Addresses whose connection failed since they were last heard from."""
        self._moved_at: int | None = None

    @property
    def current(self) -> str:
        return self._current

    @property
    def addrs(self) -> tuple[str, ...]:
        return tuple(self._addrs)

    def on_failure(self, addr: str) -> str:
        """``addr`` failed: pick another at random when there is one; the pick is returned."""
        if addr in self._addrs:
            self._failed.add(addr)
        if addr != self._current:
            return self._current
        others = [a for a in self._addrs if a != addr]
        if others:
            self._current = self._rng.choice(others)
        return self._current

    def prefer(self, candidates: Iterable[str], leaving: str) -> str:
        """A server going away named ``candidates``: move to one of them (not ``leaving``).

        Without a usable candidate this is a failure of ``leaving``.
        """
        usable = [a for a in dict.fromkeys(candidates) if a and a != leaving]
        if not usable:
            return self.on_failure(leaving)
        self._current = self._rng.choice(usable)
        return self._current

    def server_up(self, addr: str, uptime_ms: int, warming_up: bool, now_ms: int) -> str | None:
        """``addr`` said (in a SubscribeAck) it has been up ``uptime_ms`` and whether it is
        warming up. When it is the current one and warming up, the server to move to: the one
        known to have started earliest before it, else one not heard from; it becomes current.
        None: stay."""
        if addr not in self._addrs:
            return None
        self._failed.discard(addr)
        started = now_ms - uptime_ms
        self._started[addr] = started
        if not warming_up or addr != self._current:
            return None
        if self._moved_at is not None and now_ms - self._moved_at < self._move_interval:
            return None
        known = sorted(
            (at, a)
            for a, at in self._started.items()
            if a != addr and a not in self._failed and at < started
        )
        unknown = [a for a in self._addrs if a not in self._started and a not in self._failed]
        if known:
            target = known[0][1]
        elif unknown:
            target = self._rng.choice(unknown)
        else:
            return None
        self._current = target
        self._moved_at = now_ms
        return target

    def update(self, addrs: Sequence[str]) -> bool:
        """Replace the list; a changed list means a fresh random pick. True if the pick moved."""
        new = list(dict.fromkeys(addrs))
        if not new:
            raise ValueError("at least one name-server address is needed")
        if set(new) == set(self._addrs):
            return False
        self._addrs = new
        self._started = {a: at for a, at in self._started.items() if a in new}
        self._failed &= set(new)
        previous = self._current
        self._current = self._rng.choice(new)
        return self._current != previous
