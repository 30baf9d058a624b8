"""A just-started name server whose start-up window is on, with real Apache RocketMQ 5.x: a
broker registers with it, ``mqadmin`` creates a topic and reads routes and the cluster, and
Apache's producer (the 5.x client, and the 4.9.x one when its jars are at hand) sends, all
inside the window. A topic no broker registered is answered "not ready" (SYSTEM_ERROR): the
clients treat it as they treat TOPIC_NOT_EXIST (a send to it fails, nothing else does).

Needs ``ROCKETMQ_LIB_DIR``: RocketMQ's broker, tools and client jars with every dependency.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support import apache_rocketmq as apache
from support.java_agent import LEGACY_LIB, PROBE_JVM
from support.paths import REPO_ROOT

from namesrv.admin.wire import AdminClient, Target
from protocol.codes import RequestCode, ResponseCode

pytestmark = pytest.mark.interop
if not apache.AVAILABLE:
    pytest.skip("ROCKETMQ_LIB_DIR (RocketMQ jars) and a JDK are needed", allow_module_level=True)

WINDOW_MS = 600_000
"""Longer than the whole test (a broker's boot included): everything below runs warming up."""
TOPIC = "WarmTopic"
UNHEARD = "NeverRegistered"


def ask(port: int, code: int, ext: dict[str, str] | None = None) -> object:
    with AdminClient(Target("127.0.0.1", port, timeout_s=10)) as client:
        return client.call(code, ext or {})


def wait_routed(port: int, topic: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resp = ask(port, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if resp.code == ResponseCode.SUCCESS:  # type: ignore[attr-defined]
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} was never routed")


def produce(lib: str, classes: Path, port: int, count: int) -> list[str]:
    classes.mkdir(parents=True, exist_ok=True)
    source = Path(__file__).parent / "WarmProbe.java"
    subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", f"{lib}/*", str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    done = subprocess.run(
        [
            *("java", *PROBE_JVM, "-cp", f"{classes}:{lib}/*", "WarmProbe"),
            *(f"127.0.0.1:{port}", TOPIC, UNHEARD, str(count)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [
        line
        for line in done.stdout.splitlines()
        if line.startswith(("sent", "fail", "unheard", "done"))
    ]
    assert done.returncode == 0 and lines[-1:] == ["done"], done.stdout + done.stderr
    return lines[:-1]


def watch(port: int, topic: str) -> tuple[subprocess.Popen[str], queue.Queue[dict[str, Any]]]:
    """``python -m client_push watch`` of ``topic``, its lines read on a thread. Its version
    check and poll are an hour away: what it learns, it learns by push."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "client_push", "watch", "--namesrv", f"127.0.0.1:{port}",
         "--topic", topic, "--version-check-ms", "3600000", "--poll-ms", "3600000"],
        cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.put(json.loads(line))

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def test_apache_broker_mqadmin_and_producers_work_while_the_name_server_warms_up(tmp_path):
    ns, port = apache.start_namesrv(tmp_path, wait_for_service_ms=WINDOW_MS)
    broker = None
    try:
        resp = ask(port, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": UNHEARD})
        assert resp.code == ResponseCode.SYSTEM_ERROR  # type: ignore[attr-defined]
        assert resp.ext_fields == {"warmingUp": "true"}  # type: ignore[attr-defined]

        broker = apache.start_broker(tmp_path, f"127.0.0.1:{port}")
        namesrv = f"127.0.0.1:{port}"
        created = apache.mqadmin(
            tmp_path, "updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", TOPIC
        )
        assert created.returncode == 0 and "success" in created.stdout, created.stdout
        wait_routed(port, TOPIC)  # the broker registered it: heard of, answered normally
        route = apache.mqadmin(tmp_path, "topicRoute", "-n", namesrv, "-t", TOPIC)
        assert route.returncode == 0 and broker.addr in route.stdout, route.stdout
        cluster = apache.mqadmin(tmp_path, "clusterList", "-n", namesrv)
        assert cluster.returncode == 0 and broker.name in cluster.stdout, cluster.stdout
        unheard = apache.mqadmin(tmp_path, "topicRoute", "-n", namesrv, "-t", UNHEARD)
        assert "name server not ready: warming up" in unheard.stdout, unheard.stdout

        clients = [("5.x", apache.LIB)] + ([("4.9.x", LEGACY_LIB)] if LEGACY_LIB else [])
        for version, lib in clients:
            lines = produce(lib, tmp_path / f"classes-{version}", port, 5)
            assert lines[:5] == [f"sent {broker.name}"] * 5, (version, lines)
            # No route for it anywhere: the send fails as after TOPIC_NOT_EXIST.
            assert lines[5].startswith("unheard fail No route info"), (version, lines)

        status = ask(port, RequestCode.GET_PUSH_STATUS)
        doc = json.loads(status.body)  # type: ignore[attr-defined]
        assert doc["warmingUp"] is True and doc["warmInMs"] > 0  # all of it inside the window

        # A topic deleted for real (mqadmin deleteTopic: the brokers, then the name server) is
        # dropped by a push client as soon as the name server's tick announces it, unlike a
        # topic that only lost its brokers.
        watcher, lines = watch(port, TOPIC)
        try:
            first = lines.get(timeout=60)
            assert first["exists"] and broker.name in first["brokers"], first
            deleted = apache.mqadmin(
                tmp_path, "deleteTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", TOPIC
            )
            assert deleted.returncode == 0, deleted.stdout
            while True:
                line = lines.get(timeout=60)
                if not line["exists"]:
                    break
            assert line["cause"] == "notify" and not line["brokers"], line
        finally:
            watcher.terminate()
            watcher.wait(timeout=30)
    finally:
        if broker is not None:
            apache.stop(broker.proc)
        apache.stop(ns)
