"""Queue selection for asyncio programs: the shared ``RoutingCore`` on the running
loop (the detector's and the waits' timers on ``clock``, default the route client's)."""

from __future__ import annotations

import random

from client_push.aio.client import RouteClient
from client_push.producer.auto_create import AutoCreateTopic
from client_push.producer.fault_table import FaultStrategyConfig
from client_push.producer.routing_core import RoutingCore
from client_push.runtime.asyncio_loop import AsyncioRuntime
from client_push.runtime.interface import Clock


class ProducerRouting(RoutingCore):
    def __init__(
        self,
        client: RouteClient,
        config: FaultStrategyConfig | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        auto_create: AutoCreateTopic | None = None,
    ) -> None:
        runtime = AsyncioRuntime(clock) if clock is not None else None
        super().__init__(client, config, runtime=runtime, rng=rng, auto_create=auto_create)
