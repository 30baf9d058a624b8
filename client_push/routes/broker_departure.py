"""A departed broker dropped from a held route, as the name server drops it from its tables.

Pure. The name server's ``BrokerChange`` says which addresses left ``broker_name``, whether the
name is gone (its queue data then leaves every topic) and whether the remaining group turned
read-only (acting master without a master). Applying exactly that to a held route gives the
route the server assembles after the departure, so a client holding the step's
``from_version`` may adopt its ``version`` without asking (docs/protocol-extension.md).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from protocol.codes import Perm
from protocol.route_model import TopicRouteData


def without_broker(
    route: TopicRouteData,
    broker_name: str,
    addrs: Collection[str],
    *,
    name_gone: bool,
    read_only: bool,
) -> TopicRouteData | None:
    """``route`` after the departure; the same object when it does not list the broker.

    None when no queue data is left: the topic then has no route (TOPIC_NOT_EXIST).
    """
    listed = any(b.broker_name == broker_name for b in route.broker_datas) or any(
        q.broker_name == broker_name for q in route.queue_datas
    )
    if not listed:
        return route
    gone = set(addrs)
    if name_gone:
        queue_datas = [q for q in route.queue_datas if q.broker_name != broker_name]
        broker_datas = [b for b in route.broker_datas if b.broker_name != broker_name]
    else:
        queue_datas = [
            replace(q, perm=q.perm & ~Perm.WRITE)
            if read_only and q.broker_name == broker_name
            else q
            for q in route.queue_datas
        ]
        broker_datas = [
            replace(b, broker_addrs={i: a for i, a in b.broker_addrs.items() if a not in gone})
            if b.broker_name == broker_name
            else b
            for b in route.broker_datas
        ]
    if not queue_datas:
        return None
    mapping = route.topic_queue_mapping_by_broker
    if name_gone and mapping and broker_name in mapping:
        mapping = {name: info for name, info in mapping.items() if name != broker_name} or None
    filters = {a: s for a, s in route.filter_server_table.items() if a not in gone}
    return replace(
        route,
        queue_datas=queue_datas,
        broker_datas=broker_datas,
        filter_server_table=filters,
        topic_queue_mapping_by_broker=mapping,
    )
