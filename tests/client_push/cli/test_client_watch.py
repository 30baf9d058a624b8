"""``python -m client_push watch``: its output lines, its usage errors, and a live run."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from typing import Any

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs, unregister_request
from support.loopback_wait import until
from support.paths import REPO_ROOT
from support.server_fixtures import FakeSampler, isolated_config
from support.wire_client import connect
from twisted.internet import defer, protocol, reactor, task

from client_push.cli.loops import LOOPS
from client_push.cli.watch import event_line
from client_push.config import ClientConfig
from client_push.routes.client import RouteClient
from client_push.routes.events import RouteEvent
from client_push.routes.route_cache import CachedRoute, publish_info, read_queues
from namesrv.server import NameServer
from protocol.codes import Perm, RequestCode, ResponseCode
from protocol.route_model import BrokerData, QueueData, TopicRouteData

ROOT = REPO_ROOT


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client_push", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_event_line_names_each_broker_with_master_address_queue_counts_and_perm():
    route = TopicRouteData(
        queue_datas=[QueueData("broker-b", 4, 2, int(Perm.READ)), QueueData("broker-a", 8, 8, 6)],
        broker_datas=[
            BrokerData("c", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
            BrokerData("c", "broker-b", {1: "10.0.0.3:10911"}),
        ],
    )
    entry = CachedRoute("T", route, 5, 0, 0, publish_info("T", route), read_queues("T", route))
    line = event_line(RouteEvent("T", True, 5, entry, "notify", 1234, "ns:9876"))
    assert line == {
        "topic": "T",
        "version": 5,
        "exists": True,
        "brokers": {
            "broker-a": {"addr": "10.0.0.1:10911", "write_queues": 8, "read_queues": 8, "perm": 6},
            "broker-b": {"addr": None, "write_queues": 2, "read_queues": 4, "perm": 4},
        },
        "learned_at_ms": 1234,
        "cause": "notify",
        "namesrv": "ns:9876",
    }


def test_absence_is_a_line_with_exists_false_and_no_brokers():
    line = event_line(RouteEvent("T", False, 3, None, "first", 1, "ns:9876"))
    assert (line["exists"], line["brokers"], line["version"]) == (False, {}, 3)


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ((), "COMMAND"),
        (("watch", "--topic", "T"), "--namesrv"),
        (("watch", "--namesrv", "127.0.0.1:9876"), "--topic"),
        (("watch", "--namesrv", "no-port", "--topic", "T"), "HOST:PORT"),
        (("watch", "--namesrv", "h:1", "--topic", "T", "--poll-ms", "0"), "poll_interval_ms"),
        (("watch", "--namesrv", "h:1", "--topic", "T", "--poll-ms", "x"), "invalid int"),
        (
            ("watch", "--namesrv", "h:1", "--topic", "T", "--version-check-ms", "-1"),
            "version_check_interval_ms",
        ),
        (("watch", "--namesrv", "h:1", "--topic", "T", "--loop", "gevent"), "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_a_usage_error(args, complaint):
    done = run_cli(*args)
    assert done.returncode == 2
    assert "usage:" in done.stderr and complaint in done.stderr
    assert done.stdout == ""


# -- a live watcher against the real name server --------------------------------------------------


class Watcher(protocol.ProcessProtocol):
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self._buffer = b""
        self.stderr = b""
        self.ended: defer.Deferred[int] = defer.Deferred()

    def outReceived(self, data: bytes) -> None:
        self._buffer += data
        *complete, self._buffer = self._buffer.split(b"\n")
        self.lines.extend(json.loads(line) for line in complete if line.strip())

    def errReceived(self, data: bytes) -> None:
        self.stderr += data

    def processEnded(self, reason: Any) -> None:
        self.ended.callback(reason.value.exitCode)


@pytest.fixture
def served():
    clock = task.Clock()
    raw = {
        # Past its start-up window: a topic no broker registered is absent at once.
        "server": {"listen": "127.0.0.1:0", "shutdown_grace_ms": 0, "wait_for_service_ms": 0},
        "pressure": {"enabled": False},
    }
    server = NameServer(
        isolated_config(raw),
        reactor,
        clock=clock,
        sampler=FakeSampler(),
        epoch=secrets.token_hex(4),
    )
    port = server.listen().getHost().port  # type: ignore[attr-defined]
    yield server, port, clock
    pytest_twisted.blockon(server.stop(grace_ms=0))


HOUR_MS = "3600000"
"""The watcher's version check runs on its own real clock while these tests step the name
server's tick: a check landing between a change and its tick would learn the change by another
cause, so it is kept an hour away."""


def spawn_watcher(*args: str) -> tuple[Watcher, Any]:
    watcher = Watcher()
    process = reactor.spawnProcess(  # type: ignore[attr-defined]
        watcher,
        sys.executable,
        [sys.executable, "-m", "client_push", "watch", "--version-check-ms", HOUR_MS, *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        path=str(ROOT),
    )
    return watcher, process


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    ("stop_signal", "flags", "cause"),
    [(signal.SIGINT, (), "inline"), (signal.SIGTERM, ("--no-inline-routes",), "notify")],
)
@pytest_twisted.ensureDeferred
async def test_watcher_prints_initial_route_absence_and_a_pushed_change_then_exits_0(
    served, stop_signal, flags, cause, loop
):
    server, port, clock = served
    broker = await connect(port)
    resp = await broker.request(register_request(topic_configs("T")))
    assert resp.code == ResponseCode.SUCCESS
    watcher, process = spawn_watcher(
        "--namesrv", f"127.0.0.1:{port}", "--topic", "T", "--topic", "Missing", *flags,
        "--loop", loop,
    )  # fmt: skip
    try:
        await until(lambda: len(watcher.lines) == 2 and server.subscriptions.total == 2)
        by_topic = {line["topic"]: line for line in watcher.lines}
        assert by_topic["Missing"]["exists"] is False
        first = by_topic["T"]
        assert first["exists"] is True and first["version"] >= 1
        assert first["brokers"]["broker-a"] == {
            "addr": "10.0.0.1:10911",
            "write_queues": 4,
            "read_queues": 4,
            "perm": 6,
        }
        assert isinstance(first["learned_at_ms"], int)

        wiped = await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert wiped.code == ResponseCode.SUCCESS
        clock.advance(1.0)  # one tick of the name server
        await until(lambda: len(watcher.lines) == 3)
        change = watcher.lines[2]
        assert change["topic"] == "T" and change["cause"] == cause
        assert change["version"] > first["version"]
        assert change["brokers"]["broker-a"]["perm"] == int(Perm.READ)
    finally:
        if watcher.ended.called is False:
            process.signalProcess("INT" if stop_signal == signal.SIGINT else "TERM")
        code = await watcher.ended
        broker.transport.loseConnection()  # type: ignore[union-attr]
    assert code == 0, watcher.stderr.decode()


@pytest.mark.parametrize("loop", LOOPS)
@pytest_twisted.ensureDeferred
async def test_watcher_against_a_server_without_push_sees_the_change_at_its_poll(loop):
    clock = task.Clock()
    raw = {
        "server": {"listen": "127.0.0.1:0", "shutdown_grace_ms": 0},
        "pressure": {"enabled": False},
        "push": {"enabled": False},
    }
    server = NameServer(isolated_config(raw), reactor, clock=clock, sampler=FakeSampler())
    port = server.listen().getHost().port  # type: ignore[attr-defined]
    broker = await connect(port)
    await broker.request(register_request(topic_configs("T")))
    watcher, process = spawn_watcher(
        "--namesrv", f"127.0.0.1:{port}", "--topic", "T", "--poll-ms", "300", "--loop", loop
    )
    try:
        await until(lambda: len(watcher.lines) == 1)
        await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        await until(lambda: len(watcher.lines) == 2)
        assert watcher.lines[1]["cause"] == "poll"
        assert watcher.lines[1]["brokers"]["broker-a"]["perm"] == int(Perm.READ)
    finally:
        process.signalProcess("INT")
        code = await watcher.ended
        broker.transport.loseConnection()  # type: ignore[union-attr]
        await server.stop(grace_ms=0)
    assert code == 0, watcher.stderr.decode()


@pytest.mark.parametrize("loop", LOOPS)
@pytest_twisted.ensureDeferred
async def test_watcher_prints_a_departed_broker_gone_at_the_next_tick(served, loop):
    server, port, clock = served
    broker = await connect(port)
    await broker.request(register_request(topic_configs("T")))
    other = await connect(port)
    await other.request(
        register_request(topic_configs("T"), broker_name="broker-b", broker_addr="10.0.0.2:10911")
    )
    clock.advance(1.0)
    watcher, process = spawn_watcher(
        "--namesrv", f"127.0.0.1:{port}", "--topic", "T", "--loop", loop
    )
    try:
        await until(lambda: len(watcher.lines) == 1 and server.subscriptions.total == 1)
        assert set(watcher.lines[0]["brokers"]) == {"broker-a", "broker-b"}
        await broker.request(unregister_request())
        clock.advance(1.0)
        await until(lambda: len(watcher.lines) == 2)
        gone = watcher.lines[1]
        assert gone["cause"] == "broker_gone" and set(gone["brokers"]) == {"broker-b"}
        assert gone["version"] == watcher.lines[0]["version"] + 1
    finally:
        process.signalProcess("INT")
        code = await watcher.ended
        broker.transport.loseConnection()  # type: ignore[union-attr]
        other.transport.loseConnection()  # type: ignore[union-attr]
    assert code == 0, watcher.stderr.decode()


@pytest_twisted.ensureDeferred
async def test_the_watcher_without_inline_routes_works_beside_an_inline_client(served):
    server, port, clock = served
    broker = await connect(port)
    resp = await broker.request(register_request(topic_configs("T")))
    assert resp.code == ResponseCode.SUCCESS
    inline = RouteClient(ClientConfig(namesrv_addrs=(f"127.0.0.1:{port}",)), reactor, clock=clock)
    inline.start()
    learned: list[RouteEvent] = []
    inline.add_listener("T", learned.append)
    watcher, process = spawn_watcher(
        "--namesrv", f"127.0.0.1:{port}", "--topic", "T", "--no-inline-routes"
    )
    try:
        await until(lambda: len(watcher.lines) == 1 and learned and server.subscriptions.total == 2)
        assert server.subscriptions.inline_connections == 1
        wiped = await broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert wiped.code == ResponseCode.SUCCESS
        clock.advance(1.0)
        await until(lambda: len(watcher.lines) == 2 and len(learned) == 2)
        assert watcher.lines[1]["cause"] == "notify" and learned[1].cause == "inline"
        assert watcher.lines[1]["version"] == learned[1].version
        assert watcher.lines[1]["brokers"]["broker-a"]["perm"] == int(Perm.READ)
    finally:
        process.signalProcess("TERM")
        code = await watcher.ended
        await inline.stop()
        broker.transport.loseConnection()  # type: ignore[union-attr]
    assert code == 0, watcher.stderr.decode()


@pytest.mark.parametrize("verb", ["watch", "send"])
@pytest.mark.parametrize("loop", ["twisted", "asyncio"])
@pytest_twisted.inlineCallbacks
def test_a_tls_mismatch_stops_the_command_with_a_clear_message_both_ways(
    make_server, tmp_path, verb, loop
):
    from support.tls_certs import self_signed
    from twisted.internet import threads

    cert, key = self_signed(tmp_path)
    tls_only = make_server(
        {"server": {"tls": "enforcing", "tls_cert_file": cert, "tls_key_file": key}}
    )
    plain = make_server()
    tail = ["--topic", "T", "--loop", loop] + (["--count", "3"] if verb == "send" else [])
    cases = [
        ([f"--namesrv=127.0.0.1:{tls_only.port}"], "requires TLS (server.tls = enforcing)"),
        ([f"--namesrv=127.0.0.1:{plain.port}", "--tls"], "may not speak TLS (run without --tls)"),
    ]
    for args, words in cases:
        done = yield threads.deferToThread(run_cli, verb, *args, *tail)
        assert done.returncode == 3, done.stderr
        assert f"python -m client_push {verb}: the " in done.stderr and words in done.stderr
