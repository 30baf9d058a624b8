"""One local Spark session for every pipeline test: starting the JVM costs seconds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pipeline.session import spark_session

    session = spark_session("local[2]", shuffle_partitions=1)
    yield session
    session.stop()
