"""The route client for Twisted programs: the shared ``RouteClientCore`` on the reactor.

::

    client = RouteClient(ClientConfig(namesrv_addrs=("127.0.0.1:9876",)))
    client.start()
    route = await client.get_route("TopicTest")   # in a coroutine driven by Twisted
    ...
    await client.stop()

``reactor`` carries the sockets; ``clock`` (default: the reactor) drives every timer, so tests
can run loopback traffic under ``twisted.internet.task.Clock``.
"""

from __future__ import annotations

import random
from typing import Any

from client_push.config import ClientConfig
from client_push.routes.client_core import RouteClientCore
from client_push.routes.events import BrokerEvent, BrokerListener, RouteEvent, RouteListener
from client_push.routes.telemetry import TelemetrySink
from client_push.runtime.twisted_loop import TwistedRuntime

__all__ = ["BrokerEvent", "BrokerListener", "RouteClient", "RouteEvent", "RouteListener"]


class RouteClient(RouteClientCore):
    def __init__(
        self,
        config: ClientConfig,
        reactor: Any = None,
        rng: random.Random | None = None,
        *,
        clock: Any | None = None,
        telemetry: TelemetrySink | None = None,
    ) -> None:
        super().__init__(config, TwistedRuntime(reactor, clock), rng, telemetry)

    def stop(self) -> Any:
        """A Deferred that fires once timers are stopped, waiting lookups failed with
        ``ClientStoppedError`` and connections closed (within ``close_timeout_ms``)."""
        return self.runtime.public(self._close())
