"""bench/instructions.py measures requests that were answered, and only those: its child serves
a case's requests and every answer is counted and checked (without valgrind here)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "bench" / "instructions.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_instructions", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while being built
    spec.loader.exec_module(module)
    return module


def test_a_lookup_case_runs_and_every_request_is_answered_success() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--cases", "lookup", "--requests", "20", "--no-valgrind"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "lookup" in done.stdout and "answers checked" in done.stdout


def test_a_plan_that_reads_every_register_answer_checks_them_all(tmp_path: Path) -> None:
    bench = load_script()
    plan = bench.build_plan("heartbeat-compressed", 2)
    figures = bench.measure(
        "heartbeat", plan, [REPO_ROOT], 2, valgrind=False, jobs=1, work=tmp_path
    )
    assert figures == [None]
    answers = (tmp_path / "heartbeat-0-2.answers").read_bytes()
    assert answers.count(b'"code":0') == len(plan.setup) + len(plan.warmup) + 2


def test_requests_the_server_refuses_fail_the_case_loudly(tmp_path: Path) -> None:
    bench = load_script()
    vs_upstream = bench.builders()
    plan = bench.build_plan("lookup", 10)
    unrouted = b"".join(vs_upstream.lookup_frame("NoBrokerRoutesThis", i) for i in range(10))
    plan.measured = [(unrouted, 10)] * len(plan.measured)
    with pytest.raises(RuntimeError, match="measures no successful requests"):
        bench.measure("lookup", plan, [REPO_ROOT], 10, valgrind=False, jobs=1, work=tmp_path)


def test_a_request_left_unanswered_fails_the_case_loudly(tmp_path: Path) -> None:
    bench = load_script()
    plan = bench.build_plan("lookup", 10)
    data, count = plan.measured[0]
    plan.measured[0] = (data, count + 1)  # one more request than the read holds
    with pytest.raises(RuntimeError, match="measures no successful requests"):
        bench.measure("lookup", plan, [REPO_ROOT], 10, valgrind=False, jobs=1, work=tmp_path)
