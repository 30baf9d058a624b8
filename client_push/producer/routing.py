"""Queue selection for Twisted programs: the shared ``RoutingCore`` on the reactor.
``reactor``/``clock`` default to the route client's."""

from __future__ import annotations

import random
from typing import Any

from client_push.producer.auto_create import AutoCreateTopic
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.routing_core import RoutingCore
from client_push.routes.client import RouteClient
from client_push.runtime.twisted_loop import TwistedRuntime


class ProducerRouting(RoutingCore):
    def __init__(
        self,
        client: RouteClient,
        config: FaultStrategyConfig | None = None,
        *,
        reactor: Any = None,
        clock: Any = None,
        rng: random.Random | None = None,
        auto_create: AutoCreateTopic | None = None,
    ) -> None:
        given = reactor is not None or clock is not None
        runtime = TwistedRuntime(reactor, clock) if given else None
        super().__init__(client, config, runtime=runtime, rng=rng, auto_create=auto_create)
