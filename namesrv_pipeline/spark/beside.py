"""Work run in a thread of its own beside the caller's, its result or its error handed back when
the caller joins it.

The thread is an ``InheritableThread``: the Spark jobs it starts carry the caller's job group
(the progress display's step) and scheduler pool. Spark runs the jobs of both threads at once,
so a short job's planning and scheduling, or Python work such as drawing, fill the cores
another job leaves idle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from pyspark import InheritableThread

T = TypeVar("T")


class Beside(Generic[T]):
    """``call`` started in a thread named ``name``; ``join`` waits for it."""

    def __init__(self, call: Callable[[], T], name: str) -> None:
        self._call = call
        self._result: list[T] = []
        self._failed: list[BaseException] = []
        self._thread = InheritableThread(target=self._run, name=name)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result.append(self._call())
        except BaseException as exc:  # re-raised in the joining thread
            self._failed.append(exc)

    def join(self) -> T:
        """The call's result once it is done; its exception, raised here, if it failed."""
        self._thread.join()
        if self._failed:
            raise self._failed[0]
        return self._result[0]


__all__ = ["Beside"]
