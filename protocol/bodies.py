"""Body codecs: the JSON bodies of the name server's answers (routes, cluster info, topic lists,
KV tables, broker member groups). The REGISTER_BROKER body is in :mod:`protocol.register_body`
(as upstream writes it) and :mod:`protocol.register` (the name server's lean read).

Wire names are upstream's; Python objects are the dataclasses of :mod:`protocol.route_model`.
Decoders accept what any upstream version writes (fastjson's unquoted keys, missing optional
fields, unknown extra fields) and turn every malformed body into a :class:`BodyError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from protocol import peer_text
from protocol.errors import BodyError
from protocol.peer_text import (
    as_list,
    as_object,
    bool_field,
    int_field,
    load_object,
    or_empty,
    str_field,
)
from protocol.route_model import (
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicRouteData,
)


def queue_data_doc(q: QueueData) -> dict[str, Any]:
    return {
        "brokerName": q.broker_name,
        "perm": q.perm,
        "readQueueNums": q.read_queue_nums,
        "topicSysFlag": q.topic_sys_flag,
        "writeQueueNums": q.write_queue_nums,
    }


def broker_data_doc(b: BrokerData, *, legacy: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "brokerAddrs": dict(sorted(b.broker_addrs.items())),
        "brokerName": b.broker_name,
        "cluster": b.cluster,
    }
    if legacy:  # 4.9.x BrokerData: no zoneName, no enableActingMaster
        return doc
    doc["enableActingMaster"] = b.enable_acting_master
    if b.zone_name is not None:
        doc["zoneName"] = b.zone_name
    return doc


def encode_route(route: TopicRouteData, *, standard_json: bool, legacy: bool = False) -> bytes:
    """A GET_ROUTEINFO_BY_TOPIC body; ``standard_json`` False writes fastjson's unquoted keys.

    ``legacy`` writes the shape a 4.9.x name server gives (for clients older than 5.0): without
    the 5.x-only fields (``enableActingMaster``, ``zoneName``, ``topicQueueMappingByBroker``),
    which some 4.x clients fail to parse.
    """
    doc: dict[str, Any] = {
        "brokerDatas": [broker_data_doc(b, legacy=legacy) for b in route.broker_datas],
        "filterServerTable": {k: list(v) for k, v in route.filter_server_table.items()},
        "queueDatas": [queue_data_doc(q) for q in route.queue_datas],
    }
    if route.order_topic_conf is not None:
        doc["orderTopicConf"] = route.order_topic_conf
    if route.topic_queue_mapping_by_broker is not None and not legacy:
        doc["topicQueueMappingByBroker"] = route.topic_queue_mapping_by_broker
    # fastjson writes bean fields alphabetically and, with MapSortField, sorted map keys;
    # BrowserCompatible (the standard flavour) escapes non-ASCII.
    return peer_text.dumps(
        doc, unquoted_int_keys=not standard_json, sort_keys=True, ascii_only=standard_json
    )


def broker_data_from(doc: Any, what: str) -> BrokerData:
    d = as_object(doc, what)
    addrs_doc = as_object(or_empty(d.get("brokerAddrs")), f"{what}.brokerAddrs")
    addrs: dict[int, str] = {}
    for key, addr in addrs_doc.items():
        try:
            broker_id = int(key)
        except ValueError:
            raise BodyError(f"{what}.brokerAddrs key {key!r} is not a broker id") from None
        if not isinstance(addr, str):
            raise BodyError(f"{what}.brokerAddrs[{key}] must be a string")
        addrs[broker_id] = addr
    return BrokerData(
        cluster=str_field(d, "cluster", what) or "",
        broker_name=str_field(d, "brokerName", what) or "",
        broker_addrs=addrs,
        zone_name=str_field(d, "zoneName", what),
        enable_acting_master=bool_field(d, "enableActingMaster", what),
    )


def queue_data_from(doc: Any, what: str) -> QueueData:
    d = as_object(doc, what)
    return QueueData(
        broker_name=str_field(d, "brokerName", what) or "",
        read_queue_nums=int_field(d, "readQueueNums", what),
        write_queue_nums=int_field(d, "writeQueueNums", what),
        perm=int_field(d, "perm", what),
        topic_sys_flag=int_field(d, "topicSysFlag", what),
    )


def decode_route(body: bytes) -> TopicRouteData:
    doc = load_object(body, "TopicRouteData")
    filters = as_object(or_empty(doc.get("filterServerTable")), "filterServerTable")
    mapping = doc.get("topicQueueMappingByBroker")
    if mapping is not None and not isinstance(mapping, dict):
        raise BodyError("topicQueueMappingByBroker must be a JSON object")
    return TopicRouteData(
        queue_datas=[
            queue_data_from(q, f"queueDatas[{i}]")
            for i, q in enumerate(as_list(doc.get("queueDatas"), "queueDatas"))
        ],
        broker_datas=[
            broker_data_from(b, f"brokerDatas[{i}]")
            for i, b in enumerate(as_list(doc.get("brokerDatas"), "brokerDatas"))
        ],
        order_topic_conf=str_field(doc, "orderTopicConf", "TopicRouteData"),
        filter_server_table={
            str(k): [str(s) for s in as_list(v, "filterServerTable")] for k, v in filters.items()
        },
        topic_queue_mapping_by_broker=mapping,
    )


def encode_cluster_info(info: ClusterInfo) -> bytes:
    """As upstream writes it (fastjson: broker ids unquoted); clients parse it leniently."""
    doc = {
        "brokerAddrTable": {n: broker_data_doc(b) for n, b in info.broker_addr_table.items()},
        "clusterAddrTable": {c: sorted(names) for c, names in info.cluster_addr_table.items()},
    }
    return peer_text.dumps(doc, unquoted_int_keys=True)


def decode_cluster_info(body: bytes) -> ClusterInfo:
    doc = load_object(body, "ClusterInfo")
    brokers = as_object(or_empty(doc.get("brokerAddrTable")), "brokerAddrTable")
    clusters = as_object(or_empty(doc.get("clusterAddrTable")), "clusterAddrTable")
    return ClusterInfo(
        broker_addr_table={
            str(n): broker_data_from(b, f"brokerAddrTable[{n}]") for n, b in brokers.items()
        },
        cluster_addr_table={
            str(c): [str(n) for n in as_list(names, f"clusterAddrTable[{c}]")]
            for c, names in clusters.items()
        },
    )


def encode_topic_list(topics: Iterable[str], broker_addr: str | None = None) -> bytes:
    doc: dict[str, Any] = {"topicList": sorted(topics)}
    if broker_addr is not None:
        doc["brokerAddr"] = broker_addr
    return peer_text.dumps(doc)


def decode_topic_list(body: bytes) -> list[str]:
    doc = load_object(body, "TopicList")
    return [str(t) for t in as_list(doc.get("topicList"), "topicList")]


def encode_group_list(groups: Iterable[str]) -> bytes:
    """Upstream's GroupList, ``{"groupList": [...]}`` (a broker's QUERY_TOPIC_CONSUME_BY_WHO)."""
    return peer_text.dumps({"groupList": sorted(groups)})


def decode_group_list(body: bytes) -> list[str]:
    doc = load_object(body, "GroupList")
    return [str(g) for g in as_list(doc.get("groupList"), "groupList")]


def encode_kv_table(table: dict[str, str]) -> bytes:
    """Upstream's KVTable, ``{"table": {key: value}}``, compact UTF-8 JSON (the bytes
    ``peer_text.dumps`` writes, by msgspec's C encoder: a namespace of a million entries in
    tens of milliseconds)."""
    return msgspec.json.encode({"table": table})


def decode_kv_table(body: bytes) -> dict[str, str]:
    doc = load_object(body, "KVTable")
    table = as_object(or_empty(doc.get("table")), "table")
    return {str(k): str(v) for k, v in table.items()}


def encode_broker_member_group(cluster: str, broker_name: str, addrs: dict[int, str]) -> bytes:
    group = {
        "brokerAddrs": dict(sorted(addrs.items())),
        "brokerName": broker_name,
        "cluster": cluster,
    }
    return peer_text.dumps({"brokerMemberGroup": group}, unquoted_int_keys=True)
