"""Topic-table chunks as read, and the cache that keeps them by identity.

A register body's topic table is read in chunks cut by content (see
:mod:`protocol.register.plain_fast` and :mod:`protocol.register.compressed_fast`). A chunk
seen before, in this broker's last register or another broker's with the same topics, is taken
from :class:`ChunkCache` instead of being decoded again; its :class:`TablePart` also lets the
registry skip chunks it applied already.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from itertools import chain
from typing import Any, NamedTuple


class TablePart(NamedTuple):
    """One chunk of a topic table as read: its identity (length and the process's keyed hash
    of its bytes), its topics and their shared specs in order, and keys renamed in it."""

    key: tuple[int, int]
    names: list[str]
    specs: list[Any]
    renamed: dict[str, str]
    distinct: tuple[Any, ...]
    end: int = -1
    """Of a compressed body's records: where in the chunk its records end (a last chunk
    carries the body's tail after them); -1 for a chunk of a plain body."""


class ChunkCache:
    """Topic-table chunks read lately, by identity, so a chunk seen before (in this broker's
    last register, or another broker's with the same topics) is not decoded again.

    Bounded by ``max_bytes``, each chunk charged at its JSON size (more than its decoded
    lists hold), least recently used first out.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._parts: OrderedDict[tuple[int, int], TablePart] = OrderedDict()
        self._checked: set[tuple[int, int]] = set()
        """Cached chunks whose topic names passed the register's checks."""

    def __len__(self) -> int:
        return len(self._parts)

    def get(self, key: tuple[int, int]) -> TablePart | None:
        part = self._parts.get(key)
        if part is None:
            self.misses += 1
            return None
        self.hits += 1
        self._parts.move_to_end(key)
        return part

    def put(self, part: TablePart) -> None:
        size = part.key[0]
        if size > self.max_bytes or part.key in self._parts:
            return
        self._parts[part.key] = part
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, old = self._parts.popitem(last=False)
            self.bytes -= old.key[0]
            self._checked.discard(old.key)

    def unchecked_names(self, parts: Iterable[TablePart]) -> list[str]:
        """The topic names of ``parts`` not known to pass the checks, in order."""
        checked = self._checked
        return list(chain.from_iterable(p.names for p in parts if p.key not in checked))

    def checked(self, parts: Iterable[TablePart]) -> None:
        """``parts`` passed the checks of a register; those cached need not be checked again."""
        self._checked.update(p.key for p in parts if p.key in self._parts)
