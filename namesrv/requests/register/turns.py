"""Large registers, read and applied a slice per reactor turn.

A register whose body or topic table is large is answered over several turns: its body is
read a slice at a time (:meth:`RequestProcessor.step`), and the registry applies its table a
slice at a time (``RouteRegistry.run_jobs``). Other requests are read and answered between
slices, so a broker with a hundred thousand topics never stalls lookups.

A pending register holds its request's bytes until it is answered: they are charged to its
connection (:meth:`Requester.pending_began`), which counts them as input and stops being read
past its share. A register of a connection that closes is dropped, unless its table is already
being applied (the registry has it then; only its answer is lost).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Protocol

from namesrv.ops.clock import Clock
from namesrv.requests.processors import PendingResponse, RequestProcessor
from namesrv.routes.registry import RouteRegistry
from protocol.frame import encode_command

log = logging.getLogger(__name__)


class Requester(Protocol):
    """Where a register's answer goes, and who holds its bytes meanwhile."""

    closing: bool
    closed: bool

    def send(self, data: bytes) -> None: ...

    def pending_began(self, size: int) -> None:
        """A request of ``size`` bytes is held until :meth:`pending_ended`."""

    def pending_ended(self, size: int) -> None: ...


class _Work:
    __slots__ = ("conn", "pending", "size")

    def __init__(self, conn: Requester, pending: PendingResponse, size: int) -> None:
        self.conn = conn
        self.pending = pending
        self.size = size


class RegisterTurns:
    def __init__(
        self,
        processor: RequestProcessor,
        registry: RouteRegistry,
        clock: Clock,
        counters: Counter[str],
        on_settled: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_settled`` is called when register tables were applied in slices and no register
        work is left."""
        self._processor = processor
        self._registry = registry
        self._clock = clock
        self._counters = counters
        self._works: list[_Work] = []
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
        return any(work.conn is conn for work in self._works)

    def answer_when_applied(self, conn: Requester, pending: PendingResponse, size: int) -> None:
        """Run ``pending`` by slices and send its answer to ``conn`` once it is applied; its
        request's ``size`` bytes are charged to ``conn`` until then."""
        self._works.append(_Work(conn, pending, size))
        conn.pending_began(size)
        self.schedule()

    def drop_connection(self, conn: Requester) -> int:
        """``conn`` is gone: its registers not yet applied are dropped (counted); those whose
        table the registry is applying run on, unanswered. Returns how many were dropped."""
        dropped = 0
        for work in [w for w in self._works if w.conn is conn and w.pending.last != "wait"]:
            self._drop(work)
            dropped += 1
        return dropped

    def _drop(self, work: _Work) -> None:
        self._works.remove(work)
        self._processor.abandon(work.pending)
        self._counters["registers_dropped"] += 1
        work.conn.pending_ended(work.size)

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
        for work in self._works:
            pending = work.pending
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
        for work in list(self._works):
            conn, pending = work.conn, work.pending
            if pending.last != "wait" and (conn.closing or conn.closed):
                self._drop(work)  # its connection is going: nobody waits for it
                continue
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
            self._works.remove(work)
            conn.pending_ended(work.size)
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
