"""The route tables every part of the registry reads and writes, and the types they hold.

Storage is sized for brokers with hundreds of thousands of topics: each broker's table maps
topic to a :class:`QueueData` shared by every topic with the same queue counts, perm and flag,
and each topic maps to one interned tuple of the broker names holding it.

:class:`RouteTables` is plain data with the primitives that keep its indexes consistent: the
holder tuples of ``holders`` follow ``tables`` only through its methods, and so does the channel
index of ``live``. The parts of the registry (registration, register jobs, departures, topic
admin, queries) share one instance; none of them keeps route state of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Protocol

from protocol.route_model import BrokerData, DataVersion, QueueData

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
"""Bound of each intern cache (holder tuples, queue data per broker); cleared when passed."""


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
        self.tables: dict[str, dict[str, QueueData]] = {}
        """broker name → topic → queue data (upstream's ``topicQueueTable`` by broker); never
        empty maps. Equal queue data of one broker is one shared object."""
        self.holders: dict[str, Holders] = {}
        """topic → sorted names of the brokers holding its queues; never empty, interned."""
        self._holders_with: dict[tuple[Holders, str], Holders] = {}
        self._holders_without: dict[tuple[Holders, str], Holders] = {}
        self.queue_pool: dict[str, dict[Spec, QueueData]] = {}
        """broker name → spec → its shared queue data."""
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

    def queue_data(self, broker_name: str, spec: Spec) -> QueueData:
        """The broker's shared queue data for ``spec``."""
        pool = self.queue_pool.setdefault(broker_name, {})
        qd = pool.get(spec)
        if qd is None:
            if len(pool) >= MAX_INTERNED:
                pool.clear()
            qd = pool[spec] = QueueData(broker_name, *spec)
        return qd

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
        table = self.tables.get(broker_name)
        if table is not None and table.pop(topic, None) is not None:
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
        touched: set[str] = set()
        table = self.tables.get(broker_name)
        if table is None:
            return touched
        self.applied_parts.pop(broker_name, None)
        rewritten: dict[QueueData, QueueData] = {}  # few distinct queue datas per broker
        for topic, qd in table.items():
            out = rewritten.get(qd)
            if out is None:
                perm = int(new(qd.perm))
                spec = (qd.read_queue_nums, qd.write_queue_nums, perm, qd.topic_sys_flag)
                out = rewritten[qd] = qd if perm == qd.perm else self.queue_data(broker_name, spec)
            if out is not qd:
                table[topic] = out
                touched.add(topic)
        return touched

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

    def forget_broker_name(self, broker_name: str) -> dict[str, QueueData]:
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
        self.queue_pool.pop(broker_name, None)
        self.applied_parts.pop(broker_name, None)
        return self.tables.pop(broker_name, {})
