"""Route clients of each kind (Twisted, asyncio, uvloop) over TLS to the real name server
(permissive, so the test broker registers in plaintext): encrypted without verification, and
verified against the server's CA; push works on both."""

from __future__ import annotations

import pytest_twisted
from support.aio_world import close_clients, started_client
from support.loopback_wait import until
from support.tls_certs import self_signed

from client_push.config import ClientConfig
from protocol.codes import Perm


@pytest_twisted.ensureDeferred
async def test_tls_clients_verified_or_not_get_routes_and_their_changes(
    cluster, any_loop, tmp_path
):
    cert, key = self_signed(tmp_path)
    server, port = cluster.start_server(
        server={"tls": "permissive", "tls_cert_file": cert, "tls_key_file": key}
    )
    broker = await cluster.broker(port, "T")
    cluster.tick()
    addrs = (f"127.0.0.1:{port}",)
    configs = [
        ClientConfig(namesrv_addrs=addrs, tls=True),
        ClientConfig(namesrv_addrs=addrs, tls=True, tls_ca_file=cert),
    ]
    clients = [await started_client(any_loop, config) for config in configs]
    try:
        versions = [(await any_loop.run(c.get_route("T"))).version for c in clients]
        await until(lambda: all(c.push_active for c in clients))
        await cluster.wipe(broker)
        cluster.tick()
        await until(lambda: all(c.cached_route("T").version > versions[0] for c in clients))
        for client in clients:
            assert not any(q.perm & Perm.WRITE for q in client.cached_route("T").route.queue_datas)
        assert server.stats()["tls.handshake"] == 2
    finally:
        await close_clients(any_loop, clients)
