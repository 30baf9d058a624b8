"""What the route tables answer: assembled routes, topic lists, cluster info, broker groups.

Read-only over :class:`RouteTables`; every answer is a fresh object the caller may keep.
"""

from __future__ import annotations

from collections.abc import Callable

from namesrv.routes.tables import (
    TOPIC_SYS_FLAG_UNIT,
    TOPIC_SYS_FLAG_UNIT_SUB,
    RouteTables,
    broker_data,
)
from protocol.route_model import ClusterInfo, QueueData, TopicRouteData


class RouteQueries:
    """Lookups and listings of the route tables."""

    def __init__(self, tables: RouteTables) -> None:
        self._t = tables

    def get_route(self, topic: str) -> TopicRouteData | None:
        """The assembled route, or None when no broker holds queues of ``topic``.

        Queue and broker datas are sorted by broker name so equal tables encode to equal bytes.
        ``order_topic_conf`` is left for ``RouteBodies`` to fill in.
        """
        t = self._t
        names = t.holders.get(topic)
        if not names:
            return None
        broker_datas = []
        queue_datas = []
        filters: dict[str, list[str]] = {}
        tables = t.tables
        brokers = t.brokers
        filter_table = t.filters
        for name in names:
            group = brokers.get(name)
            table = tables.get(name)
            queues = table.get(topic) if table is not None else None
            if group is None or queues is None:
                continue  # a departed broker whose queue data is still being dropped
            queue_datas.append(QueueData(name, *queues))
            broker_datas.append(broker_data(name, group))
            for addr in group.addrs.values():
                servers = filter_table.get((group.cluster, addr))
                if servers:
                    filters[addr] = list(servers)
        if not broker_datas:
            return None
        mapping = t.mapping.get(topic)
        return TopicRouteData(
            queue_datas=queue_datas,
            broker_datas=broker_datas,
            filter_server_table=filters,
            topic_queue_mapping_by_broker=dict(sorted(mapping.items())) if mapping else None,
        )

    def zone_names(self) -> set[str]:
        """The zones the broker groups declare, as they spelled them."""
        return {g.zone_name for g in self._t.brokers.values() if g.zone_name is not None}

    def route_exists(self, topic: str) -> bool:
        return topic in self._t.holders

    def route_exists_check(self) -> Callable[[str], bool]:
        """:meth:`route_exists` as the holders table's own membership test: a C callable, for
        testing many topics with ``map``."""
        return self._t.holders.__contains__

    def has_cluster(self, cluster: str) -> bool:
        return cluster in self._t.clusters

    def all_topics(self) -> list[str]:
        return sorted(self._t.holders)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        out: set[str] = set()
        for name in self._t.clusters.get(cluster, ()):
            out.update(self._t.tables.get(name, ()))
        return sorted(out)

    def system_topics(self) -> list[str]:
        """Cluster and broker names, the topics upstream brokers create for themselves."""
        clusters = self._t.clusters
        out: set[str] = set(clusters)
        for names in clusters.values():
            out |= names
        return sorted(out)

    def _topics_with_flags(self, want: int, refuse: int = 0) -> list[str]:
        """Topics whose sys flag (of their first queue data, as upstream reads it) matches."""
        out = []
        tables = self._t.tables
        for topic, names in self._t.holders.items():
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
        brokers, clusters = self._t.brokers, self._t.clusters
        return ClusterInfo(
            broker_addr_table={name: broker_data(name, brokers[name]) for name in sorted(brokers)},
            cluster_addr_table={c: sorted(clusters[c]) for c in sorted(clusters)},
        )

    def broker_member_group(self, cluster_name: str, broker_name: str) -> dict[int, str]:
        """GET_BROKER_MEMBER_GROUP: the broker name's addresses (upstream ignores the cluster)."""
        group = self._t.brokers.get(broker_name)
        return dict(sorted(group.addrs.items())) if group is not None else {}

    def topics_of_broker(self, broker_name: str) -> set[str]:
        """The topics ``broker_name`` holds queues of (a copy)."""
        return set(self._t.tables.get(broker_name, ()))
