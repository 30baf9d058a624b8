"""Apache RocketMQ's own Java admin client against this server: ACL signatures and TLS.

Needs ``ROCKETMQ_LIB_DIR``: a directory of RocketMQ 5.x client jars and their dependencies, e.g.
``mvn dependency:copy-dependencies`` of ``org.apache.rocketmq:rocketmq-tools:5.3.3`` into a
cache outside the repository. Skipped without it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import apache_rocketmq as apache
from support.apache_rocketmq import start_namesrv
from support.tls_certs import self_signed

pytestmark = pytest.mark.interop
LIB = apache.LIB
if not LIB or not shutil.which("javac"):
    pytest.skip("ROCKETMQ_LIB_DIR (RocketMQ jars) and a JDK are needed", allow_module_level=True)


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    classes = tmp_path_factory.mktemp("classes")
    source = Path(__file__).parent / "AdminProbe.java"
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", f"{LIB}/*", str(source)], check=True, timeout=300
    )

    def run(port: int, *args: str, tls: bool = False) -> str:
        cmd = ["java", "-cp", f"{classes}:{LIB}/*"]
        if tls:
            cmd.append("-Dtls.enable=true")
        cmd += ["AdminProbe", f"127.0.0.1:{port}", *args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
        return next(line for line in out.splitlines() if line.startswith(("ok=", "error=")))

    return run


def test_java_acl_client_rpc_hook_signatures_are_accepted_and_unsigned_refused(probe, tmp_path):
    proc, port = start_namesrv(
        tmp_path,
        '[acl]\nenabled = true\n[[acl.accounts]]\naccess_key = "ops"\n'
        'secret_key = "ops-secret-123"\nadmin = true\n'
        '[[acl.accounts]]\naccess_key = "brk"\nsecret_key = "brk-secret"\nbrokers = ["*"]\n',
    )
    try:
        assert "CODE: 16" in probe(port, "wipe")
        assert "CODE: 16" in probe(port, "kvput")
        assert probe(port, "wipe", "ops", "ops-secret-123") == "ok=0"
        assert probe(port, "kvput", "ops", "ops-secret-123") == "ok=put"
        assert "CODE: 16" in probe(port, "wipe", "ops", "wrong-secret")
        assert "CODE: 16" in probe(port, "wipe", "brk", "brk-secret")
        assert probe(port, "topics") == "ok=[]"  # reads stay open
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_java_client_with_tls_enable_talks_to_an_enforcing_server(probe, tmp_path):
    cert, key = self_signed(tmp_path)
    proc, port = start_namesrv(
        tmp_path, f'tls = "enforcing"\ntls_cert_file = "{cert}"\ntls_key_file = "{key}"\n'
    )
    try:
        assert probe(port, "topics", tls=True) == "ok=[]"
        assert probe(port, "topics").startswith("error=")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
