"""A ``RouteRegistry`` on a fake clock with a recording listener, and the register tables the
registry tests feed it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twisted.internet.task import Clock

from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.register_request import RegisterRequest
from namesrv.routes.registry import RouteRegistry
from protocol.codes import PERM_READ_WRITE
from protocol.route_model import DataVersion, TopicConfig

V1 = DataVersion(state_version=0, timestamp=1, counter=1)
V2 = DataVersion(state_version=0, timestamp=2, counter=2)
ADDR_A = "10.0.0.1:10911"
ADDR_A_SLAVE = "10.0.0.2:10911"
ADDR_B = "10.0.0.3:10911"


def configs(*names: str, queues: int = 4, perm: int = PERM_READ_WRITE, sys_flag: int = 0):
    return {
        n: TopicConfig(
            topic_name=n,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=perm,
            topic_sys_flag=sys_flag,
        )
        for n in names
    }


@dataclass
class Recorder:
    calls: list[tuple[list[str], ChangeCause]] = field(default_factory=list)

    def __call__(self, topics: Any, cause: ChangeCause) -> None:
        self.calls.append((sorted(topics), cause))

    def topics(self) -> set[str]:
        return {t for topics, _ in self.calls for t in topics}

    def causes(self) -> set[ChangeCause]:
        return {cause for _, cause in self.calls}


@dataclass
class World:
    clock: Clock
    registry: RouteRegistry
    heard: Recorder

    def register(
        self,
        topics: dict[str, TopicConfig],
        *,
        cluster: str = "C1",
        name: str = "broker-a",
        addr: str = ADDR_A,
        broker_id: int = 0,
        version: DataVersion = V1,
        channel: object = 1,
        timeout: int | None = None,
        filters: list[str] | None = None,
        acting: bool = False,
        mapping: dict[str, Any] | None = None,
    ):
        return self.registry.register_broker(
            RegisterRequest(
                cluster_name=cluster,
                broker_addr=addr,
                broker_name=name,
                broker_id=broker_id,
                ha_server_addr=addr.replace("10911", "10912"),
                topic_configs=topics,
                data_version=version,
                filter_server_list=filters or [],
                heartbeat_timeout_ms=timeout,
                enable_acting_master=acting,
                channel=channel,
                topic_queue_mapping_info=mapping or {},
            )
        )


def make_world(**kw: Any) -> World:
    clock = Clock()
    heard = Recorder()
    return World(clock, RouteRegistry(clock, listener=heard, **kw), heard)


def queue_owners(w: World, topic: str) -> list[str]:
    route = w.registry.get_route(topic)
    assert route is not None
    return [q.broker_name for q in route.queue_datas]
