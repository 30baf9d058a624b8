"""Large registers, read and applied a slice per reactor turn.

A register whose body or topic table is large is answered over several turns: its body is
read a slice at a time (:meth:`RequestProcessor.step`), and the registry applies its table a
slice at a time (``RouteRegistry.run_jobs``). Other requests are read and answered between
slices, so a broker with a hundred thousand topics never stalls lookups.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from namesrv.requests.processors import PendingResponse, RequestProcessor
from namesrv.routes.registry import RouteRegistry
from protocol.frame import encode_command

log = logging.getLogger(__name__)


class Requester(Protocol):
    """Where a register's answer goes."""

    def send(self, data: bytes) -> None: ...


class RegisterTurns:
    def __init__(
        self,
        processor: RequestProcessor,
        registry: RouteRegistry,
        clock: Any,
        counters: Counter[str],
        on_settled: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_settled`` is called when register tables were applied in slices and no register
        work is left."""
        self._processor = processor
        self._registry = registry
        self._clock = clock
        self._counters = counters
        self._works: list[tuple[Requester, PendingResponse]] = []
        self._scheduled = False
        self._apply_next = False
        self._on_settled = on_settled
        self._applied = False
        """A table slice ran since the last time no register work was left."""

    @property
    def pending(self) -> int:
        """Registers still being read or applied, plus register tables still being applied."""
        return len(self._works) + self._registry.pending_jobs

    def serving(self, conn: Requester) -> bool:
        """Whether a register of ``conn`` is still being read or applied."""
        return any(c is conn for c, _pending in self._works)

    def answer_when_applied(self, conn: Requester, pending: PendingResponse) -> None:
        """Run ``pending`` by slices and send its answer to ``conn`` once it is applied."""
        self._works.append((conn, pending))
        self.schedule()

    def schedule(self) -> None:
        """Run a turn of register work soon, if there is any (the registry's own jobs too)."""
        if not self._scheduled and (self._works or self._registry.pending_jobs):
            self._scheduled = True
            self._clock.callLater(0, self._run_turn)
        elif self._applied and not self.pending:
            self._applied = False
            self._on_settled()

    def _run_turn(self) -> None:
        """One slice of register work per reactor turn: a slice of reading a body, or of
        applying a table, by turns when both wait. Each is a slice's time; both in one turn
        would double how long a request that arrives meanwhile waits."""
        self._scheduled = False
        if self._registry.pending_jobs and (self._apply_next or not self._reads_pending()):
            self._run_job_slice()
            self._run_works(read_budget=0)  # answers the registers whose table is now applied
            self._apply_next = False
        else:
            self._run_works(read_budget=1)
            self._apply_next = True
        self.schedule()

    def _reads_pending(self) -> bool:
        """Whether some register may read a slice now (see ``_run_works``)."""
        seen: set[tuple[str, str]] = set()
        for _conn, pending in self._works:
            if pending.key in seen:
                continue
            seen.add(pending.key)
            if pending.last != "wait":
                return True
        return False

    def _run_works(self, read_budget: int) -> None:
        """The pending registers: at most ``read_budget`` slices of body reading, in arrival
        order, each address's registers one after the other; those waiting for their table to
        be applied just look whether it is."""
        seen: set[tuple[str, str]] = set()
        for entry in list(self._works):
            conn, pending = entry
            if pending.key in seen:
                continue  # an earlier register of this address is in flight
            seen.add(pending.key)
            if pending.last != "wait":
                if not read_budget:
                    continue
                read_budget -= 1
            response = self._processor.step(pending)
            if response is None:
                continue
            self._works.remove(entry)
            if not pending.request.is_oneway:
                conn.send(encode_command(response))

    def _run_job_slice(self) -> None:
        """One slice of the pending register tables: other requests are read and answered
        between slices."""
        self._applied = True
        try:
            self._registry.run_jobs()
        except Exception:  # a failing slice must not stop the others for good
            self._counters["timer_errors"] += 1
            log.exception("error applying a register slice")
        self._counters["register_slices"] += 1
