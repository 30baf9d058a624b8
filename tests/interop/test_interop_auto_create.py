"""Topic auto-creation against a real Apache 5.x broker that allows it
(``autoCreateTopicEnable=true``): ``client_push``'s producer sends to a topic nobody created,
through the default topic's route, and the broker creates it; with the setting off (the
default) the send fails with the name server's answer.

Needs ``ROCKETMQ_LIB_DIR`` (see tests/support/apache_rocketmq.py). Skipped without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import apache_rocketmq as apache
from support.paths import REPO_ROOT

pytestmark = pytest.mark.interop
if not apache.AVAILABLE:
    pytest.skip("ROCKETMQ_LIB_DIR (RocketMQ jars) and a JDK are needed", allow_module_level=True)


def send(port: int, topic: str, config: Path | None) -> subprocess.CompletedProcess[str]:
    extra = ["--config", str(config)] if config is not None else []
    return subprocess.run(
        [sys.executable, "-m", "client_push", "send", "--namesrv", f"127.0.0.1:{port}",
         "--topic", topic, "--count", "5", *extra],
        cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_new_topic_is_created_by_sending_only_when_configured(tmp_path):
    ns, port = apache.start_namesrv(tmp_path)
    broker = None
    try:
        broker = apache.start_broker(
            tmp_path, f"127.0.0.1:{port}", extra={"autoCreateTopicEnable": "true"}
        )
        refused = send(port, "NeverCreated", None)
        assert refused.returncode != 0
        assert "NeverCreated" in refused.stdout + refused.stderr

        config = tmp_path / "producer.toml"
        config.write_text("[producer]\nauto_create_topic = true\n")
        created = send(port, "MadeBySending", config)
        assert created.returncode == 0, created.stdout + created.stderr
        summary = json.loads(created.stdout)
        assert summary["sent_ok"] == 5 and summary["failed"] == 0
        route = apache.mqadmin(
            tmp_path, "topicRoute", "-n", f"127.0.0.1:{port}", "-t", "MadeBySending"
        )
        assert route.returncode == 0, route.stdout
        assert "broker-a" in route.stdout  # the broker registered the topic it created
    finally:
        if broker is not None:
            apache.stop(broker.proc)
        apache.stop(ns)
