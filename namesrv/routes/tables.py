"""The route tables every part of the registry reads and writes, and the types they hold.

Storage is sized for brokers with hundreds of thousands of topics: each broker's table maps
topic to a :class:`TopicQueues` shared by every topic with the same queue counts, perm and flag
(of any broker: the broker's name is its table's), and each topic maps to one interned tuple of
the broker names holding it. Brokers whose tables are equal, as a cluster's brokers usually are,
hold one table object between them, copied for the one that writes it first.

:class:`RouteTables` is plain data with the primitives that keep its indexes consistent: the
holder tuples of ``holders`` follow ``tables`` only through its methods (a topic's holders name
exactly the brokers whose tables hold it, but while a register held whole from its first slice
is applied: see :mod:`namesrv.routes.register_jobs`), and so does the channel index of
``live``. The parts of the registry (registration, register jobs, departures, topic admin,
queries) share one instance; none of them keeps route state of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import NamedTuple, Protocol

from protocol.route_model import BrokerData, DataVersion

MASTER_ID = 0
"""upstream's ``MixAll.MASTER_ID``."""
TOPIC_SYS_FLAG_UNIT = 0x1
"""upstream's ``TopicSysFlag.FLAG_UNIT``."""
TOPIC_SYS_FLAG_UNIT_SUB = 0x2
"""upstream's ``TopicSysFlag.FLAG_UNIT_SUB``."""

AddrKey = tuple[str, str]
"""(cluster name, broker address): upstream's ``BrokerAddrInfo``."""
Spec = tuple[int, int, int, int]
"""(read queues, write queues, perm, topic sys flag): what a topic's queue data is made of."""
Holders = tuple[str, ...]
"""The sorted broker names holding queue data of one topic."""
PartsMemo = tuple[frozenset[tuple[int, int]], bool]
"""The identities of the table chunks a broker's queue data is exactly the result of, and
whether they were applied read-only (a prime slave)."""

MAX_INTERNED = 65_536
"""Bound of each intern cache (holder tuples, topic queues); cleared when passed."""
SHARE_CANDIDATES = 4
"""Distinct tables of the same size a whole table is compared with to share one of them."""


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


class TopicQueues(NamedTuple):
    """A broker's queues of one topic, the broker left out: one interned value serves every
    topic and every broker with these counts, perm and flag (a :class:`QueueSpec`); a route
    lists it as a ``QueueData`` of the broker."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int


Table = dict[str, TopicQueues]
"""topic -> the broker's queues of it."""


@dataclass(slots=True)
class BrokerGroup:
    """A broker name's entry in upstream's ``brokerAddrTable``: addresses by broker id."""

    cluster: str
    addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None
    """The zone its last register declared; upstream keeps one per broker name."""

    def read_only(self) -> bool:
        """Whether acting master is on and no master is left: the group's queues are read-only."""
        return self.enable_acting_master and min(self.addrs) != MASTER_ID


@dataclass(slots=True)
class LiveBroker:
    """upstream's ``BrokerLiveInfo``: when the broker last spoke, how long it may stay silent."""

    broker_name: str
    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    channel: object
    ha_server_addr: str
    body_digest: bytes | None = None
    """Digest of the register body this entry came from: an identical body is a heartbeat."""
    table_key: Hashable | None = None
    """Identity of that body but for its data version (``protocol.register.identity``), when
    certified: a body with the same key differs from it only in the version."""


def broker_data(name: str, group: BrokerGroup) -> BrokerData:
    """A broker group as routes and cluster info list it (addresses sorted by id)."""
    return BrokerData(
        cluster=group.cluster,
        broker_name=name,
        broker_addrs=dict(sorted(group.addrs.items())),
        zone_name=group.zone_name,
        enable_acting_master=group.enable_acting_master,
    )


class RouteTables:
    """upstream's ``RouteInfoManager`` tables, indexed for lookups and sized for large brokers."""

    def __init__(self) -> None:
        self.tables: dict[str, Table] = {}
        """broker name → topic → its queues (upstream's ``topicQueueTable`` by broker); never
        empty maps. Equal queues are one shared object; equal tables may be one shared object
        too (see :meth:`share_table`): write a table only through :meth:`writable`."""
        self.shared: set[str] = set()
        """Brokers whose table object another broker holds too."""
        self.writes = 0
        """Counts :meth:`writable`: while it stands, no table was written."""
        self.holders: dict[str, Holders] = {}
        """topic → sorted names of the brokers holding its queues; never empty, interned."""
        self._holders_with: dict[tuple[Holders, str], Holders] = {}
        self._holders_without: dict[tuple[Holders, str], Holders] = {}
        self.queue_pool: dict[Spec, TopicQueues] = {}
        """spec → its interned topic queues."""
        self.brokers: dict[str, BrokerGroup] = {}
        self.clusters: dict[str, set[str]] = {}
        """cluster name → its broker names; never empty sets."""
        self.live: dict[AddrKey, LiveBroker] = {}
        self._live_by_channel: dict[object, set[AddrKey]] = {}
        self.filters: dict[AddrKey, list[str]] = {}
        """Filter servers of a broker address; never empty lists."""
        self.mapping: dict[str, dict[str, object]] = {}
        """topic → broker name → TopicQueueMappingInfo (5.x static topics), passed through."""
        self.unsettled: set[str] = set()
        """Brokers whose last register's table is not fully applied: the next rewrites all."""
        self.applied_parts: dict[str, PartsMemo] = {}
        """broker name → the chunks its table holds exactly (as read by
        :mod:`protocol.register.plain_fast`): a register listing one of them again skips it.
        Forgotten as soon as anything else writes the table."""
        self.lacking: set[str] = set()
        """Brokers that lost topics outside a register (DELETE_TOPIC): the next register, even
        with an unchanged data version, writes back the topics it lists and we lack (as
        upstream's per-topic check does)."""

    # -- queue data and holders ----------------------------------------------------------------

    def queues(self, spec: Spec) -> TopicQueues:
        """The interned topic queues for ``spec``."""
        pool = self.queue_pool
        queues = pool.get(spec)
        if queues is None:
            if len(pool) >= MAX_INTERNED:
                pool.clear()
            queues = pool[spec] = TopicQueues(*spec)
        return queues

    # -- shared tables ---------------------------------------------------------------------------

    def writable(self, broker_name: str) -> Table:
        """The broker's table to write (made empty when it has none): its own copy first when
        it shares the table with other brokers, so they keep theirs as it was."""
        self.writes += 1
        table = self.tables.get(broker_name)
        if table is None:
            table = self.tables[broker_name] = {}
        elif broker_name in self.shared:
            self.tables[broker_name] = copy = dict(table)
            self._leave_share(broker_name, table)
            table = copy
        return table

    def table_like(self, broker_name: str, size: int) -> Table | None:
        """Another broker's table of ``size`` topics, the one a new table of that size is most
        likely equal to (a cluster's brokers hold the same topics)."""
        for name, table in self.tables.items():
            if len(table) == size and name != broker_name:
                return table
        return None

    def hold_table(self, broker_name: str, table: Table) -> None:
        """Make the broker, holding no table, hold another broker's ``table`` object."""
        sharers = [name for name, held in self.tables.items() if held is table]
        self.tables[broker_name] = table
        self.shared.update((broker_name, *sharers))

    def keep_only(self, broker_name: str, topics: list[str]) -> None:
        """Cut the broker's table to ``topics`` (those of them it holds), in its own object:
        what a register leaves of another broker's table it held whole (see
        ``RegisterJobs``) when it stops mid-way or turns out to list fewer topics. The topics
        cut never listed the broker as a holder."""
        table = self.tables.get(broker_name)
        if table is None:
            return
        kept = {topic: table[topic] for topic in topics if topic in table}
        if broker_name in self.shared:
            self._leave_share(broker_name, table)
        self.writes += 1
        self.applied_parts.pop(broker_name, None)
        if kept:
            self.tables[broker_name] = kept
        else:
            del self.tables[broker_name]

    def share_table(self, broker_name: str) -> bool:
        """Make the broker hold the table object of another broker when the two are equal
        (compared in C, as the topic queues are interned); returns whether it does now.
        Called once a table was written whole, as a register leaves it."""
        table = self.tables.get(broker_name)
        if not table or broker_name in self.shared:
            return False
        size = len(table)
        seen: list[Table] = []
        for name, other in self.tables.items():
            if other is table or len(other) != size or any(o is other for o in seen):
                continue
            if other == table:
                self.tables[broker_name] = other
                self.shared.update((broker_name, name))
                return True
            seen.append(other)
            if len(seen) >= SHARE_CANDIDATES:
                break
        return False

    def _leave_share(self, broker_name: str, table: Table) -> None:
        """``broker_name`` no longer holds ``table``: a single broker left holding it owns it."""
        self.shared.discard(broker_name)
        others = [name for name in self.shared if self.tables.get(name) is table]
        if len(others) == 1:
            self.shared.discard(others[0])

    def add_holder(self, topic: str, broker_name: str) -> None:
        self.holders[topic] = self._with_holder(self.holders.get(topic, ()), broker_name)

    def add_holders(self, topics: list[str], broker_name: str) -> None:
        """:meth:`add_holder` for many topics: their holder tuples are interned, so the new
        tuple is made once per distinct old one and the table is updated in C."""
        if not topics:
            return
        holders = self.holders
        before = list(map(holders.get, topics, repeat(())))
        if before.count(before[0]) == len(before):
            # The usual slice: every topic held by the same brokers (one cluster's brokers
            # share their topics); the list count compares by identity first, in C.
            holders.update(zip(topics, repeat(self._with_holder(before[0], broker_name))))
            return
        # Keyed by identity: hashing a holder tuple hashes every name in it.
        ids = list(map(id, before))
        distinct = dict(zip(ids, before, strict=True))
        grown = {i: self._with_holder(old, broker_name) for i, old in distinct.items()}
        holders.update(zip(topics, map(grown.__getitem__, ids), strict=True))

    def _with_holder(self, holders: Holders, broker_name: str) -> Holders:
        """The interned holder tuple ``holders`` plus ``broker_name``."""
        cache_key = (holders, broker_name)
        grown = self._holders_with.get(cache_key)
        if grown is None:
            if len(self._holders_with) >= MAX_INTERNED:
                self._holders_with.clear()
            grown = self._holders_with[cache_key] = tuple(sorted({*holders, broker_name}))
        return grown

    def remove_holder(self, topic: str, broker_name: str) -> None:
        holders = self.holders.get(topic)
        if holders is None:
            return
        cache_key = (holders, broker_name)
        shrunk = self._holders_without.get(cache_key)
        if shrunk is None:
            if len(self._holders_without) >= MAX_INTERNED:
                self._holders_without.clear()
            shrunk = tuple(n for n in holders if n != broker_name)
            self._holders_without[cache_key] = shrunk
        if shrunk:
            self.holders[topic] = shrunk
        else:
            del self.holders[topic]

    def forget_holder(self, topic: str, broker_name: str) -> None:
        """After ``broker_name``'s table left: unlist it from ``topic`` unless it holds the topic
        again (it re-registered meanwhile), and drop its mapping info."""
        if topic in self.tables.get(broker_name, ()):
            return
        self.remove_holder(topic, broker_name)
        if topic in self.mapping:
            self._drop_mapping(topic, broker_name)

    def drop_queue_data(self, topic: str, broker_name: str) -> None:
        """Remove one broker's queue data of ``topic``; a topic left with none is deleted."""
        if topic in self.tables.get(broker_name, ()):
            table = self.writable(broker_name)
            del table[topic]
            self.applied_parts.pop(broker_name, None)
            self.remove_holder(topic, broker_name)
            if not table:
                del self.tables[broker_name]
        if topic in self.mapping:
            self._drop_mapping(topic, broker_name)

    def _drop_mapping(self, topic: str, broker_name: str) -> None:
        mapping = self.mapping[topic]
        mapping.pop(broker_name, None)
        if not mapping:
            del self.mapping[topic]

    def rewrite_perm(self, broker_name: str, new: Callable[[int], int]) -> set[str]:
        """Set the perm of every queue data of the broker to ``new(perm)``; returns the topics
        whose queue data changed."""
        table = self.tables.get(broker_name)
        if table is None:
            return set()
        self.applied_parts.pop(broker_name, None)
        rewritten: dict[TopicQueues, TopicQueues] = {}  # few distinct queues per broker
        for queues in set(table.values()):
            read, write, perm, flag = queues
            perm = int(new(perm))
            rewritten[queues] = self.queues((read, write, perm, flag))
        moved = {old: out for old, out in rewritten.items() if out != old}
        if not moved:
            return set()
        changed = {topic: moved[q] for topic, q in table.items() if q in moved}
        self.writable(broker_name).update(changed)
        return set(changed)

    def write_mapping(self, broker_name: str, infos: Mapping[str, object]) -> set[str]:
        """Store the broker's static-topic mapping infos of topics it holds; returns the topics
        whose info changed."""
        touched: set[str] = set()
        held = self.tables.get(broker_name, {})
        for topic, info in infos.items():
            if topic not in held:  # mapping without queue data would never be cleaned up
                continue
            by_broker = self.mapping.setdefault(topic, {})
            if by_broker.get(broker_name) != info:
                by_broker[broker_name] = info
                touched.add(topic)
        return touched

    # -- brokers ---------------------------------------------------------------------------------

    def set_live(self, key: AddrKey, live: LiveBroker | None) -> LiveBroker | None:
        """Replace (or with None, remove) a live entry, keeping the channel index; returns the
        previous entry."""
        previous = self.live.pop(key, None)
        if previous is not None:
            keys = self._live_by_channel.get(previous.channel)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._live_by_channel[previous.channel]
        if live is not None:
            self.live[key] = live
            if live.channel is not None:
                self._live_by_channel.setdefault(live.channel, set()).add(key)
        return previous

    def live_on_channel(self, channel: object) -> list[AddrKey]:
        """The addresses registered over ``channel``, sorted."""
        return sorted(self._live_by_channel.get(channel, ()))

    def has_channel(self, channel: object) -> bool:
        """Whether some live broker address is registered over ``channel``."""
        return channel in self._live_by_channel

    def channel_index(self) -> dict[object, set[AddrKey]]:
        """channel → the addresses registered over it (a copy, for consistency checks)."""
        return {channel: set(keys) for channel, keys in self._live_by_channel.items()}

    def topics_of_addr(self, key: AddrKey) -> set[str]:
        """Topics whose route lists the filter servers of ``key`` (any group holding it).

        Scans the broker groups; only filter-server changes call it, and those are rare.
        """
        cluster, addr = key
        topics: set[str] = set()
        for name, group in self.brokers.items():
            if group.cluster == cluster and addr in group.addrs.values():
                topics.update(self.tables.get(name, ()))
        return topics

    def forget_broker_name(self, broker_name: str) -> Table:
        """The broker name lost its last address: drop its group, cluster membership and
        per-broker state; returns its table, whose topics still list it as a holder."""
        del self.brokers[broker_name]
        self.unsettled.discard(broker_name)
        self.lacking.discard(broker_name)
        for cluster in [c for c, names in self.clusters.items() if broker_name in names]:
            names = self.clusters[cluster]
            names.discard(broker_name)
            if not names:
                del self.clusters[cluster]
        self.applied_parts.pop(broker_name, None)
        table = self.tables.pop(broker_name, {})
        if broker_name in self.shared:
            self._leave_share(broker_name, table)
        return table
