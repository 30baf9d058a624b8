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
