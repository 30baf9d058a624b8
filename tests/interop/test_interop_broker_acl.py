"""An Apache RocketMQ broker signing its registers with its credentials, against this server
with access control on and default settings (accounts take either signature form), beside the
project's own strongly signing admin tool on an account of its own.

Needs ``ROCKETMQ_LIB_DIR`` with the broker's jars (``rocketmq-broker`` and its dependencies) and
a JDK; skipped without them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import apache_rocketmq as apache

from namesrv.admin.cli import main as admin_main

pytestmark = pytest.mark.interop
LIB = apache.LIB
if not LIB or not shutil.which("java") or not list(Path(LIB).glob("rocketmq-broker-*.jar")):
    pytest.skip("ROCKETMQ_LIB_DIR (broker jars) and a JDK are needed", allow_module_level=True)

ACL = """
[acl]
enabled = true
server_identity = "interop-ns"
[[acl.accounts]]
access_key = "brk"
secret_key = "brk-secret-123"
brokers = ["broker-a"]
[[acl.accounts]]
access_key = "ops"
secret_key = "ops-secret-123"
admin = true
signature = "strong"
"""


def start_broker(
    tmp_path: Path, namesrv_port: int, access_key: str, secret: str
) -> tuple[subprocess.Popen[bytes], Path]:
    """broker-a signing with ``access_key``/``secret``, once it says it booted; its log."""

    def launch(port: int) -> tuple[subprocess.Popen[bytes], Path]:
        root = tmp_path / f"broker-{port}"
        home = root / "home"
        (home / "conf").mkdir(parents=True)
        conf = root / "broker.conf"
        credentials = json.dumps({"accessKey": access_key, "secretKey": secret})
        conf.write_text(
            "\n".join(
                [
                    "brokerClusterName=InteropCluster",
                    "brokerName=broker-a",
                    "brokerId=0",
                    f"namesrvAddr=127.0.0.1:{namesrv_port}",
                    "brokerIP1=127.0.0.1",
                    f"listenPort={port}",
                    f"storePathRootDir={root / 'store'}",
                    f"storePathCommitLog={root / 'store' / 'commitlog'}",
                    "mappedFileSizeCommitLog=16777216",
                    "mappedFileSizeConsumeQueue=60000",
                    "autoCreateTopicEnable=true",
                    f"innerClientAuthenticationCredentials={credentials}",
                    # The broker keeps its inner user in a metadata store; its own clients stay
                    # open.
                    "authenticationMetadataProvider=org.apache.rocketmq.auth.authentication."
                    "provider.LocalAuthenticationMetadataProvider",
                    f"authConfigPath={root / 'auth'}",
                ]
            )
            + "\n"
        )
        log = root / "broker.log"
        proc = subprocess.Popen(
            ["java", "-Xms256m", "-Xmx256m", "-cp", f"{LIB}/*",
             "org.apache.rocketmq.broker.BrokerStartup", "-c", str(conf)],
            env=dict(os.environ, ROCKETMQ_HOME=str(home)),
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        return proc, log

    proc, _port, log = apache.boot_broker(launch)
    return proc, log


def admin(port: int, *args: str):
    signed = ["--access-key", "ops", "--secret-key", "ops-secret-123"]
    signed += ["--server-identity", "interop-ns"]
    return CliRunner().invoke(
        admin_main, ["--namesrv", f"127.0.0.1:{port}", *signed, "--json", *args]
    )


def test_an_apache_broker_signing_with_its_credentials_registers_under_default_forms(tmp_path):
    namesrv, port = apache.start_namesrv(tmp_path, ACL)
    broker = None
    try:
        broker, log = start_broker(tmp_path, port, "brk", "brk-secret-123")
        deadline = time.monotonic() + 90
        clusters: dict = {}
        while time.monotonic() < deadline and broker.poll() is None:
            result = admin(port, "cluster-list")
            assert result.exit_code == 0, result.output
            clusters = json.loads(result.stdout)
            if "broker-a" in json.dumps(clusters):
                break
            time.sleep(0.5)  # a JVM starting: polled against a deadline, nothing is timed
        assert "broker-a" in json.dumps(clusters), log.read_text()[-3000:]
        # The broker's own topics came with its signed register; the strong admin reads them.
        result = admin(port, "topic-route", "TBW102")
        assert result.exit_code == 0, result.output
        assert "127.0.0.1:" in result.stdout
        result = admin(port, "push-status")
        assert result.exit_code == 0, result.output
        counters = json.loads(result.stdout)["counters"]
        assert {k: v for k, v in counters.items() if k.startswith("rejected.acl_") and v} == {}
    finally:
        if broker is not None:
            apache.stop(broker)
        apache.stop(namesrv)
