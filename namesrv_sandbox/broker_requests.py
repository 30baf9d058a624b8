"""The requests a RocketMQ broker sends its name servers (REGISTER_BROKER, UNREGISTER_BROKER),
built as upstream's broker writes them, for whatever stands in for a broker."""

from __future__ import annotations

from protocol import register_body
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand
from protocol.headers import RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader
from protocol.route_model import DataVersion, TopicConfig


def topic_configs(
    *names: str, queues: int = 4, perm: int = 6, read_queues: int | None = None
) -> dict[str, TopicConfig]:
    """Topic configs of ``queues`` write queues (and as many read queues unless given)."""
    read = queues if read_queues is None else read_queues
    return {
        n: TopicConfig(topic_name=n, read_queue_nums=read, write_queue_nums=queues, perm=perm)
        for n in names
    }


def register_request(
    topics: dict[str, TopicConfig],
    *,
    cluster: str = "DefaultCluster",
    broker_name: str = "broker-a",
    broker_addr: str = "10.0.0.1:10911",
    broker_id: int = 0,
    data_version: DataVersion | None = None,
    compressed: bool = False,
    crc: int | None = None,
    zone: str | None = None,
) -> RemotingCommand:
    wrapper = register_body.TopicConfigSerializeWrapper(
        topic_config_table=topics,
        data_version=data_version or DataVersion(state_version=0, timestamp=1, counter=1),
        topic_queue_mapping_info_map={},
    )
    body = register_body.RegisterBrokerBody(
        topic_config_serialize_wrapper=wrapper, filter_server_list=[]
    ).to_wire(compressed)
    header = RegisterBrokerRequestHeader(
        broker_name=broker_name,
        broker_addr=broker_addr,
        cluster_name=cluster,
        ha_server_addr=broker_addr.replace("10911", "10912"),
        broker_id=broker_id,
        heartbeat_timeout_millis=None,
        compressed=compressed,
        body_crc32=register_body.crc32(body) if crc is None else crc,
        zone_name=zone,
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire(), body)


def unregister_request(
    *,
    cluster: str = "DefaultCluster",
    broker_name: str = "broker-a",
    broker_addr: str = "10.0.0.1:10911",
    broker_id: int = 0,
) -> RemotingCommand:
    header = UnregisterBrokerRequestHeader(
        broker_name=broker_name, broker_addr=broker_addr, cluster_name=cluster, broker_id=broker_id
    )
    return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_wire())
