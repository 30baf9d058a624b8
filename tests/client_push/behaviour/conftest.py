"""``world``: fake name servers and route clients in the deterministic world
(``support.memory_route_world``). Route clients of one kind, once per kind (Twisted, asyncio,
uvloop), all stopped after the test: ``clients`` against a ``cluster``'s real ones;
``rig``: a producer driver against the real name server, in the deterministic world
(``support.memory_producer_world``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from support.memory_producer_world import MemoryProducerDriver
from support.memory_route_world import MemoryRouteWorld
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


@pytest.fixture
def rig(memory_rig: MemoryProducerDriver) -> MemoryProducerDriver:
    """A producer driver in the deterministic world, the name server started (its push
    settings: the test module's ``NAMESRV_PUSH``, if any); brokers, the producer or the
    routing are the case's."""
    return memory_rig
