"""Admin writes to the route tables outside registers: write perms and topics.

Each write forgets the written broker's chunk memo (``RouteTables.applied_parts``): its table
is no longer exactly what those chunks made, so the broker's next register skips none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from namesrv.ops.clock import Clock
from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.events import Announcer
from namesrv.routes.tables import RouteTables
from protocol.codes import PERM_READ_WRITE, Perm
from protocol.paced_log import PacedLog
from protocol.route_model import QueueData

log = logging.getLogger(__name__)


class TopicAdmin:
    """WIPE/ADD_WRITE_PERM_OF_BROKER, DELETE_TOPIC_IN_NAMESRV and REGISTER_TOPIC_IN_NAMESRV."""

    def __init__(self, tables: RouteTables, announce: Announcer, clock: Clock) -> None:
        self._t = tables
        self._announce = announce
        self._log = PacedLog(log, clock.seconds)

    def wipe_write_perm(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER: clear the write bit of the broker's queues.

        Returns the number of topics holding its queues, as upstream counts them.
        """
        touched = self._t.rewrite_perm(broker_name, lambda p: p & ~Perm.WRITE)
        self._announce.topics(touched, ChangeCause.WIPE_WRITE_PERM)
        return len(self._t.tables.get(broker_name, ()))

    def add_write_perm(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER: upstream sets the perm to READ|WRITE (dropping other bits)."""
        touched = self._t.rewrite_perm(broker_name, lambda p: PERM_READ_WRITE)
        self._announce.topics(touched, ChangeCause.ADD_WRITE_PERM)
        return len(self._t.tables.get(broker_name, ()))

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> list[str]:
        """DELETE_TOPIC_IN_NAMESRV: everywhere, or only its queues on brokers of a cluster.
        Returns the broker names whose queues of the topic it dropped."""
        t = self._t
        holders = t.holders.get(topic)
        if holders is None:
            return []
        if cluster_name:
            in_cluster = t.clusters.get(cluster_name, set())
            names = [n for n in holders if n in in_cluster]
        else:
            names = list(holders)
        for name in names:
            t.drop_queue_data(topic, name)
            t.lacking.add(name)
        if names:
            self._announce.topics((topic,), ChangeCause.DELETE_TOPIC)
        return names

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: write queue data directly, for brokers already known.

        Queue data naming an unknown broker is skipped (upstream refuses it too) and counted
        in one paced line per request, however many it names.
        """
        t = self._t
        touched = False
        unknown: list[str] = []
        for given in queue_datas:
            name = given.broker_name
            if name not in t.brokers:
                unknown.append(name)
                continue
            queues = t.queues(
                (given.read_queue_nums, given.write_queue_nums, given.perm, given.topic_sys_flag)
            )
            old = t.tables.get(name, {}).get(topic)
            if old != queues:
                if old is None:
                    t.add_holder(topic, name)
                t.writable(name)[topic] = queues
                t.applied_parts.pop(name, None)
                touched = True
        if unknown:
            self._log.warning(
                "register_topic_unknown_broker",
                "REGISTER_TOPIC_IN_NAMESRV for %s names %d unknown brokers (first: %s); skipped",
                topic,
                len(unknown),
                unknown[0],
            )
        if touched:
            self._announce.topics((topic,), ChangeCause.REGISTER_TOPIC)
