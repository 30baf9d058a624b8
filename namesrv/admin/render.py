"""Output of the admin verbs: aligned text tables for people, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from protocol.bodies import broker_data_doc, queue_data_doc
from protocol.codes import Perm
from protocol.peer_text import json_printable, printable
from protocol.route_model import ClusterInfo, TopicRouteData


def cell(value: Any) -> str:
    """A value as a table shows it: booleans as JSON and upstream's ``mqadmin`` spell them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    # A cell may hold a server's string: one line, its control characters escaped.
    cells = [[str(c) for c in headers], *[[printable(cell(c), None) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def as_json(doc: Any) -> str:
    return json_printable(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))


def perm_text(perm: int) -> str:
    """As ``PermName.perm2String``: R, W and X (inherit) or -."""
    return "".join(
        flag if perm & bit else "-"
        for flag, bit in (("R", Perm.READ), ("W", Perm.WRITE), ("X", Perm.INHERIT))
    )


def route_doc(topic: str, route: TopicRouteData, version: str | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "topic": topic,
        "queueDatas": [queue_data_doc(q) for q in route.queue_datas],
        "brokerDatas": [broker_data_doc(b) for b in route.broker_datas],
        "filterServerTable": {k: list(v) for k, v in route.filter_server_table.items()},
    }
    if route.order_topic_conf is not None:
        doc["orderTopicConf"] = route.order_topic_conf
    if version is not None:
        doc["routeVersion"] = int(version)
    return doc


def route_table(route: TopicRouteData) -> str:
    queues = {q.broker_name: q for q in route.queue_datas}
    rows = []
    for b in sorted(route.broker_datas, key=lambda b: b.broker_name):
        q = queues.get(b.broker_name)
        for broker_id, addr in sorted(b.broker_addrs.items()):
            rows.append(
                (
                    b.cluster,
                    b.broker_name,
                    broker_id,
                    addr,
                    q.read_queue_nums if q else "-",
                    q.write_queue_nums if q else "-",
                    perm_text(q.perm) if q else "-",
                )
            )
    text = table(("CLUSTER", "BROKER", "ID", "ADDRESS", "READ", "WRITE", "PERM"), rows)
    if route.order_topic_conf:
        text += f"\norderTopicConf: {printable(route.order_topic_conf, None)}"
    return text


def cluster_doc(info: ClusterInfo) -> dict[str, Any]:
    return {
        "clusterAddrTable": {k: sorted(v) for k, v in sorted(info.cluster_addr_table.items())},
        "brokerAddrTable": {
            name: broker_data_doc(b) for name, b in sorted(info.broker_addr_table.items())
        },
    }


def cluster_table(info: ClusterInfo) -> str:
    rows = []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            b = info.broker_addr_table.get(name)
            addrs: list[tuple[Any, str]] = sorted(b.broker_addrs.items()) if b else []
            for broker_id, addr in addrs or [("-", "-")]:
                rows.append((cluster, name, broker_id, addr))
    return table(("CLUSTER", "BROKER", "ID", "ADDRESS"), rows)


def push_status_table(status: dict[str, Any]) -> str:
    debt = status.get("debt", {})
    rows: list[tuple[str, Any]] = [
        ("epoch", status.get("epoch")),
        ("uptime ms", status.get("uptimeMs")),
        ("warming up", status.get("warmingUp")),
        ("warm in ms", status.get("warmInMs")),
        ("push enabled", status.get("pushEnabled")),
        ("tick interval ms", status.get("tickIntervalMs")),
        ("ticks", status.get("ticks")),
        ("degraded", status.get("degraded")),
        ("recovering", status.get("recovering")),
        ("debt connections", debt.get("connections")),
        ("debt topics", debt.get("topics")),
        ("dirty topics", debt.get("dirtyTopics")),
        ("subscriptions", status.get("subscriptions")),
        ("subscribed connections", status.get("subscribedConnections")),
    ]
    rows += [(k, v) for k, v in sorted(status.get("counters", {}).items())]
    return table(("FIELD", "VALUE"), rows)


def subscriptions_table(doc: dict[str, Any]) -> str:
    rows = [
        (
            c["conn"],
            c["peer"],
            c["topicCount"],
            c["pendingTopics"],
            ",".join(c["topics"][:5]) + ("…" if c["topicCount"] > 5 else ""),
        )
        for c in doc.get("connections", [])
    ]
    text = table(("CONN", "PEER", "TOPICS", "PENDING", "FIRST TOPICS"), rows)
    if doc.get("truncated"):
        text += f"\n({len(rows)} of {doc.get('total')} connections shown; raise --limit)"
    return text
