"""Broker stand-ins: each registers its topics with the name server over the wire, as a
RocketMQ broker does, and changes routes the ways brokers and operators do (write permission
wiped and restored, topics added, queues resized, the broker leaving and coming back)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from namesrv_pipeline.demo.wire import Peer, connect
from protocol import register_body
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.headers import RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader
from protocol.route_model import DataVersion, TopicConfig

CLUSTER = "DemoCluster"


class RegistrationError(Exception):
    pass


@dataclass
class Broker:
    """One broker stand-in: its name, address, topics and queue counts."""

    name: str
    addr: str
    topics: dict[str, int] = field(default_factory=dict)
    """topic -> queues"""
    peer: Peer | None = None
    _counter: int = 0

    def _configs(self) -> dict[str, TopicConfig]:
        return {
            t: TopicConfig(topic_name=t, read_queue_nums=q, write_queue_nums=q)
            for t, q in sorted(self.topics.items())
        }

    async def connect(self, reactor: Any, port: int) -> None:
        self.peer = await connect(reactor, port)

    async def register(self) -> None:
        """REGISTER_BROKER with every topic; a new data version so the registry takes it."""
        self._counter += 1
        wrapper = register_body.TopicConfigSerializeWrapper(
            topic_config_table=self._configs(),
            data_version=DataVersion(
                state_version=0, timestamp=self._counter, counter=self._counter
            ),
            topic_queue_mapping_info_map={},
        )
        body = register_body.RegisterBrokerBody(
            topic_config_serialize_wrapper=wrapper, filter_server_list=[]
        ).to_wire(False)
        header = RegisterBrokerRequestHeader(
            broker_name=self.name,
            broker_addr=self.addr,
            cluster_name=CLUSTER,
            ha_server_addr=self.addr,
            broker_id=0,
            heartbeat_timeout_millis=None,
            compressed=False,
            body_crc32=register_body.crc32(body),
        )
        await self._send(
            RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire(), body)
        )

    async def unregister(self) -> None:
        header = UnregisterBrokerRequestHeader(
            broker_name=self.name, broker_addr=self.addr, cluster_name=CLUSTER, broker_id=0
        )
        await self._send(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_wire()))

    async def wipe_write_perm(self) -> None:
        await self._send(
            RemotingCommand.request(
                RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": self.name}
            )
        )

    async def add_write_perm(self) -> None:
        await self._send(
            RemotingCommand.request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": self.name})
        )

    async def _send(self, cmd: RemotingCommand) -> None:
        assert self.peer is not None, "connect first"
        resp = await self.peer.request(cmd)
        if resp.code != ResponseCode.SUCCESS:
            raise RegistrationError(f"{self.name}: code {resp.code}: {resp.remark}")

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()


class RouteChanges:
    """Picks the next route change among the brokers, at random but reproducibly."""

    def __init__(self, brokers: list[Broker], rng: random.Random) -> None:
        self._brokers = brokers
        self._rng = rng
        self._wiped: set[str] = set()
        self._added = 0

    async def next(self) -> str:
        """Make one change; what it was, for the log."""
        broker = self._rng.choice(self._brokers)
        roll = self._rng.random()
        if broker.name in self._wiped:
            self._wiped.discard(broker.name)
            await broker.add_write_perm()
            return f"{broker.name}: write permission restored"
        if roll < 0.35:
            self._wiped.add(broker.name)
            await broker.wipe_write_perm()
            return f"{broker.name}: write permission wiped"
        if roll < 0.65:
            topic = self._rng.choice(sorted(broker.topics))
            broker.topics[topic] = 8 if broker.topics[topic] == 4 else 4
            await broker.register()
            return f"{broker.name}: {topic} resized to {broker.topics[topic]} queues"
        if roll < 0.85:
            self._added += 1
            topic = f"DemoNew-{self._added:03d}"
            broker.topics[topic] = 4
            await broker.register()
            return f"{broker.name}: topic {topic} created"
        await broker.unregister()
        await broker.register()
        return f"{broker.name}: left and came back"
