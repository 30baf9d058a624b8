"""The route tables of the name server, as upstream's ``RouteInfoManager`` keeps them.

Pure logic with an injected clock: no sockets, no timers (the server calls
:meth:`RouteRegistry.scan_not_active_brokers` on its own schedule). Every mutation reports the
topics whose assembled route (:meth:`RouteRegistry.get_route`) may have changed to the listener,
with the cause, right after it happens. That report invalidates cached route bodies and drives
change detection: a reported topic gets a new route version without its route being compared, so
the registry reports exactly the topics whose assembled route changed, never one it left as it was.

Storage is sized for brokers with hundreds of thousands of topics: each broker's table maps
topic to a :class:`QueueData` shared by every topic with the same queue counts, perm and flag,
and each topic maps to one interned tuple of the broker names holding it.

A register whose table needs more than ``slice_topics`` topic writes becomes a
:class:`RegisterJob` applied ``slice_topics`` topics at a time by :meth:`RouteRegistry.run_jobs`
(the server calls it once per reactor turn), so no register holds the event loop. Every topic
is written whole: a lookup meanwhile sees each topic's old route or its new one.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Any, Protocol

from namesrv.push.broker_events import BrokerEvent, BrokerListener
from namesrv.routes.change_cause import ChangeCause
from protocol.codes import PERM_READ_WRITE, Perm
from protocol.push_events import BrokerChangeKind
from protocol.register_table_reader import TablePart
from protocol.route_model import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicRouteData,
)

log = logging.getLogger(__name__)

MASTER_ID = 0
"""upstream's ``MixAll.MASTER_ID``."""
TOPIC_SYS_FLAG_UNIT = 0x1
"""upstream's ``TopicSysFlag.FLAG_UNIT``."""
TOPIC_SYS_FLAG_UNIT_SUB = 0x2
"""upstream's ``TopicSysFlag.FLAG_UNIT_SUB``."""

Listener = Callable[[Iterable[str], ChangeCause], None]
_AddrKey = tuple[str, str]
"""(cluster name, broker address): upstream's ``BrokerAddrInfo``."""
_Spec = tuple[int, int, int, int]
"""(read queues, write queues, perm, topic sys flag): what a topic's queue data is made of."""
_Holders = tuple[str, ...]
"""The sorted broker names holding queue data of one topic."""
_PartsMemo = tuple[frozenset[tuple[int, int]], bool]
"""The identities of the table chunks a broker's queue data is exactly the result of, and
whether they were applied read-only (a prime slave)."""

DEFAULT_SLICE_TOPICS = 2_000
"""Topic writes per slice of a large register: a few milliseconds of one reactor turn."""
_FIRST = operator.itemgetter(0)
_MAX_INTERNED = 65_536
"""Bound of each intern cache (holder tuples, queue data per broker); cleared when passed."""


class Clock(Protocol):
    def seconds(self) -> float: ...


class QueueSpec(Protocol):
    """What a register needs of a topic config (``TopicConfig`` and the lean body reader's
    ``TopicQueueSpec`` both fit)."""

    @property
    def read_queue_nums(self) -> int: ...
    @property
    def write_queue_nums(self) -> int: ...
    @property
    def perm(self) -> int: ...
    @property
    def topic_sys_flag(self) -> int: ...


def _spec_columns(topic_configs: Mapping[str, QueueSpec]) -> tuple[list[str], list[Any]]:
    """A register's table as two columns, topics and spec tuples, sliced by a job in C (the
    reader's specs already are tuples)."""
    names = list(topic_configs)
    values = list(topic_configs.values())
    if not values or isinstance(values[0], tuple):
        return names, values
    return names, [
        (tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag) for tc in values
    ]


class _QueueDataOf(dict[Any, QueueData]):
    """Spec tuple -> the broker's shared :class:`QueueData` for it (perm masked for a prime
    slave), made and pooled on first use: a dict so a slice maps its specs in C."""

    def __init__(self, pool: dict[_Spec, QueueData], broker_name: str, read_only: bool) -> None:
        super().__init__()
        self._pool = pool
        self._broker_name = broker_name
        self._read_only = read_only

    def __missing__(self, spec: Any) -> QueueData:
        read, write, perm, flag = spec
        if self._read_only:
            perm &= ~Perm.WRITE
        key = (read, write, perm, flag)
        qd = self._pool.get(key)
        if qd is None:
            if len(self._pool) >= _MAX_INTERNED:
                self._pool.clear()
            qd = self._pool[key] = QueueData(self._broker_name, read, write, perm, flag)
        self[spec] = qd
        return qd


class RegisterJob:
    """The topic table of one large register, applied in slices by ``RouteRegistry.run_jobs``.

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
        "mapping",
        "memo",
        "names",
        "on_done",
        "queue_data",
        "read_only",
        "rewrite_all",
        "specs",
        "total",
    )

    def __init__(
        self,
        broker_name: str,
        names: list[str],
        specs: list[Any],
        *,
        rewrite_all: bool,
        read_only: bool,
        mapping: Mapping[str, Any],
        data_version: DataVersion,
        cause: ChangeCause = ChangeCause.REGISTER,
    ) -> None:
        self.broker_name = broker_name
        self.queue_data: _QueueDataOf | None = None
        self.cause = cause
        """What the topics its slices change are reported with (a start-up stays silent)."""
        self.names = names
        self.specs = specs
        """The table's topics and their spec tuples, in its order; ``applied`` of them are."""
        self.total = len(names)
        self.applied = 0
        self.rewrite_all = rewrite_all
        self.read_only = read_only
        self.mapping = mapping
        self.data_version = data_version
        self.done = False
        self.cancelled = False
        self.memo: _PartsMemo | None = None
        """What the broker's table holds once this job is done: its chunks, see
        ``RouteRegistry._applied_parts``."""
        self.on_done: list[Callable[[RegisterJob], None]] = []

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        self.names, self.specs = [], []
        callbacks, self.on_done = self.on_done, []
        for callback in callbacks:
            callback(self)


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


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What REGISTER_BROKER answers: for a slave, its master's address and HA address."""

    ha_server_addr: str | None
    master_addr: str | None
    changed_topics: list[str]
    """Topics whose route this register changed (what the listener was told so far)."""
    job: RegisterJob | None = None
    """Set when the topic table is applied in slices: answer once it is done."""


@dataclass(slots=True)
class _BrokerGroup:
    """A broker name's entry in upstream's ``brokerAddrTable``: addresses by broker id."""

    cluster: str
    addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False


@dataclass(slots=True)
class _Live:
    """upstream's ``BrokerLiveInfo``: when the broker last spoke, how long it may stay silent."""

    broker_name: str
    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    channel: object
    ha_server_addr: str
    body_digest: bytes | None = None
    """Digest of the register body this entry came from: an identical body is a heartbeat."""


class RouteRegistry:
    """Topic routes, broker membership and broker liveness of one name server.

    ``channel`` values passed to :meth:`register_broker` must be hashable (the server passes a
    connection id); None means the broker has no channel to close. Methods never raise on
    unknown names: they change nothing and return 0 or empty.

    ``delete_topic_with_broker_registration`` mirrors upstream's NamesrvConfig switch of that
    name (default off there too): when on, a master's register removes its queue data from
    topics absent from the table it reports. It is off by default because 5.x brokers also send
    *incremental* registers carrying only the topics just created, which would otherwise drop
    every other topic of that broker until its next full register.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        broker_expiry_ms: int = 120_000,
        listener: Listener | None = None,
        delete_topic_with_broker_registration: bool = False,
        slice_topics: int = DEFAULT_SLICE_TOPICS,
        broker_listener: BrokerListener | None = None,
    ) -> None:
        self._clock = clock
        self.broker_listener = broker_listener
        """Told of every address leaving or joining a broker name, after ``listener``."""
        self._expiry_ms = broker_expiry_ms
        self._listener = listener
        self._delete_with_registration = delete_topic_with_broker_registration
        self.slice_topics = max(1, slice_topics)
        self._tables: dict[str, dict[str, QueueData]] = {}
        """broker name → topic → queue data (upstream's ``topicQueueTable`` by broker); never
        empty maps. Equal queue data of one broker is one shared object."""
        self._holders: dict[str, _Holders] = {}
        """topic → sorted names of the brokers holding its queues; never empty, interned."""
        self._holders_with: dict[tuple[_Holders, str], _Holders] = {}
        self._holders_without: dict[tuple[_Holders, str], _Holders] = {}
        self._queue_pool: dict[str, dict[_Spec, QueueData]] = {}
        self._brokers: dict[str, _BrokerGroup] = {}
        self._clusters: dict[str, set[str]] = {}
        self._live: dict[_AddrKey, _Live] = {}
        self._live_by_channel: dict[object, set[_AddrKey]] = {}
        self._filters: dict[_AddrKey, list[str]] = {}
        self._mapping: dict[str, dict[str, object]] = {}
        """topic → broker name → TopicQueueMappingInfo (5.x static topics), passed through."""
        self._jobs: dict[str, RegisterJob] = {}
        """broker name → its register being applied in slices (at most one per broker)."""
        self._unsettled: set[str] = set()
        """Brokers whose last register's table is not fully applied: the next rewrites all."""
        self._applied_parts: dict[str, _PartsMemo] = {}
        """broker name → the chunks its table holds exactly (as read by
        :mod:`protocol.register_table_reader`): a register listing one of them again skips it.
        Forgotten as soon as anything else writes the table."""
        self._lacking: set[str] = set()
        """Brokers that lost topics outside a register (DELETE_TOPIC): the next register, even
        with an unchanged data version, writes back the topics it lists and we lack (as
        upstream's per-topic check does)."""
        self._drops: list[tuple[str, Iterator[str], ChangeCause]] = []
        self._deferred_topics: list[str] = []
        """Topics of a departure dropped in slices, for its broker event (see _remove_addr)."""
        """Departed brokers whose (large) tables still list them as holders of topics."""
        self.stats = RegistryStats()

    # -- brokers -------------------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_configs: Mapping[str, QueueSpec] | None,
        data_version: DataVersion,
        filter_server_list: list[str],
        heartbeat_timeout_ms: int | None,
        enable_acting_master: bool,
        channel: object,
        topic_queue_mapping_info: Mapping[str, Any],
        body_digest: bytes | None = None,
        table_parts: Sequence[TablePart] | None = None,
    ) -> RegisterResult:
        """REGISTER_BROKER, as upstream's ``registerBroker``; also the broker's heartbeat.

        ``topic_configs`` None says the body is the very one of this address's last register
        (see :meth:`body_unchanged`): data version, table and filter servers are taken from
        then, and the table costs no per-topic work. A body with the same data version but
        other bytes is checked topic by topic for topics we lack, as upstream does.

        ``table_parts``, the table's chunks as read, lets a master's register skip the chunks
        its table already holds as they are (the usual re-register after one topic changed).
        """
        key = (cluster_name, broker_addr)
        previous = self._live.get(key)
        table_given = topic_configs is not None
        if topic_configs is None:
            topic_configs = {}
            if previous is not None:
                data_version = previous.data_version
                filter_server_list = self._filters.get(key, [])
                body_digest = previous.body_digest
        group = self._brokers.get(broker_name)
        if group is not None and self._stale_claim(group, key, broker_id, data_version):
            return RegisterResult(None, None, [])

        touched: set[str] = set()
        if previous is not None and previous.broker_name != broker_name:
            # One address serves one broker name: re-registering under another one moves it.
            touched |= self._leave_group(previous.broker_name, broker_addr, ChangeCause.REGISTER)
            self._deferred_topics = []
        self._clusters.setdefault(cluster_name, set()).add(broker_name)
        if group is None:
            group = self._brokers[broker_name] = _BrokerGroup(cluster_name)
        before = (dict(group.addrs), group.enable_acting_master)
        # The same address holds one id: a slave switched to master drops its old id.
        for bid in [b for b, a in group.addrs.items() if a == broker_addr and b != broker_id]:
            del group.addrs[bid]
        first_registration = group.addrs.get(broker_id) != broker_addr
        group.addrs[broker_id] = broker_addr
        group.enable_acting_master = enable_acting_master
        if before != (group.addrs, group.enable_acting_master):
            touched.update(self._tables.get(broker_name, ()))

        job: RegisterJob | None = None
        is_master = broker_id == MASTER_ID
        # upstream's prime slave: with acting master on, the lowest id stands in for a master.
        is_prime_slave = enable_acting_master and not is_master and broker_id == min(group.addrs)
        if is_master or is_prime_slave:
            memo = self._applied_parts.get(broker_name)
            if self._delete_with_registration and table_given and not topic_queue_mapping_info:
                held = self._tables.get(broker_name, {})
                for name in [t for t in held if t not in topic_configs]:
                    self._drop_queue_data(name, broker_name)
                    touched.add(name)
            rewrite_all = (
                first_registration
                or previous is None
                or previous.data_version != data_version
                or broker_name in self._unsettled
            )
            lacking = broker_name in self._lacking
            superseded = self._jobs.pop(broker_name, None)
            if superseded is not None:
                self.stats.jobs_superseded += 1
                superseded.cancelled = True
                superseded._finish()
            if rewrite_all or lacking or (table_given and topic_configs):
                names, specs = self._unapplied_columns(
                    topic_configs, table_parts, memo, is_prime_slave, lacking
                )
                self._applied_parts.pop(broker_name, None)  # until this table is applied
                job = RegisterJob(
                    broker_name,
                    names,
                    specs,
                    rewrite_all=rewrite_all,
                    read_only=is_prime_slave,
                    mapping=topic_queue_mapping_info if rewrite_all else {},
                    data_version=data_version,
                    cause=self._register_cause(previous, topic_configs),
                )
                if table_parts is not None:
                    job.memo = (frozenset(part.key for part in table_parts), is_prime_slave)
                self._lacking.discard(broker_name)
                if len(names) <= self.slice_topics:
                    touched.update(self._apply_slice(job, len(names) + 1))
                    job = None
                else:
                    self._unsettled.add(broker_name)
                    self._jobs[broker_name] = job
                    self.stats.jobs_started += 1
            else:
                self.stats.register_fast_paths += 1

        self._set_live(
            key,
            _Live(
                broker_name=broker_name,
                last_update_ms=self._now_ms(),
                timeout_ms=(
                    heartbeat_timeout_ms
                    if heartbeat_timeout_ms is not None and heartbeat_timeout_ms > 0
                    else self._expiry_ms
                ),
                data_version=data_version,
                channel=channel,
                ha_server_addr=ha_server_addr,
                body_digest=body_digest,
            ),
        )
        servers = list(filter_server_list)
        if self._filters.get(key, []) != servers:
            if servers:
                self._filters[key] = servers
            else:
                del self._filters[key]
            touched |= self._topics_of_addr(key)

        master_addr = ha_addr = None
        if not is_master:
            master = group.addrs.get(MASTER_ID)
            master_live = self._live.get((cluster_name, master)) if master is not None else None
            if master_live is not None:
                master_addr, ha_addr = master, master_live.ha_server_addr

        cause = self._register_cause(previous, topic_configs)
        changed = self._report(touched, cause)
        if first_registration and self.broker_listener is not None:
            # A table applied in slices reports its topics later: they are the event's too.
            topics = tuple(changed) if job is None else (*changed, *topic_configs)
            self.broker_listener(
                BrokerEvent(
                    BrokerChangeKind.ARRIVED,
                    cause,
                    cluster_name,
                    broker_name,
                    ((broker_id, broker_addr),),
                    topics,
                )
            )
        return RegisterResult(ha_addr, master_addr, changed, job)

    def _unapplied_columns(
        self,
        topic_configs: Mapping[str, QueueSpec],
        parts: Sequence[TablePart] | None,
        memo: _PartsMemo | None,
        read_only: bool,
        lacking: bool,
    ) -> tuple[list[str], list[Any]]:
        """The topics and specs a register must write: all of its table, less the chunks the
        broker's table holds exactly as they are (``memo``, from its last register)."""
        if parts is None or memo is None or lacking or memo[1] != read_only:
            return _spec_columns(topic_configs)
        held = memo[0]
        fresh = [part for part in parts if part.key not in held]
        if len(fresh) == len(parts):
            return _spec_columns(topic_configs)
        names = list(chain.from_iterable(part.names for part in fresh))
        self.stats.topics_skipped += len(topic_configs) - len(names)
        return names, list(chain.from_iterable(part.specs for part in fresh))

    @staticmethod
    def _register_cause(previous: _Live | None, topic_configs: Mapping[str, Any]) -> ChangeCause:
        if previous is None and len(topic_configs) > 1:
            return ChangeCause.BROKER_STARTUP
        return ChangeCause.REGISTER

    def _stale_claim(
        self, group: _BrokerGroup, key: _AddrKey, broker_id: int, data_version: DataVersion
    ) -> bool:
        """Whether a live broker with a newer state version holds this id (upstream refuses).

        The refused address, if it was registered, is removed as its register would otherwise
        have moved it (upstream drops its live entry and its other id).
        """
        cluster, addr = key
        holder = group.addrs.get(broker_id)
        if holder is None or holder == addr:
            return False
        holder_live = self._live.get((cluster, holder))
        if holder_live is None or holder_live.data_version.state_version <= (
            data_version.state_version
        ):
            return False
        log.warning(
            "refused register of %s as id %d of %s: %s holds that id with state version %d > %d",
            addr,
            broker_id,
            holder_live.broker_name,
            holder,
            holder_live.data_version.state_version,
            data_version.state_version,
        )
        if key in self._live:
            self._remove_addr(key, (), ChangeCause.REGISTER)
        return True

    def body_unchanged(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        body_digest: bytes,
    ) -> bool:
        """Whether a register body with this digest may skip reading its table: it is the very
        body this address last registered, that register's table is fully applied, and no
        topic was deleted under the broker since (DELETE_TOPIC: the table must be read to put
        it back, as upstream's heartbeat does)."""
        live = self._live.get((cluster_name, broker_addr))
        group = self._brokers.get(broker_name)
        return (
            live is not None
            and group is not None
            and group.addrs.get(broker_id) == broker_addr
            and live.body_digest == body_digest
            and live.broker_name == broker_name
            and broker_name not in self._unsettled
            and broker_name not in self._lacking
        )

    # -- applying register tables ----------------------------------------------------------------

    @property
    def pending_jobs(self) -> int:
        """Registers whose topic table is still being applied, and departed brokers whose
        queue data is still being dropped."""
        return len(self._jobs) + len(self._drops)

    def run_jobs(self, budget: int | None = None) -> bool:
        """Apply up to ``budget`` (default ``slice_topics``) topics of pending registers, oldest
        first, and report what changed; returns whether work remains."""
        left = self.slice_topics if budget is None else budget
        while self._drops and left > 0:
            name, topics, cause = self._drops[0]
            dropped = []
            for topic in topics:
                self._forget_holder(topic, name)
                dropped.append(topic)
                if len(dropped) >= left:
                    break
            else:
                self._drops.pop(0)
            left -= max(1, len(dropped))
            self.stats.job_slices += 1
            self._report(dropped, cause)
        while self._jobs and left > 0:
            name, job = next(iter(self._jobs.items()))
            before = job.applied
            touched = self._apply_slice(job, left)
            left -= max(1, job.applied - before)
            self.stats.job_slices += 1
            if job.done:
                del self._jobs[name]
            # One report per slice: each topic's route moves from old to new in one step.
            self._report(touched, job.cause, in_order=True)
        return bool(self._jobs or self._drops)

    def _apply_slice(self, job: RegisterJob, budget: int) -> list[str]:
        """Write up to ``budget`` topics of ``job``'s table; finishes the job at its end.
        Returns the topics whose queue data changed, in the table's order.

        As upstream: every topic when the data version moved (or on first registration),
        otherwise only topics lacking this broker's queue data. The slice is compared and
        written with C-level ``map``/``update``; Python runs per topic only for topics whose
        queue data changed to another value.
        """
        name = job.broker_name
        touched: list[str] = []
        if name not in self._brokers:  # the broker left meanwhile: nothing more to write
            self._unsettled.discard(name)
            job._finish()
            return touched
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = {}
        begin = job.applied
        end = begin + max(1, budget)
        topics = job.names[begin:end]
        if topics:
            queue_data = job.queue_data
            if queue_data is None:
                pool = self._queue_pool.setdefault(name, {})
                queue_data = job.queue_data = _QueueDataOf(pool, name, job.read_only)
            new = list(map(queue_data.__getitem__, job.specs[begin:end]))
            old = list(map(table.get, topics))
            if old.count(None) == len(old):  # all new to this broker (its first register)
                table.update(zip(topics, new, strict=True))
                self._add_holders(topics, name)
                touched = topics
            elif job.rewrite_all:
                if old != new:  # list equality: identical queue data compares in C
                    pairs = zip(topics, new, old, strict=True)
                    # ``o is None`` first: comparing a QueueData with None runs Python code.
                    changed = [(t, q) for t, q, o in pairs if q is not o and (o is None or q != o)]
                    table.update(changed)
                    arriving = [t for t, o in zip(topics, old, strict=True) if o is None]
                    self._add_holders(arriving, name)
                    touched = list(map(_FIRST, changed))
            else:
                changed = [(t, q) for t, q, o in zip(topics, new, old, strict=True) if o is None]
                if changed:
                    table.update(changed)
                    touched = list(map(_FIRST, changed))
                    self._add_holders(touched, name)
            job.applied += len(topics)
            self.stats.topic_writes += len(topics)
        if end > len(job.names):
            if not table:
                del self._tables[name]
            if job.mapping:
                mapped = self._write_mapping(name, job.mapping)
                mapped.difference_update(touched)
                touched = [*touched, *sorted(mapped)]
            self._unsettled.discard(name)
            if job.memo is not None:
                self._applied_parts[name] = job.memo
            job._finish()
        return touched

    def _queue_data(self, broker_name: str, spec: _Spec) -> QueueData:
        pool = self._queue_pool.setdefault(broker_name, {})
        qd = pool.get(spec)
        if qd is None:
            if len(pool) >= _MAX_INTERNED:
                pool.clear()
            qd = pool[spec] = QueueData(broker_name, *spec)
        return qd

    def _add_holder(self, topic: str, broker_name: str) -> None:
        self._holders[topic] = self._with_holder(self._holders.get(topic, ()), broker_name)

    def _add_holders(self, topics: list[str], broker_name: str) -> None:
        """:meth:`_add_holder` for many topics: their holder tuples are interned, so the new
        tuple is made once per distinct old one and the table is updated in C."""
        if not topics:
            return
        holders = self._holders
        before = list(map(holders.get, topics, repeat(())))
        # Keyed by identity: hashing a holder tuple hashes every name in it.
        ids = list(map(id, before))
        distinct = dict(zip(ids, before, strict=True))
        grown = {i: self._with_holder(old, broker_name) for i, old in distinct.items()}
        holders.update(zip(topics, map(grown.__getitem__, ids), strict=True))

    def _with_holder(self, holders: _Holders, broker_name: str) -> _Holders:
        """The interned holder tuple ``holders`` plus ``broker_name``."""
        cache_key = (holders, broker_name)
        grown = self._holders_with.get(cache_key)
        if grown is None:
            if len(self._holders_with) >= _MAX_INTERNED:
                self._holders_with.clear()
            grown = self._holders_with[cache_key] = tuple(sorted({*holders, broker_name}))
        return grown

    def _remove_holder(self, topic: str, broker_name: str) -> None:
        holders = self._holders.get(topic)
        if holders is None:
            return
        cache_key = (holders, broker_name)
        shrunk = self._holders_without.get(cache_key)
        if shrunk is None:
            if len(self._holders_without) >= _MAX_INTERNED:
                self._holders_without.clear()
            shrunk = tuple(n for n in holders if n != broker_name)
            self._holders_without[cache_key] = shrunk
        if shrunk:
            self._holders[topic] = shrunk
        else:
            del self._holders[topic]

    def _write_mapping(self, broker_name: str, infos: Mapping[str, Any]) -> set[str]:
        touched: set[str] = set()
        held = self._tables.get(broker_name, {})
        for topic, info in infos.items():
            if topic not in held:  # mapping without queue data would never be cleaned up
                continue
            by_broker = self._mapping.setdefault(topic, {})
            if by_broker.get(broker_name) != info:
                by_broker[broker_name] = info
                touched.add(topic)
        return touched

    def unregister_broker(
        self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """UNREGISTER_BROKER: the address leaves ``broker_name`` (upstream removes it by value)."""
        self._remove_addr((cluster_name, broker_addr), (broker_name,), ChangeCause.UNREGISTER)

    def on_channel_close(self, channel: object) -> None:
        """The connection a broker registered over closed: remove it as an unregister would."""
        if channel is None:
            return
        for key in sorted(self._live_by_channel.get(channel, ())):
            self._remove_addr(key, (), ChangeCause.CHANNEL_CLOSE)

    def scan_not_active_brokers(self) -> list[str]:
        """Remove brokers silent past their timeout; returns their addresses."""
        now = self._now_ms()
        expired = [
            key for key, live in self._live.items() if now - live.last_update_ms > live.timeout_ms
        ]
        for key in expired:
            log.warning("broker %s of cluster %s expired", key[1], key[0])
            self._remove_addr(key, (), ChangeCause.EXPIRY)
        return [addr for _, addr in expired]

    def broker_heartbeat(self, *, cluster_name: str, broker_addr: str) -> None:
        """BROKER_HEARTBEAT: refresh the live entry, if there is one."""
        live = self._live.get((cluster_name, broker_addr))
        if live is not None:
            live.last_update_ms = self._now_ms()

    def query_data_version_changed(
        self, *, cluster_name: str, broker_addr: str, data_version: DataVersion
    ) -> bool:
        """QUERY_DATA_VERSION: whether the broker must re-register; counts as a heartbeat."""
        live = self._live.get((cluster_name, broker_addr))
        if live is None:
            return True
        live.last_update_ms = self._now_ms()
        return live.data_version != data_version

    def _remove_addr(self, key: _AddrKey, broker_names: Iterable[str], cause: ChangeCause) -> None:
        """Drop a broker address: its live entry, filter servers and broker-group membership.

        ``broker_names`` are the groups named by the request; the group its live entry names is
        always included, so no group keeps an address that can no longer expire.
        """
        live = self._set_live(key, None)
        names = set(broker_names)
        if live is not None:
            names.add(live.broker_name)
        touched: set[str] = set()
        if self._filters.pop(key, None) is not None:
            touched |= self._topics_of_addr(key)
        left: list[tuple[str, str, tuple[tuple[int, str], ...]]] = []
        for name in sorted(names):
            group = self._brokers.get(name)
            if group is not None:
                ids = tuple((bid, a) for bid, a in sorted(group.addrs.items()) if a == key[1])
                if ids:
                    left.append((name, group.cluster, ids))
            touched |= self._leave_group(name, key[1], cause)
        changed = self._report(touched, cause)
        if self._deferred_topics:  # left in slices: reported later, the event's topics now
            changed = [*changed, *self._deferred_topics]
            self._deferred_topics = []
        if self.broker_listener is not None:
            for name, cluster, ids in left:
                self.broker_listener(self._departure(name, cluster, ids, cause, changed))

    def _departure(
        self,
        name: str,
        cluster: str,
        ids: tuple[tuple[int, str], ...],
        cause: ChangeCause,
        changed: list[str],
    ) -> BrokerEvent:
        """The event for ``ids`` having left ``name``, as the group stands now."""
        group = self._brokers.get(name)
        read_only = (
            group is not None and group.enable_acting_master and min(group.addrs) != MASTER_ID
        )
        return BrokerEvent(
            BrokerChangeKind.DEPARTED,
            cause,
            cluster,
            name,
            ids,
            tuple(changed),
            name_gone=group is None,
            read_only=read_only,
        )

    def _leave_group(self, broker_name: str, addr: str, cause: ChangeCause) -> set[str]:
        """Remove ``addr`` from a broker group; returns the topics whose route changed."""
        group = self._brokers.get(broker_name)
        if group is None:
            return set()
        ids = [bid for bid, a in group.addrs.items() if a == addr]
        if not ids:
            return set()
        for bid in ids:
            del group.addrs[bid]
        held = self._tables.get(broker_name, {})
        if group.addrs:
            if group.enable_acting_master and min(group.addrs) != MASTER_ID:
                self._rewrite_perm(broker_name, lambda p: p & ~Perm.WRITE)  # no master: read-only
            return set(held)
        # The broker name is gone: as upstream, its queue data leaves every topic.
        del self._brokers[broker_name]
        job = self._jobs.pop(broker_name, None)
        if job is not None:
            job.cancelled = True
            job._finish()
        self._unsettled.discard(broker_name)
        self._lacking.discard(broker_name)
        for cluster in [c for c, names in self._clusters.items() if broker_name in names]:
            names = self._clusters[cluster]
            names.discard(broker_name)
            if not names:
                del self._clusters[cluster]
        self._queue_pool.pop(broker_name, None)
        self._applied_parts.pop(broker_name, None)
        table = self._tables.pop(broker_name, {})
        if len(table) > self.slice_topics:
            # Dropped in slices by run_jobs: routes stop listing the broker now (it has no
            # group), and each topic's queue data leaves when its slice is reported.
            topics = list(table)
            self._drops.append((broker_name, iter(topics), cause))
            self._deferred_topics.extend(topics)
            return set()
        for topic in table:
            self._forget_holder(topic, broker_name)
        return set(table)

    def _forget_holder(self, topic: str, broker_name: str) -> None:
        """After ``broker_name``'s table left: unlist it from ``topic`` unless it holds the topic
        again (it re-registered meanwhile), and drop its mapping info."""
        if topic in self._tables.get(broker_name, ()):
            return
        self._remove_holder(topic, broker_name)
        mapping = self._mapping.get(topic)
        if mapping is not None:
            mapping.pop(broker_name, None)
            if not mapping:
                del self._mapping[topic]

    def _drop_queue_data(self, topic: str, broker_name: str) -> None:
        """Remove one broker's queue data of ``topic``; a topic left with none is deleted."""
        table = self._tables.get(broker_name)
        if table is not None and table.pop(topic, None) is not None:
            self._applied_parts.pop(broker_name, None)
            self._remove_holder(topic, broker_name)
            if not table:
                del self._tables[broker_name]
        mapping = self._mapping.get(topic)
        if mapping is not None:
            mapping.pop(broker_name, None)
            if not mapping:
                del self._mapping[topic]

    def _set_live(self, key: _AddrKey, live: _Live | None) -> _Live | None:
        """Replace (or with None, remove) a live entry, keeping the channel index; returns the
        previous entry."""
        previous = self._live.pop(key, None)
        if previous is not None:
            keys = self._live_by_channel.get(previous.channel)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._live_by_channel[previous.channel]
        if live is not None:
            self._live[key] = live
            if live.channel is not None:
                self._live_by_channel.setdefault(live.channel, set()).add(key)
        return previous

    def _topics_of_addr(self, key: _AddrKey) -> set[str]:
        """Topics whose route lists the filter servers of ``key`` (any group holding it).

        Scans the broker groups; only filter-server changes call it, and those are rare.
        """
        cluster, addr = key
        topics: set[str] = set()
        for name, group in self._brokers.items():
            if group.cluster == cluster and addr in group.addrs.values():
                topics.update(self._tables.get(name, ()))
        return topics

    # -- routes --------------------------------------------------------------------------------

    def get_route(self, topic: str) -> TopicRouteData | None:
        """The assembled route, or None when no broker holds queues of ``topic``.

        Queue and broker datas are sorted by broker name so equal tables encode to equal bytes.
        ``order_topic_conf`` is left for ``RouteBodies`` to fill in.
        """
        names = self._holders.get(topic)
        if not names:
            return None
        broker_datas = []
        queue_datas = []
        filters: dict[str, list[str]] = {}
        tables = self._tables
        for name in names:
            group = self._brokers.get(name)
            table = tables.get(name)
            qd = table.get(topic) if table is not None else None
            if group is None or qd is None:
                continue  # a departed broker whose queue data is still being dropped
            queue_datas.append(qd)
            broker_datas.append(self._broker_data(name, group))
            for addr in group.addrs.values():
                servers = self._filters.get((group.cluster, addr))
                if servers:
                    filters[addr] = list(servers)
        if not broker_datas:
            return None
        mapping = self._mapping.get(topic)
        return TopicRouteData(
            queue_datas=queue_datas,
            broker_datas=broker_datas,
            filter_server_table=filters,
            topic_queue_mapping_by_broker=dict(sorted(mapping.items())) if mapping else None,
        )

    def route_exists(self, topic: str) -> bool:
        return topic in self._holders

    def route_exists_check(self) -> Callable[[str], bool]:
        """:meth:`route_exists` as the holders table's own membership test: a C callable, for
        testing many topics with ``map``."""
        return self._holders.__contains__

    def wipe_write_perm(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER: clear the write bit of the broker's queues.

        Returns the number of topics holding its queues, as upstream counts them.
        """
        touched = self._rewrite_perm(broker_name, lambda p: p & ~Perm.WRITE)
        self._report(touched, ChangeCause.WIPE_WRITE_PERM)
        return len(self._tables.get(broker_name, ()))

    def add_write_perm(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER: upstream sets the perm to READ|WRITE (dropping other bits)."""
        touched = self._rewrite_perm(broker_name, lambda p: PERM_READ_WRITE)
        self._report(touched, ChangeCause.ADD_WRITE_PERM)
        return len(self._tables.get(broker_name, ()))

    def _rewrite_perm(self, broker_name: str, new: Callable[[int], int]) -> set[str]:
        touched: set[str] = set()
        table = self._tables.get(broker_name)
        if table is None:
            return touched
        self._applied_parts.pop(broker_name, None)
        rewritten: dict[QueueData, QueueData] = {}  # few distinct queue datas per broker
        for topic, qd in table.items():
            out = rewritten.get(qd)
            if out is None:
                perm = int(new(qd.perm))
                spec = (qd.read_queue_nums, qd.write_queue_nums, perm, qd.topic_sys_flag)
                out = rewritten[qd] = qd if perm == qd.perm else self._queue_data(broker_name, spec)
            if out is not qd:
                table[topic] = out
                touched.add(topic)
        return touched

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: everywhere, or only its queues on brokers of a cluster."""
        holders = self._holders.get(topic)
        if holders is None:
            return
        if cluster_name:
            in_cluster = self._clusters.get(cluster_name, set())
            names = [n for n in holders if n in in_cluster]
        else:
            names = list(holders)
        for name in names:
            self._drop_queue_data(topic, name)
            self._lacking.add(name)
        if names:
            self._report((topic,), ChangeCause.DELETE_TOPIC)

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: write queue data directly, for brokers already known.

        Queue data naming an unknown broker is skipped and logged (upstream refuses it too).
        """
        touched = False
        for given in queue_datas:
            name = given.broker_name
            if name not in self._brokers:
                log.warning(
                    "REGISTER_TOPIC_IN_NAMESRV for %s names unknown broker %s; skipped",
                    topic,
                    name,
                )
                continue
            qd = self._queue_data(
                name,
                (given.read_queue_nums, given.write_queue_nums, given.perm, given.topic_sys_flag),
            )
            table = self._tables.setdefault(name, {})
            old = table.get(topic)
            if old != qd:
                if old is None:
                    self._add_holder(topic, name)
                table[topic] = qd
                self._applied_parts.pop(name, None)
                touched = True
        if touched:
            self._report((topic,), ChangeCause.REGISTER_TOPIC)

    # -- listings ------------------------------------------------------------------------------

    def all_topics(self) -> list[str]:
        return sorted(self._holders)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        out: set[str] = set()
        for name in self._clusters.get(cluster, ()):
            out.update(self._tables.get(name, ()))
        return sorted(out)

    def system_topics(self) -> list[str]:
        """Cluster and broker names, the topics upstream brokers create for themselves."""
        out: set[str] = set(self._clusters)
        for names in self._clusters.values():
            out |= names
        return sorted(out)

    def _topics_with_flags(self, want: int, refuse: int = 0) -> list[str]:
        """Topics whose sys flag (of their first queue data, as upstream reads it) matches."""
        out = []
        tables = self._tables
        for topic, names in self._holders.items():
            first = next((t[topic] for n in names if topic in (t := tables.get(n, {}))), None)
            if first is None:
                continue
            flag = first.topic_sys_flag
            if flag & want == want and not flag & refuse:
                out.append(topic)
        return sorted(out)

    def unit_topics(self) -> list[str]:
        return self._topics_with_flags(TOPIC_SYS_FLAG_UNIT)

    def has_unit_sub_topics(self) -> list[str]:
        return self._topics_with_flags(TOPIC_SYS_FLAG_UNIT_SUB)

    def has_unit_sub_ununit_topics(self) -> list[str]:
        return self._topics_with_flags(TOPIC_SYS_FLAG_UNIT_SUB, refuse=TOPIC_SYS_FLAG_UNIT)

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table={
                name: self._broker_data(name, self._brokers[name]) for name in sorted(self._brokers)
            },
            cluster_addr_table={c: sorted(self._clusters[c]) for c in sorted(self._clusters)},
        )

    def broker_member_group(self, cluster_name: str, broker_name: str) -> dict[int, str]:
        """GET_BROKER_MEMBER_GROUP: the broker name's addresses (upstream ignores the cluster)."""
        group = self._brokers.get(broker_name)
        return dict(sorted(group.addrs.items())) if group is not None else {}

    @property
    def broker_count(self) -> int:
        """Live broker addresses."""
        return len(self._live)

    @property
    def topic_count(self) -> int:
        return len(self._holders)

    def topics_of_broker(self, broker_name: str) -> set[str]:
        """The topics ``broker_name`` holds queues of (a copy)."""
        return set(self._tables.get(broker_name, ()))

    # -- internals -----------------------------------------------------------------------------

    @staticmethod
    def _broker_data(name: str, group: _BrokerGroup) -> BrokerData:
        return BrokerData(
            cluster=group.cluster,
            broker_name=name,
            broker_addrs=dict(sorted(group.addrs.items())),
            enable_acting_master=group.enable_acting_master,
        )

    def _report(
        self, topics: Collection[str], cause: ChangeCause, *, in_order: bool = False
    ) -> list[str]:
        """Tell the listener; ``topics`` sorted first unless ``in_order`` (a job slice's list
        in its table's order, deterministic already)."""
        ordered = list(topics) if in_order else sorted(topics)
        if ordered and self._listener is not None:
            self._listener(ordered, cause)
        return ordered

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)
