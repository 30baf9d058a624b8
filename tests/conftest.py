"""Shared fixtures: a name server on loopback with fake-clock timers.

The tests run on the reactor ``namesrv`` runs on in production (installed here, before
pytest-twisted installs its default one, which accepts it as the epoll reactor it is).
"""

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from namesrv.net import lean_reactor

lean_reactor.install()

pytest_plugins = [
    "support.server_fixtures",
    "support.route_cluster",
    "support.spark_fixtures",
    "support.aio_loop",
    "support.memory_world",
    "support.memory_route_world",
    "support.memory_producer_world",
]


TESTS = Path(__file__).resolve().parent

JVM_SUITES = ("interop", "namesrv_pipeline")
"""Test folders whose tests boot JVMs (Apache RocketMQ, Spark): the longest work. When the run is
spread over workers (tox runs ``pytest -n 2 --dist loadfile``) their files go out first, so each
worker starts on one of them and the short tests fill in around them."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.path.relative_to(TESTS).parts[0] not in JVM_SUITES)


def _home_state(directory: Path) -> list[tuple[str, int, int]]:
    if not directory.exists():
        return []
    return sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in directory.rglob("*"))


@pytest.fixture(scope="session", autouse=True)
def no_test_writes_the_home_directorys_name_server_state() -> Iterator[None]:
    """The default KV file is ``~/namesrv/kvConfig.json``: a test that ran a name server on
    the defaults would read and write an operator's real state. Tests run theirs in memory or
    under a temporary home (``support.server_fixtures.isolated_config``,
    ``support.paths.isolated_home``); this fails the session when ``~/namesrv`` changed."""
    directory = Path(pwd.getpwuid(os.getuid()).pw_dir) / "namesrv"
    before = _home_state(directory)
    yield
    after = _home_state(directory)
    if after != before:
        changed = sorted(set(after) ^ set(before))[:5]
        pytest.fail(f"a test wrote the name server's state in {directory}: {changed}")
