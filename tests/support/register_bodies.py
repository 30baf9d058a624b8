"""Register bodies of many topics, plain and compressed, as a broker sends them."""

from __future__ import annotations

import json

from protocol import register_body
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand
from protocol.headers import RegisterBrokerRequestHeader
from protocol.route_model import DataVersion, TopicConfig


def topic_names(count: int) -> list[str]:
    return [f"T{i:06d}" for i in range(count)]


def plain_body(names: list[str], version: int, perms: dict[str, int] | None = None) -> bytes:
    """A register body as a 4.x/5.x broker writes it, built with the C encoder (fast)."""
    perms = perms or {}
    table = {
        n: {
            "attributes": {},
            "order": False,
            "perm": perms.get(n, 6),
            "readQueueNums": 8,
            "topicFilterType": "SINGLE_TAG",
            "topicName": n,
            "topicSysFlag": 0,
            "writeQueueNums": 8,
        }
        for n in names
    }
    doc = {
        "filterServerList": [],
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": version, "stateVersion": 0, "timestamp": version},
            "topicConfigTable": table,
            "topicQueueMappingInfoMap": {},
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def compressed_body(names: list[str], version: int) -> bytes:
    wrapper = register_body.TopicConfigSerializeWrapper(
        {n: TopicConfig(n, 8, 8, 6) for n in names}, DataVersion(0, version, version)
    )
    return register_body.RegisterBrokerBody(wrapper, []).to_wire(compressed=True)


def register(
    body: bytes,
    *,
    compressed: bool = False,
    name: str = "broker-a",
    addr: str | None = None,
    broker_id: int = 0,
) -> RemotingCommand:
    header = RegisterBrokerRequestHeader(
        broker_name=name,
        broker_addr=addr or f"10.0.0.1:{10911 if name == 'broker-a' else 10921}",
        cluster_name="DefaultCluster",
        ha_server_addr="10.0.0.1:10912",
        broker_id=broker_id,
        heartbeat_timeout_millis=None,
        compressed=compressed,
        body_crc32=register_body.crc32(body),
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire(), body)
