"""``world``: fake name servers and route clients in the deterministic world
(``support.memory_route_world``). Route clients of one kind, once per kind (Twisted, asyncio,
uvloop), all stopped after the test: ``clients`` against a ``cluster``'s real ones;
``rig``: a producer driver of one kind against a ``cluster``'s real name server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from support.memory_route_world import MemoryRouteWorld
from support.producer_drivers import PRODUCER_KINDS, ProducerDriver, producer_driver
from support.route_drivers import DRIVER_KINDS, ClusterClients
from twisted.internet import defer


@pytest.fixture
def world(memory_routes: MemoryRouteWorld) -> MemoryRouteWorld:
    """Fake name servers and route clients in the deterministic world."""
    return memory_routes


@pytest.fixture(params=DRIVER_KINDS)
def clients(request: pytest.FixtureRequest, cluster: Any) -> Iterator[ClusterClients]:
    c = ClusterClients(request.param, cluster)
    yield c
    pytest_twisted.blockon(defer.ensureDeferred(c.close()))


@pytest.fixture(params=PRODUCER_KINDS)
def rig(request: pytest.FixtureRequest, cluster: Any) -> Iterator[ProducerDriver]:
    """The name server started (its push settings: the test module's ``NAMESRV_PUSH``, if
    any); brokers, the producer or the routing are the case's."""
    driver, cleanup = producer_driver(request.param, cluster)
    driver.server(**getattr(request.module, "NAMESRV_PUSH", {}))
    yield driver
    try:
        pytest_twisted.blockon(defer.ensureDeferred(driver.close()))
    finally:
        cleanup()
