"""Route clients of one kind, once per kind (Twisted, asyncio, uvloop), all stopped after the
test: ``world`` against fake name servers, ``clients`` against a ``cluster``'s real ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from support.route_drivers import DRIVER_KINDS, ClusterClients, World
from twisted.internet import defer


@pytest.fixture(params=DRIVER_KINDS)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    w = World(request.param)
    yield w
    pytest_twisted.blockon(defer.ensureDeferred(w.close()))


@pytest.fixture(params=DRIVER_KINDS)
def clients(request: pytest.FixtureRequest, cluster: Any) -> Iterator[ClusterClients]:
    c = ClusterClients(request.param, cluster)
    yield c
    pytest_twisted.blockon(defer.ensureDeferred(c.close()))
