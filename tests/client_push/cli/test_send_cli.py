"""``python -m client_push send``: its summary against stand-ins, its usage errors, its config."""

from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import subprocess
import sys

import pytest
import pytest_twisted
from support.paths import REPO_ROOT
from support.process_output import Collect
from support.server_fixtures import FakeSampler, isolated_config
from twisted.internet import reactor, task

from client_push.cli.loops import LOOPS
from client_push.cli.send import Progress, percentile, producer_config
from namesrv.server import NameServer
from namesrv_sandbox.standin import BrokerStandIn

ROOT = REPO_ROOT


@pytest.fixture
def served():
    raw = {
        # Past its start-up window: a topic no broker registered is absent at once.
        "server": {"listen": "127.0.0.1:0", "shutdown_grace_ms": 0, "wait_for_service_ms": 0},
        "pressure": {"enabled": False},
    }
    server = NameServer(
        isolated_config(raw),
        reactor,
        clock=task.Clock(),
        sampler=FakeSampler(),
        epoch=secrets.token_hex(4),
    )
    port = server.listen().getHost().port  # type: ignore[attr-defined]
    yield port
    pytest_twisted.blockon(server.stop(grace_ms=0))


@pytest.mark.parametrize("loop", LOOPS)
@pytest_twisted.ensureDeferred
async def test_send_prints_one_summary_with_where_first_attempts_went(served, loop):
    brokers = [
        BrokerStandIn(name, {"T": 2}, [f"127.0.0.1:{served}"], reactor=reactor, clock=task.Clock())
        for name in ("broker-a", "broker-b")
    ]
    for b in brokers:
        await b.start()
    brokers[1].busy()
    run = Collect()
    reactor.spawnProcess(  # type: ignore[attr-defined]
        run,
        sys.executable,
        [sys.executable, "-m", "client_push", "send", "--namesrv", f"127.0.0.1:{served}",
         "--topic", "T", "--count", "40", "--size", "5000", "--concurrency", "4",
         "--keys", "k1", "k2", "--tags", "TagA", "--strategy", "5x", "--no-detector",
         "--loop", loop],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        path=str(ROOT),
    )  # fmt: skip
    try:
        code = await run.ended
    finally:
        for b in brokers:
            await b.kill()
    assert code == 0, run.err.decode()
    summary = json.loads(run.out)
    assert summary["sent_ok"] == 40 and summary["failed"] == 0
    assert summary["statuses"] == {"SEND_OK": 40}
    assert sum(summary["first_attempts_by_broker"].values()) == 40
    assert summary["busy_answers"] >= 1 and summary["retries"] == summary["busy_answers"]
    assert summary["p99_ms"] >= summary["p50_ms"] > 0
    assert summary["strategy"] == "5x" and summary["detector"] is False
    got = brokers[0].messages[-1]
    assert got.keys == ("k1", "k2") and got.tags == "TagA" and len(got.body) == 5000
    assert brokers[0].received == 40 and run.err == b""  # no progress bar off a terminal


@pytest.mark.parametrize("loop", LOOPS)
def test_a_topic_nobody_serves_fails_every_send_and_exits_1(tmp_path, loop):
    config = tmp_path / "p.toml"
    config.write_text("[producer]\nsend_timeout_ms = 300\nretries = 0\n")
    done = subprocess.run(
        [sys.executable, "-m", "client_push", "send", "--namesrv", "127.0.0.1:1",
         "--topic", "T", "--count", "3", "--config", str(config), "--loop", loop],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert summary["failed"] == 3 and summary["sent_ok"] == 0 and summary["errors"]


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--count", "0"], "must be positive"),
        (["--count", "5", "--strategy", "7x"], "invalid choice"),
        (["--count", "5", "--retries", "-1"], "retries must not be negative"),
    ],
)
def test_bad_arguments_are_usage_errors(args, complaint):
    done = subprocess.run(
        [sys.executable, "-m", "client_push", "send", "--namesrv", "127.0.0.1:9876",
         "--topic", "T", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 2 and complaint in done.stderr


def test_flags_override_the_config_files_producer_table(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[producer]\nstrategy = "off"\nretries = 5\nbusy_backoff_ms = 7\n')
    ns = argparse.Namespace(
        config=str(path), strategy="5x", detector=False, go_away=False, timeout_ms=None,
        retries=None,
    )  # fmt: skip
    cfg = producer_config(ns)
    assert cfg.retries == 5 and cfg.busy_backoff_ms == 7 and not cfg.honour_go_away
    assert cfg.fault.enabled and not cfg.fault.detector_enabled
    assert cfg.fault.isolation_ms[2] == 2_000  # the 5.x tiers


def test_percentiles_take_the_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50 and percentile(values, 0.99) == 99
    assert percentile([], 0.5) == 0 and percentile([3.0], 0.99) == 3


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_draws_only_on_a_terminal_and_ends_with_a_newline():
    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress(10, stream)
        bar.update(5, 1, force=True)
        bar.update(10, 1, force=True)
    assert pipe.getvalue() == ""
    assert "\r[###############...............] 5/10 failed 1" in tty.getvalue()
    assert tty.getvalue().endswith("10/10 failed 1\n")


def test_the_first_probe_wait_is_a_producer_table_key():
    from client_push.producer.config import ProducerConfigError
    from client_push.producer.config import from_mapping as producer_from_mapping

    cfg = producer_from_mapping({"strategy": "5x", "first_probe_wait_ms": 120})
    assert cfg.fault.first_probe_wait_ms == 120 and cfg.fault.latency_levels_ms[3] == 1_800
    assert producer_from_mapping({}).fault.first_probe_wait_ms == 50
    with pytest.raises(ProducerConfigError, match="first_probe_wait_ms"):
        producer_from_mapping({"first_probe_wait_ms": "soon"})
    with pytest.raises(ProducerConfigError, match="first_probe_wait_ms"):
        producer_from_mapping({"first_probe_wait_ms": -1})
