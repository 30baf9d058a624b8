"""The route tables of the name server, as upstream's ``RouteInfoManager`` keeps them.

Pure logic with an injected clock: no sockets, no timers (the server calls
:meth:`RouteRegistry.scan_not_active_brokers` on its own schedule). Every mutation reports the
topics whose assembled route may have changed to the listener, with the cause, right after it
happens; that report is what invalidates cached route bodies and drives change detection, so
it may over-report (the detector compares bytes) but must never miss a topic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from namesrv.change_cause import ChangeCause
from protocol.codes import PERM_READ_WRITE, Perm
from protocol.route_model import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicRouteData,
)

MASTER_ID = 0
TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2

Listener = Callable[[Iterable[str], ChangeCause], None]


@dataclass(frozen=True, slots=True)
class RegisterResult:
    ha_server_addr: str | None
    master_addr: str | None
    changed_topics: list[str]


@dataclass(slots=True)
class _Broker:
    """A broker name's group: its cluster and addresses by broker id."""

    cluster: str
    addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None


@dataclass(slots=True)
class _Live:
    """upstream's BrokerLiveInfo: when the broker last spoke and how long it may stay silent."""

    broker_name: str
    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    channel: object
    ha_server_addr: str


class RouteRegistry:
    def __init__(
        self, clock: Any, *, broker_expiry_ms: int = 120_000, listener: Listener | None = None
    ) -> None:
        self._clock = clock
        self._expiry_ms = broker_expiry_ms
        self._listener = listener
        self._topics: dict[str, dict[str, QueueData]] = {}
        """topic → broker name → queue data (upstream's topicQueueTable)."""
        self._topics_of_broker: dict[str, set[str]] = {}
        """broker name → topics it holds queues of: the index that keeps changes O(its topics)."""
        self._brokers: dict[str, _Broker] = {}
        self._clusters: dict[str, set[str]] = {}
        self._live: dict[tuple[str, str], _Live] = {}
        """(cluster, broker address) → live info."""
        self._filters: dict[str, list[str]] = {}
        self._mapping: dict[str, dict[str, Any]] = {}
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
        topic_configs: dict[str, TopicConfig],
        data_version: DataVersion,
        filter_server_list: list[str],
        heartbeat_timeout_ms: int | None,
        enable_acting_master: bool,
        channel: object,
        topic_queue_mapping_info: dict[str, Any],
    ) -> RegisterResult:
        touched: set[str] = set()
        self._clusters.setdefault(cluster_name, set()).add(broker_name)
        broker = self._brokers.get(broker_name)
        if broker is None:
            broker = self._brokers[broker_name] = _Broker(cluster_name)
        held = self._topics_of_broker.setdefault(broker_name, set())
        before = (dict(broker.addrs), broker.enable_acting_master, broker.cluster)
        # One address holds one id: a slave promoted to master drops its old slot.
        for bid in [b for b, a in broker.addrs.items() if a == broker_addr and b != broker_id]:
            del broker.addrs[bid]
        first_registration = broker.addrs.get(broker_id) != broker_addr
        broker.addrs[broker_id] = broker_addr
        broker.enable_acting_master = enable_acting_master
        broker.cluster = cluster_name
        if before != (broker.addrs, broker.enable_acting_master, broker.cluster):
            touched |= held

        key = (cluster_name, broker_addr)
        previous = self._live.get(key)
        version_changed = previous is None or previous.data_version != data_version
        if broker_id == MASTER_ID:
            if version_changed or first_registration:
                touched |= self._write_queue_datas(broker_name, topic_configs, replace_all=True)
            else:  # as upstream: a topic this broker lacks still gets its queue data
                missing = {n: tc for n, tc in topic_configs.items() if n not in held}
                touched |= self._write_queue_datas(broker_name, missing, replace_all=False)
            touched |= self._write_mapping(broker_name, topic_queue_mapping_info)

        self._live[key] = _Live(
            broker_name=broker_name,
            last_update_ms=self._now_ms(),
            timeout_ms=heartbeat_timeout_ms or self._expiry_ms,
            data_version=data_version,
            channel=channel,
            ha_server_addr=ha_server_addr,
        )
        servers = list(filter_server_list)
        if self._filters.get(broker_addr, []) != servers:
            if servers:
                self._filters[broker_addr] = servers
            else:
                self._filters.pop(broker_addr, None)
            touched |= held

        master_addr = ha_addr = None
        if broker_id != MASTER_ID:
            master_addr = broker.addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self._live.get((cluster_name, master_addr))
                ha_addr = master_live.ha_server_addr if master_live is not None else None
        cause = (
            ChangeCause.BROKER_STARTUP
            if previous is None and len(topic_configs) > 1
            else ChangeCause.REGISTER
        )
        self._report(touched, cause)
        return RegisterResult(ha_addr, master_addr, sorted(touched))

    def _write_queue_datas(
        self, broker_name: str, configs: dict[str, TopicConfig], *, replace_all: bool
    ) -> set[str]:
        touched: set[str] = set()
        held = self._topics_of_broker.setdefault(broker_name, set())
        for name, tc in configs.items():
            qd = QueueData(
                broker_name=broker_name,
                read_queue_nums=tc.read_queue_nums,
                write_queue_nums=tc.write_queue_nums,
                perm=tc.perm,
                topic_sys_flag=tc.topic_sys_flag,
            )
            queues = self._topics.setdefault(name, {})
            if queues.get(broker_name) != qd:
                queues[broker_name] = qd
                touched.add(name)
            held.add(name)
        if replace_all:  # the master reported its whole table: drop what it no longer has
            for name in held - configs.keys():
                self._drop_queue_data(name, broker_name)
                touched.add(name)
        return touched

    def _write_mapping(self, broker_name: str, infos: dict[str, Any]) -> set[str]:
        touched: set[str] = set()
        for topic, info in infos.items():
            by_broker = self._mapping.setdefault(topic, {})
            if by_broker.get(broker_name) != info:
                by_broker[broker_name] = info
                touched.add(topic)
        return touched

    def unregister_broker(
        self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        self._remove_broker_addr(cluster_name, broker_addr, broker_name, ChangeCause.UNREGISTER)

    def on_channel_close(self, channel: object) -> None:
        """The connection a broker registered over closed: remove it as an unregister would."""
        for (cluster, addr), live in list(self._live.items()):
            if live.channel == channel:
                self._remove_broker_addr(cluster, addr, live.broker_name, ChangeCause.CHANNEL_CLOSE)

    def scan_not_active_brokers(self) -> list[str]:
        """Remove brokers silent past their timeout; returns their addresses."""
        now = self._now_ms()
        expired = [
            (key, live)
            for key, live in self._live.items()
            if now - live.last_update_ms > live.timeout_ms
        ]
        for (cluster, addr), live in expired:
            self._remove_broker_addr(cluster, addr, live.broker_name, ChangeCause.EXPIRY)
        return [addr for (_, addr), _ in expired]

    def broker_heartbeat(self, *, cluster_name: str, broker_addr: str) -> None:
        live = self._live.get((cluster_name, broker_addr))
        if live is not None:
            live.last_update_ms = self._now_ms()

    def query_data_version_changed(
        self, *, cluster_name: str, broker_addr: str, data_version: DataVersion
    ) -> bool:
        """Whether the broker must re-register; an unchanged answer counts as a heartbeat."""
        live = self._live.get((cluster_name, broker_addr))
        if live is None or live.data_version != data_version:
            return True
        live.last_update_ms = self._now_ms()
        return False

    def _remove_broker_addr(
        self, cluster: str, addr: str, broker_name: str, cause: ChangeCause
    ) -> None:
        live = self._live.pop((cluster, addr), None)
        if live is not None:
            broker_name = live.broker_name
        touched: set[str] = set()
        if self._filters.pop(addr, None) is not None:
            touched |= self._topics_of_broker.get(broker_name, set())
        broker = self._brokers.get(broker_name)
        if broker is not None:
            gone = [bid for bid, a in broker.addrs.items() if a == addr]
            for bid in gone:
                del broker.addrs[bid]
            if gone:
                touched |= self._topics_of_broker.get(broker_name, set())
            if not broker.addrs:
                del self._brokers[broker_name]
                names = self._clusters.get(broker.cluster)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self._clusters[broker.cluster]
                for topic in list(self._topics_of_broker.pop(broker_name, ())):
                    self._drop_queue_data(topic, broker_name)
                    touched.add(topic)
        self._report(touched, cause)

    def _drop_queue_data(self, topic: str, broker_name: str) -> None:
        queues = self._topics.get(topic)
        if queues is not None:
            queues.pop(broker_name, None)
            if not queues:
                del self._topics[topic]
        held = self._topics_of_broker.get(broker_name)
        if held is not None:
            held.discard(topic)
        mapping = self._mapping.get(topic)
        if mapping is not None:
            mapping.pop(broker_name, None)
            if not mapping:
                del self._mapping[topic]

    # -- routes --------------------------------------------------------------------------------

    def get_route(self, topic: str) -> TopicRouteData | None:
        """The assembled route, or None when no broker holds queues of ``topic``."""
        queues = self._topics.get(topic)
        if not queues:
            return None
        names = sorted(queues)
        broker_datas = []
        filters: dict[str, list[str]] = {}
        for name in names:
            broker = self._brokers.get(name)
            if broker is None:
                continue
            broker_datas.append(
                BrokerData(
                    cluster=broker.cluster,
                    broker_name=name,
                    broker_addrs=dict(sorted(broker.addrs.items())),
                    zone_name=broker.zone_name,
                    enable_acting_master=broker.enable_acting_master,
                )
            )
            for addr in broker.addrs.values():
                servers = self._filters.get(addr)
                if servers:
                    filters[addr] = list(servers)
        if not broker_datas:
            return None
        mapping = self._mapping.get(topic)
        return TopicRouteData(
            queue_datas=[queues[n] for n in names],
            broker_datas=broker_datas,
            filter_server_table=filters,
            topic_queue_mapping_by_broker=dict(mapping) if mapping else None,
        )

    def route_exists(self, topic: str) -> bool:
        return bool(self._topics.get(topic))

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear the write bit of ``broker_name``'s queues; returns the topics it holds."""
        return self._set_perm(broker_name, ChangeCause.WIPE_WRITE_PERM, lambda p: p & ~Perm.WRITE)

    def add_write_perm(self, broker_name: str) -> int:
        """Set ``broker_name``'s queues to read-write, as upstream does."""
        return self._set_perm(broker_name, ChangeCause.ADD_WRITE_PERM, lambda p: PERM_READ_WRITE)

    def _set_perm(self, broker_name: str, cause: ChangeCause, new: Callable[[int], int]) -> int:
        touched: set[str] = set()
        held = self._topics_of_broker.get(broker_name, set())
        for topic in held:
            queues = self._topics[topic]
            qd = queues[broker_name]
            perm = int(new(qd.perm))
            if perm != qd.perm:
                queues[broker_name] = QueueData(
                    qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, perm, qd.topic_sys_flag
                )
                touched.add(topic)
        self._report(touched, cause)
        return len(held)

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """Delete ``topic`` everywhere, or only its queues on brokers of ``cluster_name``."""
        queues = self._topics.get(topic)
        if queues is None:
            return
        if cluster_name:
            names = [n for n in queues if n in self._clusters.get(cluster_name, set())]
        else:
            names = list(queues)
        for name in names:
            self._drop_queue_data(topic, name)
        if names:
            self._report({topic}, ChangeCause.DELETE_TOPIC)

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: write queue data of known brokers directly."""
        changed = False
        for qd in queue_datas:
            if qd.broker_name not in self._brokers:
                continue
            queues = self._topics.setdefault(topic, {})
            if queues.get(qd.broker_name) != qd:
                queues[qd.broker_name] = qd
                self._topics_of_broker.setdefault(qd.broker_name, set()).add(topic)
                changed = True
        if changed:
            self._report({topic}, ChangeCause.REGISTER_TOPIC)

    # -- listings ------------------------------------------------------------------------------

    def all_topics(self) -> list[str]:
        return list(self._topics)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        out: set[str] = set()
        for name in self._clusters.get(cluster, ()):
            out |= self._topics_of_broker.get(name, set())
        return sorted(out)

    def system_topics(self) -> list[str]:
        """Cluster and broker names, which upstream brokers also create as topics."""
        out: set[str] = set(self._clusters)
        for names in self._clusters.values():
            out |= names
        return sorted(out)

    def _topics_with_flags(self, want: int, refuse: int = 0) -> list[str]:
        out = []
        for topic, queues in self._topics.items():
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
                name: BrokerData(
                    cluster=b.cluster,
                    broker_name=name,
                    broker_addrs=dict(sorted(b.addrs.items())),
                    zone_name=b.zone_name,
                    enable_acting_master=b.enable_acting_master,
                )
                for name, b in self._brokers.items()
            },
            cluster_addr_table={c: sorted(names) for c, names in self._clusters.items()},
        )

    def broker_member_group(self, cluster_name: str, broker_name: str) -> dict[int, str]:
        broker = self._brokers.get(broker_name)
        if broker is None or broker.cluster != cluster_name:
            return {}
        return dict(sorted(broker.addrs.items()))

    @property
    def broker_count(self) -> int:
        return len(self._live)

    @property
    def topic_count(self) -> int:
        return len(self._topics)

    # -- internals -----------------------------------------------------------------------------

    def _report(self, topics: set[str], cause: ChangeCause) -> None:
        if topics and self._listener is not None:
            self._listener(topics, cause)

    def _now_ms(self) -> int:
        return int(self._clock.seconds() * 1000)
