"""The route tables of the name server, as upstream's ``RouteInfoManager`` keeps them.

Pure logic with an injected clock: no sockets, no timers (the server calls
:meth:`RouteRegistry.scan_not_active_brokers` on its own schedule). Every mutation reports the
topics whose assembled route (:meth:`RouteRegistry.get_route`) may have changed to the listener,
with the cause, right after it happens. That report invalidates cached route bodies and drives
change detection, so it may over-report (the detector compares bytes) but must never miss a topic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from namesrv.broker_events import BrokerEvent, BrokerListener
from namesrv.change_cause import ChangeCause
from protocol.codes import PERM_READ_WRITE, Perm
from protocol.push_codec import BrokerChangeKind
from protocol.route_model import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
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


class Clock(Protocol):
    def seconds(self) -> float: ...


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What REGISTER_BROKER answers: for a slave, its master's address and HA address."""

    ha_server_addr: str | None
    master_addr: str | None
    changed_topics: list[str]
    """Topics whose route this register may have changed (what the listener was told)."""


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
        broker_listener: BrokerListener | None = None,
    ) -> None:
        self._clock = clock
        self.broker_listener = broker_listener
        """Told of every address leaving or joining a broker name, after ``listener``."""
        self._expiry_ms = broker_expiry_ms
        self._listener = listener
        self._delete_with_registration = delete_topic_with_broker_registration
        self._topic_queues: dict[str, dict[str, QueueData]] = {}
        """topic → broker name → queue data (upstream's ``topicQueueTable``); never empty maps."""
        self._topics_of_broker: dict[str, set[str]] = {}
        """broker name → topics it has queue data in: keeps a broker's changes O(its topics)."""
        self._brokers: dict[str, _BrokerGroup] = {}
        self._clusters: dict[str, set[str]] = {}
        self._live: dict[_AddrKey, _Live] = {}
        self._live_by_channel: dict[object, set[_AddrKey]] = {}
        self._filters: dict[_AddrKey, list[str]] = {}
        self._mapping: dict[str, dict[str, object]] = {}
        """topic → broker name → TopicQueueMappingInfo (5.x static topics), passed through."""

    # -- brokers -------------------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_configs: Mapping[str, TopicConfig],
        data_version: DataVersion,
        filter_server_list: list[str],
        heartbeat_timeout_ms: int | None,
        enable_acting_master: bool,
        channel: object,
        topic_queue_mapping_info: Mapping[str, Any],
    ) -> RegisterResult:
        """REGISTER_BROKER, as upstream's ``registerBroker``; also the broker's heartbeat."""
        key = (cluster_name, broker_addr)
        previous = self._live.get(key)
        group = self._brokers.get(broker_name)
        if group is not None and self._stale_claim(group, key, broker_id, data_version):
            return RegisterResult(None, None, [])

        touched: set[str] = set()
        if previous is not None and previous.broker_name != broker_name:
            # One address serves one broker name: re-registering under another one moves it.
            touched |= self._leave_group(previous.broker_name, broker_addr)
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
            touched |= self._topics_of_broker.get(broker_name, set())

        is_master = broker_id == MASTER_ID
        # upstream's prime slave: with acting master on, the lowest id stands in for a master.
        is_prime_slave = enable_acting_master and not is_master and broker_id == min(group.addrs)
        if is_master or is_prime_slave:
            version_changed = previous is None or previous.data_version != data_version
            touched |= self._apply_topic_table(
                broker_name,
                topic_configs,
                rewrite_all=first_registration or version_changed,
                read_only=is_prime_slave,
                full_table=not topic_queue_mapping_info,
            )
            if first_registration or version_changed:
                touched |= self._write_mapping(broker_name, topic_queue_mapping_info)

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

        cause = (
            ChangeCause.BROKER_STARTUP
            if previous is None and len(topic_configs) > 1
            else ChangeCause.REGISTER
        )
        changed = self._report(touched, cause)
        if first_registration and self.broker_listener is not None:
            self.broker_listener(
                BrokerEvent(
                    BrokerChangeKind.ARRIVED,
                    cause,
                    cluster_name,
                    broker_name,
                    ((broker_id, broker_addr),),
                    tuple(changed),
                )
            )
        return RegisterResult(ha_addr, master_addr, changed)

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

    def _apply_topic_table(
        self,
        broker_name: str,
        configs: Mapping[str, TopicConfig],
        *,
        rewrite_all: bool,
        read_only: bool,
        full_table: bool,
    ) -> set[str]:
        """Write a master's topic table into queue data; returns the topics it changed.

        As upstream: every topic when the data version moved (or on first registration),
        otherwise only topics lacking this broker's queue data.
        """
        touched: set[str] = set()
        if self._delete_with_registration and full_table:
            held_before = self._topics_of_broker.get(broker_name, set())
            for name in [t for t in held_before if t not in configs]:
                self._drop_queue_data(name, broker_name)
                touched.add(name)
        held = self._topics_of_broker.setdefault(broker_name, set())
        for name, tc in configs.items():
            if not rewrite_all and name in held:
                continue
            perm = tc.perm & ~Perm.WRITE if read_only else tc.perm
            qd = QueueData(
                broker_name=broker_name,
                read_queue_nums=tc.read_queue_nums,
                write_queue_nums=tc.write_queue_nums,
                perm=perm,
                topic_sys_flag=tc.topic_sys_flag,
            )
            queues = self._topic_queues.setdefault(name, {})
            if queues.get(broker_name) != qd:
                queues[broker_name] = qd
                held.add(name)
                touched.add(name)
        if not held:
            del self._topics_of_broker[broker_name]
        return touched

    def _write_mapping(self, broker_name: str, infos: Mapping[str, Any]) -> set[str]:
        touched: set[str] = set()
        held = self._topics_of_broker.get(broker_name, set())
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
            touched |= self._leave_group(name, key[1])
        changed = self._report(touched, cause)
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

    def _leave_group(self, broker_name: str, addr: str) -> set[str]:
        """Remove ``addr`` from a broker group; returns the topics whose route may change."""
        group = self._brokers.get(broker_name)
        if group is None:
            return set()
        ids = [bid for bid, a in group.addrs.items() if a == addr]
        if not ids:
            return set()
        for bid in ids:
            del group.addrs[bid]
        held = self._topics_of_broker.get(broker_name, set())
        if group.addrs:
            if group.enable_acting_master and min(group.addrs) != MASTER_ID:
                self._rewrite_perm(broker_name, lambda p: p & ~Perm.WRITE)  # no master: read-only
            return set(held)
        # The broker name is gone: as upstream, its queue data leaves every topic.
        del self._brokers[broker_name]
        for cluster in [c for c, names in self._clusters.items() if broker_name in names]:
            names = self._clusters[cluster]
            names.discard(broker_name)
            if not names:
                del self._clusters[cluster]
        topics = set(held)
        for topic in topics:
            self._drop_queue_data(topic, broker_name)
        return topics

    def _drop_queue_data(self, topic: str, broker_name: str) -> None:
        """Remove one broker's queue data of ``topic``; a topic left with none is deleted."""
        queues = self._topic_queues.get(topic)
        if queues is not None:
            queues.pop(broker_name, None)
            if not queues:
                del self._topic_queues[topic]
        held = self._topics_of_broker.get(broker_name)
        if held is not None:
            held.discard(topic)
            if not held:
                del self._topics_of_broker[broker_name]
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
                topics |= self._topics_of_broker.get(name, set())
        return topics

    # -- routes --------------------------------------------------------------------------------

    def get_route(self, topic: str) -> TopicRouteData | None:
        """The assembled route, or None when no broker holds queues of ``topic``.

        Queue and broker datas are sorted by broker name so equal tables encode to equal bytes.
        ``order_topic_conf`` is left for ``RouteBodies`` to fill in.
        """
        queues = self._topic_queues.get(topic)
        if not queues:
            return None
        names = sorted(queues)
        broker_datas = []
        filters: dict[str, list[str]] = {}
        for name in names:
            group = self._brokers.get(name)
            if group is None:
                continue
            broker_datas.append(self._broker_data(name, group))
            for addr in group.addrs.values():
                servers = self._filters.get((group.cluster, addr))
                if servers:
                    filters[addr] = list(servers)
        if not broker_datas:
            return None
        mapping = self._mapping.get(topic)
        return TopicRouteData(
            queue_datas=[queues[n] for n in names],
            broker_datas=broker_datas,
            filter_server_table=filters,
            topic_queue_mapping_by_broker=dict(sorted(mapping.items())) if mapping else None,
        )

    def route_exists(self, topic: str) -> bool:
        return topic in self._topic_queues

    def wipe_write_perm(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER: clear the write bit of the broker's queues.

        Returns the number of topics holding its queues, as upstream counts them.
        """
        touched = self._rewrite_perm(broker_name, lambda p: p & ~Perm.WRITE)
        self._report(touched, ChangeCause.WIPE_WRITE_PERM)
        return len(self._topics_of_broker.get(broker_name, ()))

    def add_write_perm(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER: upstream sets the perm to READ|WRITE (dropping other bits)."""
        touched = self._rewrite_perm(broker_name, lambda p: PERM_READ_WRITE)
        self._report(touched, ChangeCause.ADD_WRITE_PERM)
        return len(self._topics_of_broker.get(broker_name, ()))

    def _rewrite_perm(self, broker_name: str, new: Callable[[int], int]) -> set[str]:
        touched: set[str] = set()
        for topic in self._topics_of_broker.get(broker_name, ()):
            queues = self._topic_queues[topic]
            qd = queues[broker_name]
            perm = int(new(qd.perm))
            if perm != qd.perm:
                queues[broker_name] = replace(qd, perm=perm)
                touched.add(topic)
        return touched

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: everywhere, or only its queues on brokers of a cluster."""
        queues = self._topic_queues.get(topic)
        if queues is None:
            return
        if cluster_name:
            in_cluster = self._clusters.get(cluster_name, set())
            names = [n for n in queues if n in in_cluster]
        else:
            names = list(queues)
        for name in names:
            self._drop_queue_data(topic, name)
        if names:
            self._report((topic,), ChangeCause.DELETE_TOPIC)

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: write queue data directly, for brokers already known.

        Queue data naming an unknown broker is skipped and logged (upstream refuses it too).
        """
        touched = False
        for qd in queue_datas:
            if qd.broker_name not in self._brokers:
                log.warning(
                    "REGISTER_TOPIC_IN_NAMESRV for %s names unknown broker %s; skipped",
                    topic,
                    qd.broker_name,
                )
                continue
            queues = self._topic_queues.setdefault(topic, {})
            if queues.get(qd.broker_name) != qd:
                queues[qd.broker_name] = qd
                self._topics_of_broker.setdefault(qd.broker_name, set()).add(topic)
                touched = True
        if touched:
            self._report((topic,), ChangeCause.REGISTER_TOPIC)

    # -- listings ------------------------------------------------------------------------------

    def all_topics(self) -> list[str]:
        return sorted(self._topic_queues)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        out: set[str] = set()
        for name in self._clusters.get(cluster, ()):
            out |= self._topics_of_broker.get(name, set())
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
        for topic, queues in self._topic_queues.items():
            flag = next(iter(queues.values())).topic_sys_flag
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
        return len(self._topic_queues)

    # -- internals -----------------------------------------------------------------------------

    @staticmethod
    def _broker_data(name: str, group: _BrokerGroup) -> BrokerData:
        return BrokerData(
            cluster=group.cluster,
            broker_name=name,
            broker_addrs=dict(sorted(group.addrs.items())),
            enable_acting_master=group.enable_acting_master,
        )

    def _report(self, topics: Collection[str], cause: ChangeCause) -> list[str]:
        ordered = sorted(topics)
        if ordered and self._listener is not None:
            self._listener(ordered, cause)
        return ordered

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)
