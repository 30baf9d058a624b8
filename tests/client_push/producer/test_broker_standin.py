"""The broker stand-in itself: registration on a kept connection, refusing connections, and the
process form driven by stdin commands (the benchmarks rely on all three)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest_twisted
from support.broker_standin import BrokerStandIn
from support.loopback_wait import until
from support.paths import REPO_ROOT
from support.wire_client import connect
from twisted.internet import defer, protocol, reactor, task
from twisted.internet.error import ConnectionRefusedError

from protocol.codes import RequestCode, ResponseCode

ROOT = REPO_ROOT


def broker_names(server: Any) -> set[str]:
    return set(server.registry.cluster_info().broker_addr_table)


@pytest_twisted.ensureDeferred
async def test_it_registers_and_re_registers_every_interval_on_one_connection(cluster):
    server, port = cluster.start_server()
    broker = BrokerStandIn(
        "broker-x", {"T": 2}, [f"127.0.0.1:{port}"], reactor=reactor, clock=cluster.clock
    )
    try:
        await broker.start()
        assert "broker-x" in broker_names(server)
        opened = server.counters["connections_opened"]
        cluster.clock.advance(30)
        await until(lambda: broker.counters["registered"] == 2)
        assert server.counters["connections_opened"] == opened  # the connection was kept
    finally:
        await broker.shutdown(grace_ms=0)
    assert broker.counters["unregistered"] == 1 and "broker-x" not in broker_names(server)


@pytest_twisted.ensureDeferred
async def test_refuse_closes_the_port_and_accept_opens_it_again():
    broker = BrokerStandIn("broker-x", {"T": 2}, reactor=reactor)
    await broker.start()
    try:
        conn = await connect(broker.port)
        answer = await conn.call(RequestCode.HEART_BEAT, {})
        assert answer.code == ResponseCode.SUCCESS
        await broker.refuse()
        await conn.lost
        try:
            await connect(broker.port)
            raise AssertionError("the port still accepts")
        except ConnectionRefusedError:
            pass
        broker.accept()
        again = await connect(broker.port)
        assert (await again.call(RequestCode.HEART_BEAT, {})).code == ResponseCode.SUCCESS
        again.transport.loseConnection()  # type: ignore[union-attr]
    finally:
        await broker.kill()


class Proc(protocol.ProcessProtocol):
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.buf = b""
        self.err = b""
        self.ended: defer.Deferred[int] = defer.Deferred()

    def outReceived(self, data: bytes) -> None:
        self.buf += data
        *complete, self.buf = self.buf.split(b"\n")
        self.lines.extend(json.loads(line) for line in complete if line.strip())

    def errReceived(self, data: bytes) -> None:
        self.err += data

    def processEnded(self, reason: Any) -> None:
        self.ended.callback(reason.value.exitCode)


@pytest_twisted.ensureDeferred
async def test_as_a_process_it_takes_commands_on_stdin_and_unregisters_on_shutdown(cluster):
    server, port = cluster.start_server()
    proc = Proc()
    transport = reactor.spawnProcess(  # type: ignore[attr-defined]
        proc,
        sys.executable,
        [sys.executable, "-m", "support.broker_standin", "--namesrv", f"127.0.0.1:{port}",
         "--name", "broker-p", "--topic", "T:2"],
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"},
        path=str(ROOT),
    )  # fmt: skip
    try:
        await until(lambda: proc.lines and proc.lines[0].get("ready"), timeout=30)
        assert "broker-p" in broker_names(server)
        transport.write(b"busy\n")
        await until(lambda: len(proc.lines) == 2)
        assert proc.lines[1]["mode"] == "busy"
        transport.write(b"shutdown 0\n")
        code = await proc.ended
    finally:
        if not proc.ended.called:
            transport.signalProcess("KILL")
            await proc.ended
    assert code == 0, proc.err.decode()
    await task.deferLater(reactor, 0.05, lambda: None)
    assert "broker-p" not in broker_names(server)
