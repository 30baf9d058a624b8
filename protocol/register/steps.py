"""Work in steps: a generator that yields between bounded slices of its work (the name server
reads other requests meanwhile) and returns what it found."""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")


def whole(steps: Generator[None, None, T]) -> T:
    """What ``steps`` returns, its steps taken back to back (where nothing waits on it)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result


def apart(steps: Generator[None, None, T]) -> Generator[None, None, T]:
    """``steps``, with one step more after its last slice when it took any: the work that
    follows starts in a turn of its own instead of adding to that slice's turn."""
    took = False
    while True:
        try:
            next(steps)
        except StopIteration as done:
            if took:
                yield
            result: T = done.value
            return result
        took = True
        yield
