"""What every console script shares: ``--version`` (the package version, declared once) and
defaults stated one way in ``--help``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest
from support.paths import REPO_ROOT

from protocol.version import VERSION

COMMANDS = {
    "namesrv": ["namesrv"],
    "namesrv-admin": ["namesrv.admin"],
    "namesrv-sandbox": ["namesrv_sandbox"],
    "namesrv-pipeline": ["namesrv_pipeline"],
    "python -m client_push": ["client_push"],
}
HELPS = [
    ["namesrv"],
    ["namesrv.admin"],
    ["namesrv.admin", "update-topic"],
    ["namesrv.admin", "subscriptions"],
    ["namesrv_sandbox"],
    ["namesrv_sandbox", "stats"],
    ["namesrv_pipeline"],
    ["namesrv_pipeline", "demo"],
    ["client_push", "watch"],
    ["client_push", "send"],
]


def run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_every_console_script_is_listed_here():
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) | {"python -m client_push"} == set(COMMANDS)


@pytest.mark.parametrize("prog", sorted(COMMANDS))
def test_version_prints_the_package_version(prog):
    done = run(*COMMANDS[prog], "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{prog} {VERSION} (rocketmq-routepush)"


def test_pyproject_reads_the_one_version_declaration():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "protocol.version.VERSION"
    }


@pytest.mark.parametrize("argv", HELPS, ids=" ".join)
def test_help_states_defaults_one_way(argv):
    done = run(*argv, "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert not re.search(r"\(default[ :]", text), text
    assert not re.search(r"\[default: (True|False)\]", text), text
