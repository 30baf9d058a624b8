"""One local Spark session for every pipeline test (starting the JVM costs seconds), and one
standalone cluster for the tests that need one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support.spark_standalone import StandaloneCluster, java_missing, standalone_cluster


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from namesrv_pipeline.spark.session import spark_session

    session = spark_session("local[2]", shuffle_partitions=1)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and two workers on loopback, started once per session and stopped (every
    process killed) at its end, whatever the tests did."""
    reason = java_missing()
    if reason is not None:
        pytest.skip(reason)
    with standalone_cluster(tmp_path_factory.mktemp("spark-standalone"), workers=2) as cluster:
        yield cluster
