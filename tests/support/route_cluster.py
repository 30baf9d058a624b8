"""Name servers, a broker connection and route clients on loopback, all on one fake clock.

Advancing the clock by the server's tick runs change detection and the clients' timers alike.
"""

from __future__ import annotations

import random
import secrets
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import defer, reactor, task

from client_push.config import ClientConfig
from client_push.routes.client import RouteClient
from namesrv.server import NameServer
from protocol.codes import RequestCode, ResponseCode
from protocol.route_model import DataVersion
from support.fake_broker import register_request, topic_configs
from support.server_fixtures import FakeSampler, world_config
from support.wire_client import WireClient, connect

TICK_S = 1.0


class Cluster:
    """Name servers, a broker connection and clients, all on one fake clock."""

    def __init__(self) -> None:
        self.clock = task.Clock()
        self.servers: list[NameServer] = []
        self.clients: list[RouteClient] = []
        self.brokers: list[WireClient] = []
        self.data_version = 1

    def start_server(self, port: int = 0, **overrides: Any) -> tuple[NameServer, int]:
        server = NameServer(
            world_config(f"127.0.0.1:{port}", overrides),
            reactor,
            clock=self.clock,
            sampler=FakeSampler(),
            epoch=secrets.token_hex(4),
        )
        bound = server.listen().getHost().port  # type: ignore[attr-defined]
        self.servers.append(server)
        return server, bound

    def client(self, *ports: int, **overrides: Any) -> RouteClient:
        cfg = ClientConfig(namesrv_addrs=tuple(f"127.0.0.1:{p}" for p in ports), **overrides)
        client = RouteClient(cfg, reactor, random.Random(11), clock=self.clock)
        client.start()
        self.clients.append(client)
        return client

    async def broker(
        self, port: int, *topics: str, broker_name: str = "broker-a", **kw: Any
    ) -> WireClient:
        conn = await connect(port)
        self.brokers.append(conn)
        await self.register(conn, *topics, broker_name=broker_name, **kw)
        return conn

    async def register(
        self, conn: WireClient, *topics: str, broker_name: str = "broker-a", **kw: Any
    ) -> None:
        self.data_version += 1
        version = DataVersion(
            state_version=0, timestamp=self.data_version, counter=self.data_version
        )
        resp = await conn.request(
            register_request(
                topic_configs(*topics), broker_name=broker_name, data_version=version, **kw
            )
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    async def wipe(self, conn: WireClient, broker_name: str = "broker-a") -> None:
        resp = await conn.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    def tick(self) -> None:
        self.clock.advance(TICK_S)

    async def close(self) -> None:
        for client in self.clients:
            await client.stop()
        for broker in self.brokers:
            if broker.connected:
                broker.transport.loseConnection()  # type: ignore[union-attr]
        for server in self.servers:
            await server.stop(grace_ms=0)


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    pytest_twisted.blockon(defer.ensureDeferred(c.close()))
