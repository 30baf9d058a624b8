"""Inline-route clients beside the rest, against a real Apache 5.x broker routed by this server:
while a watcher that asks for inline routes is connected, one that does not and Apache's own Java
tools (``mqadmin topicRoute`` and ``sendMessage``, upstream's route client and producer) keep
working, and a change reaches each watcher its own way.

Needs ``ROCKETMQ_LIB_DIR`` (see tests/support/apache_rocketmq.py). Skipped without it.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from typing import Any

import pytest
from support import apache_rocketmq as apache
from support.paths import REPO_ROOT

pytestmark = pytest.mark.interop
if not apache.AVAILABLE:
    pytest.skip("ROCKETMQ_LIB_DIR (RocketMQ jars) and a JDK are needed", allow_module_level=True)

TOPIC = "InlineT"
ENV = dict(os.environ, PYTHONPATH=str(REPO_ROOT))


class Watcher:
    """``python -m client_push watch`` as a process; its JSON lines read on a thread.

    Its version check is kept an hour away: one landing between the broker's registration of a
    change and the name server's tick would learn the change by that cause instead of by push.
    """

    def __init__(self, port: int, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "client_push", "watch", "--namesrv", f"127.0.0.1:{port}",
             "--topic", TOPIC, "--version-check-ms", "3600000", *extra],
            cwd=REPO_ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(json.loads(line))

    def next_with(self, write_queues: int) -> dict[str, Any]:
        """The first line whose route has ``write_queues`` on broker-a (60 s at most)."""
        while True:
            line = self.lines.get(timeout=60)
            if line["brokers"].get("broker-a", {}).get("write_queues") == write_queues:
                return line


def admin(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "namesrv.admin", "--namesrv", f"127.0.0.1:{port}", *args],
        cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_old_watchers_and_java_clients_work_beside_inline_clients(tmp_path):
    ns, port = apache.start_namesrv(tmp_path)
    watchers: list[Watcher] = []
    try:
        broker = apache.start_broker(tmp_path, f"127.0.0.1:{port}")
        created = admin(port, "update-topic", "-c", "DefaultCluster", "-t", TOPIC, "-w", "4")
        assert created.returncode == 0, created.stdout + created.stderr
        inline, plain = Watcher(port), Watcher(port, "--no-inline-routes")
        watchers += [inline, plain]
        assert inline.next_with(4)["exists"] and plain.next_with(4)["exists"]

        changed = admin(port, "update-topic", "-c", "DefaultCluster", "-t", TOPIC, "-w", "6")
        assert changed.returncode == 0, changed.stdout + changed.stderr
        assert inline.next_with(6)["cause"] == "inline"
        assert plain.next_with(6)["cause"] == "notify"

        route = apache.mqadmin(tmp_path, "topicRoute", "-n", f"127.0.0.1:{port}", "-t", TOPIC)
        assert route.returncode == 0, route.stdout
        assert '"writeQueueNums":6' in route.stdout.replace(" ", "")
        sent = apache.mqadmin(
            tmp_path, "sendMessage", "-n", f"127.0.0.1:{port}", "-t", TOPIC, "-p", "hello"
        )
        assert sent.returncode == 0, sent.stdout
        assert "SEND_OK" in sent.stdout
        assert broker.addr.split(":")[1] in sent.stdout or "broker-a" in sent.stdout

        status = admin(port, "--json", "push-status")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["counters"]["inline_routes_sent"] >= 1
    finally:
        for watcher in watchers:
            watcher.proc.terminate()
            watcher.proc.wait(timeout=30)
        if "broker" in locals():
            apache.stop(broker.proc)
        apache.stop(ns)
