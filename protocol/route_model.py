"""The route data model shared by the name server and the client.

Field names are Python spellings of upstream's wire names (``readQueueNums`` is
``read_queue_nums``); the JSON codecs in ``protocol.bodies`` map between the two.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.codes import PERM_READ_WRITE

DEFAULT_TOPIC_FILTER_TYPE = "SINGLE_TAG"


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-config version; a register rewrites queue data only when it moves."""

    state_version: int = 0
    timestamp: int = 0
    counter: int = 0


@dataclass(frozen=True, slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = DEFAULT_TOPIC_FILTER_TYPE
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's queues of one topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(frozen=True, slots=True)
class BrokerData:
    """A broker name's addresses by broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    topic_queue_mapping_by_broker: dict[str, object] | None = None


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)
