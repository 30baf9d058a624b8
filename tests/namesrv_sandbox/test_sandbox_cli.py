"""``namesrv-sandbox`` as a user runs it: a process that starts a name server when none answers,
registers its stand-ins, counts what a producer sends, serves ``namesrv-admin update-topic``,
and stops, fails and restarts brokers on command (stdin and ``namesrv-sandbox COMMAND``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from support.paths import REPO_ROOT

ENV = dict(os.environ, PYTHONPATH=str(REPO_ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO_ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )


class Sandbox:
    def __init__(self) -> None:
        self.namesrv = f"127.0.0.1:{free_port()}"
        self.control = f"127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "namesrv_sandbox", "--namesrv", self.namesrv,
             "--control", self.control, "--topic", "T:2"],
            cwd=REPO_ROOT,
            env=ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.said: list[str] = []

    def read_until(self, marker: str) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.said.append(line)
            if marker in line:
                return line
        raise AssertionError(f"no {marker!r} in {self.said}; stderr: {self.proc.stderr.read()}")  # type: ignore[union-attr]

    def prompt(self, line: str) -> dict[str, Any]:
        """A command on stdin; its JSON answer."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.read_until("{"))

    def command(self, *words: str) -> tuple[int, dict[str, Any]]:
        done = run("namesrv_sandbox", *words, "--control", self.control)
        return done.returncode, json.loads(done.stdout) if done.stdout else {}

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run("namesrv.admin", "-n", self.namesrv, *args)


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox()
    try:
        box.read_until("ready")
        yield box
    finally:
        box.proc.send_signal(signal.SIGTERM)
        try:
            box.proc.wait(timeout=30)
        finally:
            if box.proc.poll() is None:
                box.proc.kill()


def brokers_of(box: Sandbox, topic: str) -> dict[str, int]:
    done = box.admin("topic-route", topic, "--json")
    assert done.returncode == 0, done.stderr
    return {q["brokerName"]: q["writeQueueNums"] for q in json.loads(done.stdout)["queueDatas"]}


def test_it_starts_a_name_server_registers_counts_sends_and_serves_update_topic(sandbox):
    assert any(f"started a name server at {sandbox.namesrv}" in line for line in sandbox.said)
    assert brokers_of(sandbox, "T") == {"broker-a": 2, "broker-b": 2}
    sent = run("client_push", "send", "--namesrv", sandbox.namesrv, "--topic", "T", "--count",
               "100")  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["sent_ok"] == 100
    code, stats = sandbox.command("stats")
    assert code == 0 and stats["received"] == 100
    assert {b["broker"]: b["received"] for b in stats["brokers"]} == json.loads(sent.stdout)[
        "first_attempts_by_broker"
    ]
    created = sandbox.admin("update-topic", "-c", "DefaultCluster", "-t", "New", "-w", "3")
    assert created.returncode == 0, created.stderr
    assert brokers_of(sandbox, "New") == {"broker-a": 3, "broker-b": 3}
    deleted = sandbox.admin("delete-topic", "-c", "DefaultCluster", "-t", "New")
    assert deleted.returncode == 0, deleted.stderr
    assert sandbox.admin("topic-route", "New").returncode == 1


def test_brokers_stop_fail_and_start_again_on_command(sandbox):
    failed = sandbox.prompt("fail broker-b")
    assert [b["state"] for b in failed["brokers"]] == ["failed"]
    # The name server saw the connection close: a lookup round trip shows broker-b gone.
    for _ in range(50):
        if brokers_of(sandbox, "T") == {"broker-a": 2}:
            break
    assert brokers_of(sandbox, "T") == {"broker-a": 2}
    code, started = sandbox.command("start", "broker-b")
    assert code == 0 and started["state"] == "running"
    assert started["addr"] == failed["brokers"][0]["addr"]  # the same port again
    assert brokers_of(sandbox, "T") == {"broker-a": 2, "broker-b": 2}
    code, stopped = sandbox.command("stop", "broker-a")
    assert code == 0 and stopped["brokers"][0]["state"] == "stopped"
    assert brokers_of(sandbox, "T") == {"broker-b": 2}  # unregistered before the answer
    code, refused = sandbox.command("stop", "broker-a")
    assert code == 1 and refused == {"error": "broker broker-a is stopped"}
    code, unknown = sandbox.command("fail", "broker-z")
    assert code == 1 and "no broker broker-z" in unknown["error"]


@pytest.mark.parametrize("options_first", [False, True], ids=["command-first", "options-first"])
def test_a_command_without_a_sandbox_says_so(options_first):
    options = ("--control", f"127.0.0.1:{free_port()}", "--wait", "0")
    words = (*options, "stats") if options_first else ("stats", *options)
    done = run("namesrv_sandbox", *words)
    assert done.returncode == 1
    assert "no sandbox answers at" in done.stderr


def test_a_second_sandbox_joins_the_running_name_server(sandbox):
    control = f"127.0.0.1:{free_port()}"
    second = subprocess.Popen(
        [sys.executable, "-m", "namesrv_sandbox", "--namesrv", sandbox.namesrv,
         "--control", control, "--broker", "broker-c", "--topic", "T:1", "--topic", "U"],
        cwd=REPO_ROOT, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        said = []
        for line in second.stdout:  # type: ignore[union-attr]
            said.append(line)
            if "ready" in line:
                break
        assert said[0] == f"sandbox: using the name server at {sandbox.namesrv}\n"
        assert brokers_of(sandbox, "T") == {"broker-a": 2, "broker-b": 2, "broker-c": 1}
        assert brokers_of(sandbox, "U") == {"broker-c": 4}
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0
    # It unregistered its broker on the way out.
    assert brokers_of(sandbox, "T") == {"broker-a": 2, "broker-b": 2}
