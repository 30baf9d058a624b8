"""Errors that name their cause, seen as a user sees them: processes, exit codes, messages.
A plaintext admin against a TLS-enforcing server, a listener clash, and operations on topics
and brokers a name server does not know."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.namesrv_process import spawn_namesrv
from support.paths import REPO_ROOT
from support.tls_certs import self_signed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def admin(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "namesrv.admin", "-n", f"127.0.0.1:{port}", *args],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )


def running(*args: str) -> Iterator[int]:
    port = free_port()
    proc = spawn_namesrv("--listen", f"127.0.0.1:{port}", *args)
    try:
        for line in proc.stderr:  # type: ignore[union-attr]
            if "listening on" in line:
                break
        else:
            raise AssertionError(f"the name server exited with {proc.wait()}")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def namesrv(tmp_path) -> Iterator[int]:
    """A running server past its start-up window: absence is told as TOPIC_NOT_EXIST."""
    config = tmp_path / "warm.toml"
    config.write_text("[server]\nwait_for_service_ms = 0\n")
    yield from running("-c", str(config))


def test_a_plaintext_admin_against_a_tls_enforcing_server_is_told_to_use_tls(tmp_path):
    cert, key = self_signed(tmp_path)
    config = tmp_path / "tls.toml"
    config.write_text(
        f'[server]\ntls = "enforcing"\ntls_cert_file = "{cert}"\ntls_key_file = "{key}"\n'
    )
    for port in running("-c", str(config)):
        plain = admin(port, "topic-list")
        assert plain.returncode == 1
        assert plain.stderr == (
            "namesrv-admin: the server requires TLS (server.tls = enforcing): use --tls\n"
        )
        assert admin(port, "--tls", "topic-list").returncode == 0


@pytest.mark.parametrize("clash", ["main", "metrics"])
def test_a_listener_clash_names_the_listener(clash):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        free = f"127.0.0.1:{free_port()}"
        listen, metrics = (busy, free) if clash == "main" else (free, busy)
        proc = spawn_namesrv("--listen", listen, "--metrics", metrics)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    which = (
        "the name-server listener (--listen, server.listen)"
        if clash == "main"
        else "the metrics listener (--metrics, metrics.listen)"
    )
    assert f"namesrv: {which} cannot listen on {busy}: " in err


def test_topics_and_brokers_that_do_not_exist_are_named_and_exit_1(namesrv):
    for args in (
        ("delete-topic", "Nope"),
        ("deleteTopic", "-t", "Nope"),
        ("topicRoute", "-t", "Nope"),
    ):
        done = admin(namesrv, *args)
        assert done.returncode == 1, args
        assert done.stderr.startswith(
            f"namesrv-admin: topic Nope does not exist on the name server at 127.0.0.1:{namesrv}: "
            "TOPIC_NOT_EXIST (17): "
        ), args
    for verb in ("wipe-write-perm", "addWritePerm"):
        done = admin(namesrv, verb, "-b", "nobody")
        assert done.returncode == 1
        assert done.stderr == (
            f"namesrv-admin: the name server at 127.0.0.1:{namesrv} knows no broker nobody "
            "(brokers: none)\n"
        )


def test_mqadmins_config_verbs_change_and_show_the_run_time_config(namesrv):
    done = admin(namesrv, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert (done.returncode, done.stdout) == (
        0,
        f"127.0.0.1:{namesrv}: updated orderMessageEnable=true\n",  # one line per name server
    )
    shown = admin(namesrv, "getNamesrvConfig")
    assert "orderMessageEnable=true\n" in shown.stdout
    done = admin(
        namesrv, "update-namesrv-config", "orderMessageEnable=false", "enableAllTopicList=false"
    )
    assert done.returncode == 0, done.stderr
    assert "orderMessageEnable=false\n" in admin(namesrv, "getNamesrvConfig").stdout
    refused = admin(namesrv, "update-namesrv-config", "listenPort=1")
    assert refused.returncode == 1
    assert "NO_PERMISSION (16): cannot change at run time" in refused.stderr
    # mqadmin puts -n after the verb.
    after = subprocess.run(
        [sys.executable, "-m", "namesrv.admin", "getNamesrvConfig", "-n", f"127.0.0.1:{namesrv}"],
        cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert after.returncode == 0 and "enableAllTopicList=false\n" in after.stdout


def test_help_lists_our_names_and_mqadmins():
    done = subprocess.run(
        [sys.executable, "-m", "namesrv.admin", "--help"],
        cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    for pair in ("topic-route, topicRoute", "wipe-write-perm, wipeWritePerm",
                 "update-namesrv-config, updateNamesrvConfig", "namesrv-config, getNamesrvConfig",
                 "kv, updateKvConfig, getKvConfig, deleteKvConfig"):  # fmt: skip
        assert pair in done.stdout
