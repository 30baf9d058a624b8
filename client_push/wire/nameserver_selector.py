"""Which name server the client talks to: one picked at random and kept (#3870 3.1.1.1).

Keeping one name server for route requests and subscriptions alike means the versions a
client holds and the notifications it receives come from the same process.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence


class NameServerSelector:
    def __init__(self, addrs: Sequence[str], rng: random.Random) -> None:
        if not addrs:
            raise ValueError("at least one name-server address is needed")
        self._addrs = list(dict.fromkeys(addrs))
        self._rng = rng
        self._current = rng.choice(self._addrs)

    @property
    def current(self) -> str:
        return self._current

    @property
    def addrs(self) -> tuple[str, ...]:
        return tuple(self._addrs)

    def on_failure(self, addr: str) -> str:
        """``addr`` failed: pick another at random when there is one; the pick is returned."""
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

    def update(self, addrs: Sequence[str]) -> bool:
        """Replace the list; a changed list means a fresh random pick. True if the pick moved."""
        new = list(dict.fromkeys(addrs))
        if not new:
            raise ValueError("at least one name-server address is needed")
        if set(new) == set(self._addrs):
            return False
        self._addrs = new
        previous = self._current
        self._current = self._rng.choice(new)
        return self._current != previous
