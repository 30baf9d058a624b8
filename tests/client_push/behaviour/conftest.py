"""``world``: fake name servers and route clients of one kind, once per kind (Twisted, asyncio,
uvloop), all stopped after the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import pytest_twisted
from support.route_drivers import DRIVER_KINDS, World
from twisted.internet import defer


@pytest.fixture(params=DRIVER_KINDS)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    w = World(request.param)
    yield w
    pytest_twisted.blockon(defer.ensureDeferred(w.close()))
