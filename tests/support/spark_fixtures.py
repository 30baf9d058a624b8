"""One local Spark session for the pipeline tests (starting the JVM costs seconds), started again
for the next module when a test left it unusable, and one standalone cluster for the tests that
need one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from support.spark_standalone import StandaloneCluster, java_missing, standalone_cluster


class LocalSessions:
    """The tests' local session. A JVM the kernel killed, or a py4j connection left half-read by
    an interrupted call, fails every later use of that session; a module that finds it so gets
    a new JVM instead of failing whole for another module's trouble."""

    def __init__(self) -> None:
        self.session: Any = None
        self.restarts = 0

    def usable(self) -> Any:
        from namesrv_pipeline.spark.session import spark_session

        if self.session is not None and not _answers(self.session):
            self.discard()
            self.restarts += 1
        if self.session is None:
            self.session = spark_session("local[2]", shuffle_partitions=1)
        return self.session

    def discard(self) -> None:
        """Stops the session and forgets its JVM, so the next session launches one."""
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        gateway = SparkContext._gateway
        with contextlib.suppress(Exception):
            self.session.stop()
        self.session = None
        proc = getattr(gateway, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        # PySpark keeps one gateway per process for every later context: a dead one must go.
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None


def _answers(session: Any) -> bool:
    """Whether ``session`` runs a one-row job and gives the right count."""
    try:
        return bool(session.range(1).count() == 1)
    except Exception:  # py4j and Spark raise their own types for a dead or broken JVM
        return False


@pytest.fixture(scope="session")
def local_sessions() -> Iterator[LocalSessions]:
    sessions = LocalSessions()
    yield sessions
    if sessions.session is not None:
        sessions.discard()


@pytest.fixture(scope="module")
def spark(local_sessions: LocalSessions) -> Any:
    return local_sessions.usable()


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and two workers on loopback, started once per session and stopped (every
    process killed) at its end, whatever the tests did."""
    reason = java_missing()
    if reason is not None:
        pytest.skip(reason)
    with standalone_cluster(tmp_path_factory.mktemp("spark-standalone"), workers=2) as cluster:
        yield cluster
