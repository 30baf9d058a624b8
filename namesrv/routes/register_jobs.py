"""Register tables applied in slices, and departed brokers' tables dropped in slices.

A register whose table needs more than ``slice_topics`` topic writes becomes a
:class:`RegisterJob` applied ``slice_topics`` topics at a time by :meth:`RegisterJobs.run` (the
server calls it once per reactor turn), so no register holds the event loop. Every topic is
written whole: a lookup meanwhile sees each topic's old route or its new one.

A slice is compared and written with C-level ``map``/``zip``/``dict.update``: Python runs per
topic only for topics whose queue data changed to another value, which is what keeps a
100,000-topic register within a few reactor turns.

A broker holding no table whose register's first slice equals another broker's table of the
same size (a cluster's brokers hold the same topics) holds that table object from then on: its
slices are compared with it and only list the broker as a holder of their topics, so no table
is written. Until the last slice the table holds topics whose holders do not list the broker yet
(lookups go by the holders: each topic's old route or its new one). A slice that differs is
written to the broker's own copy; a register stopped mid-way, or listing fewer topics, cuts the
table to the topics it applied.

The same turns carry other changes too large for one: a run-time switch that moves many routes
at once (order confs joining or leaving routes) is reported ``slice_topics`` topics per call
(:meth:`RegisterJobs.report_later`), as a departed broker's topics are dropped.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.events import Announcer
from namesrv.routes.register_request import RegisterRequest
from namesrv.routes.tables import PartsMemo, QueueSpec, RouteTables, Table, TopicQueues
from protocol.codes import Perm
from protocol.register.table import TablePart
from protocol.route_model import DataVersion

DEFAULT_SLICE_TOPICS = 2_500
"""Topic writes per slice of a large register: a few milliseconds of one reactor turn."""
_FIRST = operator.itemgetter(0)


@dataclass(slots=True)
class RegistryStats:
    topic_writes: int = 0
    """Topic entries of register tables visited: what a heartbeat must not grow."""
    register_fast_paths: int = 0
    """Registers of masters whose table needed no per-topic work (unchanged data version)."""
    jobs_started: int = 0
    job_slices: int = 0
    jobs_superseded: int = 0
    topics_skipped: int = 0
    """Topics of register tables not visited: their chunk was applied already, unchanged."""
    tables_shared: int = 0
    """Registers whose table, once written, turned out equal to another broker's and is now
    held as that one object."""


def spec_columns(topic_configs: Mapping[str, QueueSpec]) -> tuple[list[str], list[Any]]:
    """A register's table as two columns, topics and spec tuples, sliced by a job in C (the
    reader's specs already are tuples)."""
    names = list(topic_configs)
    values = list(topic_configs.values())
    if not values or isinstance(values[0], tuple):
        return names, values
    return names, [
        (tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag) for tc in values
    ]


class _QueuesOf(dict[Any, TopicQueues]):
    """Spec tuple -> the interned :class:`TopicQueues` for it (perm masked for a prime slave),
    made on first use: a dict so a slice maps its specs in C."""

    def __init__(self, tables: RouteTables, read_only: bool) -> None:
        super().__init__()
        self._tables = tables
        self._read_only = read_only

    def __missing__(self, spec: Any) -> TopicQueues:
        read, write, perm, flag = spec
        if self._read_only:
            perm &= ~Perm.WRITE
        queues = self[spec] = self._tables.queues((read, write, perm, flag))
        return queues


class RegisterJob:
    """The topic table of one large register, applied in slices by :meth:`RegisterJobs.run`.

    ``on_done`` callbacks run once, when the table is applied or the job is superseded (a newer
    register of the broker) or dropped (the broker left): the register's answer waits for it.
    """

    __slots__ = (
        "applied",
        "broker_name",
        "cancelled",
        "cause",
        "data_version",
        "done",
        "held",
        "mapping",
        "memo",
        "names",
        "on_done",
        "own_writes",
        "queues",
        "read_only",
        "rewrite_all",
        "specs",
        "total",
        "wrote",
    )

    def __init__(
        self,
        request: RegisterRequest,
        columns: tuple[list[str], list[Any]],
        *,
        rewrite_all: bool,
        read_only: bool,
        cause: ChangeCause = ChangeCause.REGISTER,
    ) -> None:
        """``columns``: the topics to write and their spec tuples, in the table's order. The
        static-topic mapping infos are written only when ``rewrite_all``."""
        self.broker_name = request.broker_name
        self.queues: _QueuesOf | None = None
        self.cause = cause
        """What the topics its slices change are reported with (a start-up stays silent)."""
        self.names, self.specs = columns
        """The table's topics and their spec tuples, in its order; ``applied`` of them are."""
        self.total = len(self.names)
        self.applied = 0
        self.rewrite_all = rewrite_all
        self.read_only = read_only
        self.mapping: Mapping[str, Any] = request.topic_queue_mapping_info if rewrite_all else {}
        self.data_version: DataVersion = request.data_version
        self.done = False
        self.cancelled = False
        self.memo: PartsMemo | None = None
        """What the broker's table holds once this job is done: its chunks, see
        ``RouteTables.applied_parts``."""
        self.on_done: list[Callable[[RegisterJob], None]] = []
        self.wrote = False
        """Whether a slice wrote the broker's table (then it may share an equal one)."""
        self.own_writes = -1
        """``RouteTables.writes`` right after this job's last write of a table it began:
        while it stands, that table holds exactly the slices applied, and none of the rest."""
        self.held: Table | None = None
        """Another broker's table the broker holds from the first slice on, that slice being
        equal to it: the slices then only list the broker as a holder of their topics (a
        slice that differs is written to the broker's own copy)."""

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        self.names, self.specs = [], []
        callbacks, self.on_done = self.on_done, []
        for callback in callbacks:
            callback(self)


class RegisterJobs:
    """Pending register tables (at most one per broker name) and departed brokers' tables,
    worked off oldest first within a topic budget per call."""

    def __init__(
        self, tables: RouteTables, announce: Announcer, stats: RegistryStats, slice_topics: int
    ) -> None:
        self._t = tables
        self._announce = announce
        self._stats = stats
        self.slice_topics = max(1, slice_topics)
        self._jobs: dict[str, RegisterJob] = {}
        """broker name → its register being applied in slices."""
        self._drops: list[tuple[str, Iterator[str], ChangeCause]] = []
        """Departed brokers whose (large) tables still list them as holders of topics."""
        self._reports: dict[str, tuple[Iterator[str], ChangeCause]] = {}
        """What moved many routes at once (by the name of the switch) -> the topics still to
        report."""
        self.pending = 0
        """Registers whose topic table is still being applied, and departed brokers whose
        queue data is still being dropped: a plain attribute, since the server asks after
        every request; recounted by :meth:`_recount` right after each change of either."""

    def _recount(self) -> None:
        self.pending = len(self._jobs) + len(self._drops) + len(self._reports)

    def unapplied_columns(
        self,
        topic_configs: Mapping[str, QueueSpec],
        parts: Sequence[TablePart] | None,
        memo: PartsMemo | None,
        read_only: bool,
        lacking: bool,
    ) -> tuple[list[str], list[Any]]:
        """The topics and specs a register must write: all of its table, less the chunks the
        broker's table holds exactly as they are (``memo``, from its last register)."""
        if parts is None or memo is None or lacking or memo[1] != read_only:
            return spec_columns(topic_configs)
        held = memo[0]
        fresh = [part for part in parts if part.key not in held]
        if len(fresh) == len(parts):
            return spec_columns(topic_configs)
        names = list(chain.from_iterable(part.names for part in fresh))
        self._stats.topics_skipped += len(topic_configs) - len(names)
        return names, list(chain.from_iterable(part.specs for part in fresh))

    def submit(self, job: RegisterJob) -> list[str]:
        """Apply a small table now and return the topics it changed (the job is then done);
        queue a large one for :meth:`run` (returns nothing yet)."""
        if job.total <= self.slice_topics:
            return self._apply_slice(job, job.total + 1)
        self._t.unsettled.add(job.broker_name)
        self._jobs[job.broker_name] = job
        self._recount()
        self._stats.jobs_started += 1
        return []

    def supersede(self, broker_name: str) -> None:
        """A newer register of the broker replaces the one still being applied."""
        job = self._jobs.pop(broker_name, None)
        if job is not None:
            if job.held is not None:  # the topics not applied yet leave the table it held
                self._t.keep_only(broker_name, job.names[: job.applied])
            self._recount()
            self._stats.jobs_superseded += 1
            job.cancelled = True
            job._finish()

    def cancel(self, broker_name: str) -> None:
        """The broker name left: its register still being applied is dropped."""
        job = self._jobs.pop(broker_name, None)
        if job is not None:
            self._recount()
            job.cancelled = True
            job._finish()

    def drop_later(self, broker_name: str, topics: list[str], cause: ChangeCause) -> None:
        """Unlist a departed broker from ``topics`` in slices, reporting each with ``cause``."""
        self._drops.append((broker_name, iter(topics), cause))
        self._recount()

    def report_later(self, switch: str, topics: list[str], cause: ChangeCause) -> None:
        """Report ``topics`` as changed with ``cause``: the routes ``switch`` moved. Up to
        ``slice_topics`` are reported now, more a slice per call of :meth:`run`. Flipping the
        same switch again while its report is under way starts its report over (every topic
        it moves may have moved again)."""
        self._reports.pop(switch, None)
        if len(topics) <= self.slice_topics:
            self._announce.topics(topics, cause, in_order=True)
        else:
            self._reports[switch] = (iter(topics), cause)
        self._recount()

    def run(self, budget: int | None = None) -> bool:
        """Apply up to ``budget`` (default ``slice_topics``) topics of pending work, departures
        first, then registers oldest first, then switches' reports, and report what changed;
        returns whether work remains."""
        left = self.slice_topics if budget is None else budget
        stats = self._stats
        while self._drops and left > 0:
            name, topics, cause = self._drops[0]
            dropped = []
            forget_holder = self._t.forget_holder
            for topic in topics:
                forget_holder(topic, name)
                dropped.append(topic)
                if len(dropped) >= left:
                    break
            else:
                self._drops.pop(0)
                self._recount()
            left -= max(1, len(dropped))
            stats.job_slices += 1
            self._announce.topics(dropped, cause)
        while self._jobs and left > 0:
            name, job = next(iter(self._jobs.items()))
            before = job.applied
            touched = self._apply_slice(job, left)
            left -= max(1, job.applied - before)
            stats.job_slices += 1
            if job.done:
                del self._jobs[name]
                self._recount()
            # One report per slice: each topic's route moves from old to new in one step.
            self._announce.topics(touched, job.cause, in_order=True)
        while self._reports and left > 0:
            switch, (topics, cause) = next(iter(self._reports.items()))
            told = list(islice(topics, left))
            if len(told) < left:
                del self._reports[switch]
                self._recount()
            left -= max(1, len(told))
            stats.job_slices += 1
            self._announce.topics(told, cause, in_order=True)
        return bool(self._jobs or self._drops or self._reports)

    def _apply_slice(self, job: RegisterJob, budget: int) -> list[str]:
        """Write up to ``budget`` topics of ``job``'s table; finishes the job at its end.
        Returns the topics whose queue data changed, in the table's order.

        As upstream: every topic when the data version moved (or on first registration),
        otherwise only topics lacking this broker's queue data.
        """
        name = job.broker_name
        rt = self._t
        touched: list[str] = []
        if name not in rt.brokers:  # the broker left meanwhile: nothing more to write
            rt.unsettled.discard(name)
            job._finish()
            return touched
        begin = job.applied
        end = begin + max(1, budget)
        topics = job.names[begin:end]
        if topics:
            new = self._queues_of(job, job.specs[begin:end])
            table = rt.tables.get(name)
            first = table is None and job.applied == 0
            if (job.held is not None or first) and self._held_slice(job, topics, new):
                touched = topics
            else:
                touched = self._write_slice(job, topics, new, table)
            job.wrote = job.wrote or bool(touched)
            job.applied += len(topics)
            self._stats.topic_writes += len(topics)
        if end > len(job.names):
            table = rt.tables.get(name)
            if job.held is not None and table is not job.held and len(table or ()) > job.total:
                rt.keep_only(name, job.names)  # a slice differed: the other's extra topics go
            if job.mapping:
                mapped = rt.write_mapping(name, job.mapping)
                mapped.difference_update(touched)
                touched = [*touched, *sorted(mapped)]
            rt.unsettled.discard(name)
            if self._share(job):
                self._stats.tables_shared += 1
            if job.memo is not None:
                rt.applied_parts[name] = job.memo
            job._finish()
        return touched

    def _write_slice(
        self, job: RegisterJob, topics: list[str], new: list[TopicQueues], table: Table | None
    ) -> list[str]:
        """Write a slice to the broker's own table; returns the topics whose queue data changed."""
        rt = self._t
        name = job.broker_name
        own = table is None or job.own_writes == rt.writes
        old = None if own or not table else list(map(table.get, topics))
        if old is None or old.count(None) == len(old):  # all new to this broker
            rt.writable(name).update(zip(topics, new, strict=True))
            rt.add_holders(topics, name)
            if own:
                job.own_writes = rt.writes
            return topics
        if job.rewrite_all:
            if old == new:  # list equality: identical topic queues compare in C
                return []
            pairs = zip(topics, new, old, strict=True)
            changed = [(t, q) for t, q, o in pairs if q is not o and q != o]
            rt.writable(name).update(changed)
            rt.add_holders([t for t, o in zip(topics, old, strict=True) if o is None], name)
            return list(map(_FIRST, changed))
        changed = [(t, q) for t, q, o in zip(topics, new, old, strict=True) if o is None]
        if changed:
            rt.writable(name).update(changed)
            rt.add_holders(list(map(_FIRST, changed)), name)
        return list(map(_FIRST, changed))

    def _queues_of(self, job: RegisterJob, specs: list[Any]) -> list[TopicQueues]:
        """The interned topic queues of a slice's spec tuples, mapped in C; a slice of one
        spec throughout (most topics of a broker share theirs) is looked up once."""
        queues_of = job.queues
        if queues_of is None:
            queues_of = job.queues = _QueuesOf(self._t, job.read_only)
        first = specs[0]
        if specs.count(first) == len(specs):  # compares by identity first, in C
            return [queues_of[first]] * len(specs)
        return list(map(queues_of.__getitem__, specs))

    def _held_slice(self, job: RegisterJob, topics: list[str], new: list[TopicQueues]) -> bool:
        """Apply a slice of a broker holding another broker's table: its first slice makes the
        broker hold the table of the register's size it is equal to (a cluster's brokers hold
        the same topics), if any (else False: the slice is written as usual); a later slice
        that differs is written to the broker's own copy. Either way the slice's topics list
        the broker as a holder, so a lookup sees each topic's old route or its new one."""
        rt = self._t
        name = job.broker_name
        if job.held is None:
            other = rt.table_like(name, job.total)
            if other is None or list(map(other.get, topics)) != new:
                return False
            rt.hold_table(name, other)
            job.held = other
        else:
            table = rt.tables.get(name)
            if table is None or list(map(table.get, topics)) != new:
                rt.writable(name).update(zip(topics, new, strict=True))
        rt.add_holders(topics, name)
        return True

    def _share(self, job: RegisterJob) -> bool:
        """Whether the broker holds another broker's table as its register leaves it: the one
        it held throughout, or one found equal to the table the job wrote."""
        rt = self._t
        name = job.broker_name
        if job.held is not None and rt.tables.get(name) is job.held and name in rt.shared:
            return True
        return job.wrote and rt.share_table(name)
