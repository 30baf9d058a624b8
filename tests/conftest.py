"""Shared fixtures: a name server on loopback with fake-clock timers.

The tests run on the reactor ``namesrv`` runs on in production (installed here, before
pytest-twisted installs its default one, which accepts it as the epoll reactor it is).
"""

import fcntl
import os
import pwd
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

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

# A local Spark JVM's heap is a quarter of the machine's memory by default. The suite starts
# one per worker and one per pipeline CLI it runs, and several runs may share a machine: at
# that size their heaps outgrow its memory, the kernel kills one, and a name server beside
# them stops notifying (memory pressure). The tests' journals fit in Spark's own 1 GiB.
os.environ.setdefault("SPARK_DRIVER_MEMORY", "1g")

JVM_SUITES = ("interop", "namesrv_pipeline")
"""Test folders whose tests boot JVMs (Apache RocketMQ, Spark): the longest work. When the run is
spread over workers (tox runs ``pytest -n 2 --dist loadfile``) their files go out first, so each
worker starts on one of them and the short tests fill in around them."""


JVM_SLOTS = 2
"""Files of JVM tests that run at once on one machine, however many pytest runs share it: one per
core of the machines the suite is sized for. Each holds a machine-wide slot (a lock file) from its
first test's setup to its last test's teardown, so parallel runs queue their JVM clusters instead
of starving each other's clients past the timeouts those clients keep in wall-clock time."""
JVM_TIMEOUT_S = 900
"""The hang guard of a JVM test (other tests keep pyproject's): booting a cluster or a Spark session
beside other runs' work takes minutes, not hours."""
SLOT_DIR = Path(tempfile.gettempdir())


def boots_jvms(item: pytest.Item) -> bool:
    return (
        item.path.relative_to(TESTS).parts[0] in JVM_SUITES
        or item.get_closest_marker("interop") is not None
        or "spark" in getattr(item, "fixturenames", ())
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if boots_jvms(item) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(JVM_TIMEOUT_S))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: not boots_jvms(item))


class JvmSlot:
    """The machine-wide slot of the JVM file a worker runs now, if any."""

    def __init__(self) -> None:
        self._held: IO[bytes] | None = None

    def take(self) -> None:
        if self._held is None:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
            slot = int(worker.removeprefix("gw") or 0) % JVM_SLOTS
            held = (SLOT_DIR / f"rocketmq-routepush-jvm-slot-{slot}.lock").open("ab")
            fcntl.flock(held, fcntl.LOCK_EX)
            self._held = held

    def give_back(self) -> None:
        if self._held is not None:
            self._held.close()  # closing the file releases its lock
            self._held = None


_JVM_SLOT = JvmSlot()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Taken before the timeout plugin starts a test's clock: a file waiting for its slot is not
    a hung test."""
    if boots_jvms(item):
        _JVM_SLOT.take()
    yield
    if nextitem is None or nextitem.path != item.path:
        _JVM_SLOT.give_back()


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
