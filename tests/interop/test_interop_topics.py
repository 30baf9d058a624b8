"""Operators' habits against real Apache RocketMQ 5.x: ``mqadmin`` reads and changes this
server's config, and ``namesrv-admin`` creates and deletes topics on a real Apache broker
routed by this server, which ``client_push`` sends to and Apache's consumer reads from.

Needs ``ROCKETMQ_LIB_DIR``: RocketMQ's broker, tools and client jars with every dependency
(``mvn dependency:copy-dependencies`` into a cache outside the repository). Skipped without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import apache_rocketmq as apache
from support.paths import REPO_ROOT

from namesrv.admin.wire import AdminClient, Target, split_hostport

pytestmark = pytest.mark.interop
if not apache.AVAILABLE:
    pytest.skip("ROCKETMQ_LIB_DIR (RocketMQ jars) and a JDK are needed", allow_module_level=True)

GET_ALL_TOPIC_CONFIG = 21
"""Upstream's request code for a broker's whole topic table (asked of the broker directly)."""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """This name server (config file with a KV path) and one Apache broker registered with it."""
    work = tmp_path_factory.mktemp("apache")
    kv_path = work / "kv" / "kvConfig.json"
    ns, port = apache.start_namesrv(work, f'[registry]\nkv_config_path = "{kv_path}"\n')
    try:
        broker = apache.start_broker(work, f"127.0.0.1:{port}")
    except BaseException:
        apache.stop(ns)
        raise
    classes = work / "classes"
    apache.compile_java(Path(__file__).parent / "ConsumeProbe.java", classes)
    yield {"work": work, "port": port, "kv_path": kv_path, "broker": broker, "classes": classes}
    apache.stop(broker.proc)
    apache.stop(ns)


def namesrv_admin(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "namesrv.admin", "--namesrv", f"127.0.0.1:{port}", *args],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )


def route_or_none(port: int, topic: str) -> dict | None:
    result = namesrv_admin(port, "--json", "topic-route", topic)
    return json.loads(result.stdout) if result.returncode == 0 else None


def wait_route(port: int, topic: str, present: bool, timeout: float = 30.0) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        route = route_or_none(port, topic)
        if (route is not None) == present:
            return route
        time.sleep(0.2)
    raise AssertionError(f"route of {topic} {'never appeared' if present else 'stayed'}")


def broker_topics(addr: str) -> str:
    host, port = split_hostport(addr)
    with AdminClient(Target(host, port, timeout_s=10)) as client:
        response = client.call(GET_ALL_TOPIC_CONFIG)
    assert response.code == 0, response.remark
    return response.body.decode()


def test_mqadmin_reads_upstream_keys_and_changes_order_message_enable_at_run_time(world):
    port, work = world["port"], world["work"]
    shown = apache.mqadmin(work, "getNamesrvConfig", "-n", f"127.0.0.1:{port}")
    assert shown.returncode == 0, shown.stdout
    table = apache.properties_table(shown.stdout)
    assert table["listenPort"] == str(port)
    assert table["orderMessageEnable"] == "false"
    assert table["kvConfigPath"] == str(world["kv_path"])

    changed = apache.mqadmin(
        work, "updateNamesrvConfig", "-n", f"127.0.0.1:{port}", "-k", "orderMessageEnable",
        "-v", "true",
    )  # fmt: skip
    assert changed.returncode == 0, changed.stdout
    assert "update name server config success" in changed.stdout
    table = apache.properties_table(
        apache.mqadmin(work, "getNamesrvConfig", "-n", f"127.0.0.1:{port}").stdout
    )
    assert table["orderMessageEnable"] == "true"
    # It takes effect: an order topic's route now carries its order conf.
    created = namesrv_admin(
        port, "update-topic", "-c", "DefaultCluster", "-t", "OrdT", "-o", "true"
    )
    assert created.returncode == 0, created.stderr
    route = wait_route(port, "OrdT", present=True)
    assert route is not None and route["orderTopicConf"] == "broker-a:8"

    refused = apache.mqadmin(
        work, "updateNamesrvConfig", "-n", f"127.0.0.1:{port}", "-k", "listenPort", "-v", "1"
    )
    assert "CODE: 16" in refused.stdout and "listenPort" in refused.stdout
    unknown = apache.mqadmin(
        work, "updateNamesrvConfig", "-n", f"127.0.0.1:{port}", "-k", "noSuchKey", "-v", "1"
    )
    assert "unknown config keys: noSuchKey" in unknown.stdout


def test_update_topic_creates_on_the_broker_client_push_sends_and_java_consumes(world):
    port, broker = world["port"], world["broker"]
    created = namesrv_admin(
        port, "update-topic", "-c", "DefaultCluster", "-t", "OpsTopic", "-r", "4", "-w", "4"
    )
    assert created.returncode == 0, created.stderr
    assert f"broker broker-a at {broker.addr}: ok" in created.stdout
    route = wait_route(port, "OpsTopic", present=True)
    assert route is not None
    assert [(q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]] == [
        ("broker-a", 4)
    ]

    sent = subprocess.run(
        [
            sys.executable, "-m", "client_push", "send", "--namesrv", f"127.0.0.1:{port}",
            "--topic", "OpsTopic", "--count", "12", "--keys", "ops-key", "--concurrency", "3",
        ],
        cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    summary = json.loads(sent.stdout)
    assert summary["sent_ok"] == 12 and summary["failed"] == 0

    read = subprocess.run(
        [
            "java", *apache.SMALL_JVM, "-cp", apache.classpath(world["classes"]), "ConsumeProbe",
            f"127.0.0.1:{port}", "OpsTopic", "12", "60000",
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = [line for line in read.stdout.splitlines() if line.startswith(("ok=", "msg=", "err"))]
    assert lines[0] == "ok=12 queues=4", read.stdout[-2000:]
    assert all(line.startswith("msg=ops-key|") for line in lines[1:]) and len(lines) == 13

    deleted = namesrv_admin(port, "delete-topic", "-c", "DefaultCluster", "-t", "OpsTopic")
    assert deleted.returncode == 0, deleted.stderr
    assert route_or_none(port, "OpsTopic") is None
    assert '"OpsTopic"' not in broker_topics(broker.addr)


def test_a_broker_refusal_is_reported_with_its_remark(world):
    refused = namesrv_admin(world["port"], "update-topic", "-c", "DefaultCluster", "-t", "TBW102")
    assert refused.returncode == 1
    assert f"broker broker-a at {world['broker'].addr}: refused, INVALID_PARAMETER (29)" in (
        refused.stderr
    )
    assert "conflict with system topic" in refused.stderr


def test_the_same_mqadmin_lines_work_with_namesrv_admin(world):
    """``namesrv-admin`` takes Apache ``mqadmin``'s command lines (after the program name)."""
    port, work = world["port"], world["work"]
    for value in ("true", "false"):
        line = ("updateNamesrvConfig", "-n", f"127.0.0.1:{port}", "-k", "orderMessageEnable",
                "-v", value)  # fmt: skip
        ours = subprocess.run(
            [sys.executable, "-m", "namesrv.admin", *line],
            cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert ours.returncode == 0, ours.stderr
        shown = apache.mqadmin(work, "getNamesrvConfig", "-n", f"127.0.0.1:{port}")
        assert apache.properties_table(shown.stdout)["orderMessageEnable"] == value
        assert f"orderMessageEnable={value}\n" in namesrv_admin(port, "getNamesrvConfig").stdout
