"""client_push signs its name-server requests when given credentials, in the strong form by
default, and a name server with a strong-only account serves it (and refuses it unsigned).
Client, server and broker share the deterministic world (``support.memory_world``)."""

from __future__ import annotations

import pytest
import pytest_twisted
from support.acl_signing import independent_sign
from support.fake_broker import register_request, topic_configs
from support.memory_world import MemoryWorld, until

from client_push.config import ClientConfig, ClientConfigError
from client_push.errors import NameServerError
from protocol.codes import ResponseCode

ACL = {
    "enabled": True,
    "server_identity": "routes.cluster-a",
    "authenticate_reads": True,
    "accounts": [
        {"access_key": "broker-key", "secret_key": "broker-secret", "brokers": ["*"]},
        {"access_key": "app", "secret_key": "app-secret", "signature": "strong"},
    ],
}


async def signed_broker(world: MemoryWorld, addr: str) -> None:
    broker = world.connect(addr)
    resp = await broker.request(
        independent_sign(register_request(topic_configs("T")), "broker-key", "broker-secret")
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark


@pytest_twisted.ensureDeferred
async def test_a_client_with_a_strong_only_account_gets_routes_and_push(memory_world):
    server, addr = memory_world.server(acl=ACL)
    await signed_broker(memory_world, addr)
    client = memory_world.client(
        addr, access_key="app", secret_key="app-secret", server_identity="routes.cluster-a"
    )
    route = await memory_world.start(client.get_route("T"))
    assert route.route.queue_datas
    await until(lambda: client.push_active)
    assert not any(k.startswith("rejected.acl_") for k in server.stats())
    # Each request carried a nonce of its own: none was refused as a replay.
    assert len(server.acl.replays) >= 2


@pytest.mark.parametrize(
    "overrides", [{}, {"access_key": "app", "secret_key": "app-secret", "signature": "upstream"}]
)
@pytest_twisted.ensureDeferred
async def test_unsigned_or_upstream_signed_clients_are_refused_by_a_strong_only_account(
    memory_world, overrides
):
    server, addr = memory_world.server(acl=ACL)
    await signed_broker(memory_world, addr)
    client = memory_world.client(addr, request_timeout_ms=2_000, **overrides)
    with pytest.raises(NameServerError) as refused:
        await memory_world.start(client.get_route("T"))
    assert refused.value.code == ResponseCode.NO_PERMISSION
    kind = "form_refused" if overrides else "unsigned"
    assert server.stats()[f"rejected.acl_{kind}"] >= 1


@pytest_twisted.ensureDeferred
async def test_a_client_signing_for_another_cluster_is_refused_as_wrong_server(memory_world):
    server, addr = memory_world.server(acl=ACL)
    await signed_broker(memory_world, addr)
    client = memory_world.client(
        addr,
        access_key="app",
        secret_key="app-secret",
        server_identity="routes.cluster-b",
        request_timeout_ms=2_000,
    )
    with pytest.raises(NameServerError) as refused:
        await memory_world.start(client.get_route("T"))
    assert refused.value.code == ResponseCode.NO_PERMISSION
    assert "signed for name server 'routes.cluster-b'" in str(refused.value)
    assert server.stats()["rejected.acl_wrong_server"] >= 1
    assert len(server.acl.replays) == 0  # a refused request leaves no nonce behind


def test_credentials_go_together_and_the_form_is_checked():
    with pytest.raises(ClientConfigError, match="go together"):
        ClientConfig(namesrv_addrs=("127.0.0.1:9876",), access_key="app")
    with pytest.raises(ClientConfigError, match="'strong' or 'upstream'"):
        ClientConfig(
            namesrv_addrs=("127.0.0.1:9876",), access_key="a", secret_key="s", signature="either"
        )
    with pytest.raises(ClientConfigError, match="server_identity is needed"):
        ClientConfig(namesrv_addrs=("127.0.0.1:9876",), access_key="a", secret_key="s")
    with pytest.raises(ClientConfigError, match="server_identity: a name-server identity"):
        ClientConfig(
            namesrv_addrs=("127.0.0.1:9876",),
            access_key="a",
            secret_key="s",
            server_identity="has space",
        )
    upstream = ClientConfig(
        namesrv_addrs=("127.0.0.1:9876",), access_key="a", secret_key="s", signature="upstream"
    )
    assert upstream.server_identity == ""  # upstream's form names no server
    assert "app-secret" not in repr(
        ClientConfig(
            namesrv_addrs=("127.0.0.1:9876",),
            access_key="app",
            secret_key="app-secret",
            server_identity="ns-1",
        )
    )
