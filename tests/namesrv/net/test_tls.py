"""TLS on the name-server port: permissive serves TLS and plaintext together, enforcing refuses
plaintext. Certificates are made per test; sockets are loopback, timers a shared fake clock."""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted
from click.testing import CliRunner
from support.loopback_wait import until
from support.tls_certs import self_signed
from support.wire_client import connect
from twisted.internet import threads

from client_push.routes.client import RouteEvent
from namesrv.config import ConfigError, from_mapping
from namesrv.net.tls import TlsConfigError, server_options
from protocol.codes import Perm, RequestCode, ResponseCode


def tls_server(cluster: Any, tmp_path: Any, mode: str) -> tuple[Any, int]:
    cert, key = self_signed(tmp_path)
    return cluster.start_server(server={"tls": mode, "tls_cert_file": cert, "tls_key_file": key})


def writable(client: Any, topic: str) -> bool:
    entry = client.cached_route(topic)
    return entry is not None and all(q.perm & Perm.WRITE for q in entry.route.queue_datas)


@pytest_twisted.ensureDeferred
async def test_permissive_serves_a_tls_watcher_and_a_plaintext_one_on_the_same_port(
    cluster, tmp_path
):
    server, port = tls_server(cluster, tmp_path, "permissive")
    broker = await cluster.broker(port, "T")  # plaintext, as a broker without TLS
    secure = cluster.client(port, tls=True)
    verified = cluster.client(port, tls=True, tls_ca_file=str(tmp_path / "server.crt"))
    plain = cluster.client(port, inline_routes=False)  # and one that refetches its changes
    events: dict[str, list[RouteEvent]] = {"secure": [], "verified": [], "plain": []}
    for name, client in (("secure", secure), ("verified", verified), ("plain", plain)):
        client.add_listener("T", events[name].append)
    clients = (secure, verified, plain)
    await until(lambda: all(len(e) == 1 for e in events.values()))
    await until(lambda: all(c.push_active for c in clients))
    await cluster.wipe(broker)
    cluster.tick()
    await until(lambda: all(len(e) == 2 for e in events.values()))
    assert {name: e[1].cause for name, e in events.items()} == {
        "secure": "inline",
        "verified": "inline",
        "plain": "notify",
    }
    assert not any(writable(c, "T") for c in clients)
    stats = server.stats()
    assert stats["tls.handshake"] == 2
    assert stats["tls.plaintext"] == 2  # the broker and the plaintext watcher


@pytest_twisted.ensureDeferred
async def test_enforcing_refuses_plaintext_and_serves_tls(cluster, tmp_path):
    server, port = tls_server(cluster, tmp_path, "enforcing")
    plain = await connect(port)
    refused = await plain.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark == "the server requires TLS (server.tls = enforcing): connect with TLS"
    await plain.lost
    secure = cluster.client(port, tls=True)
    events: list[RouteEvent] = []
    secure.add_listener("T", events.append)
    await until(lambda: len(events) == 1)
    assert not events[0].exists  # answered over TLS: the topic has no route yet
    assert server.stats()["rejected.tls_plaintext"] == 1
    assert server.stats()["tls.handshake"] == 1


@pytest_twisted.ensureDeferred
async def test_admin_connects_with_tls(cluster, tmp_path):
    _server, port = tls_server(cluster, tmp_path, "enforcing")
    runner = CliRunner()
    from namesrv.admin.cli import main

    result = await threads.deferToThread(
        runner.invoke,
        main,
        ["--namesrv", f"127.0.0.1:{port}", "--tls", "--json", "topic-list"],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
    result = await threads.deferToThread(
        runner.invoke, main, ["--namesrv", f"127.0.0.1:{port}", "--timeout", "2", "topic-list"]
    )
    assert result.exit_code == 1
    assert "the server requires TLS (server.tls = enforcing): use --tls" in result.stderr


def test_tls_config_is_checked(tmp_path):
    with pytest.raises(ConfigError, match=r"server\.tls must be one of"):
        from_mapping({"server": {"tls": "on"}})
    with pytest.raises(ConfigError, match=r"needs server\.tls_cert_file"):
        from_mapping({"server": {"tls": "permissive"}})
    with pytest.raises(TlsConfigError, match="cannot read"):
        server_options(str(tmp_path / "missing.crt"), str(tmp_path / "missing.key"))
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(TlsConfigError):
        server_options(str(bad), str(bad))


def test_watch_command_line_turns_tls_on():
    from client_push.cli.watch import build_parser, config_from_args

    parser = build_parser()
    args = parser.parse_args(["watch", "--namesrv", "h:1", "--topic", "T", "--tls-ca", "ca.pem"])
    config = config_from_args(parser, args)
    assert config.tls and config.tls_ca_file == "ca.pem"
    args = parser.parse_args(["watch", "--namesrv", "h:1", "--topic", "T"])
    assert not config_from_args(parser, args).tls
