"""The producer for Twisted programs: the shared ``ProducerCore`` on the reactor::

    producer = Producer(client, "my-group")
    producer.start()
    result = await producer.send("TopicTest", b"hello", keys=["order-1"], tags="TagA")

``send`` and ``send_oneway`` return Deferreds; everything else is ``producer_core``'s.
"""

from __future__ import annotations

import random
from typing import Any

from client_push.producer.config import ProducerConfig
from client_push.producer.producer_core import ProducerCore
from client_push.producer.routing_core import RoutingCore
from client_push.producer.send_core import BrokerRefusedError, SendError, SendResult
from client_push.routes.client import RouteClient
from client_push.runtime.twisted_loop import TwistedRuntime

__all__ = ["BrokerRefusedError", "Producer", "SendError", "SendResult"]


class Producer(ProducerCore):
    def __init__(
        self,
        client: RouteClient,
        group: str,
        config: ProducerConfig | None = None,
        *,
        reactor: Any = None,
        clock: Any = None,
        rng: random.Random | None = None,
        routing: RoutingCore | None = None,
    ) -> None:
        """``reactor``/``clock``: the producer's sockets and timers (default: the route
        client's)."""
        given = reactor is not None or clock is not None
        runtime = TwistedRuntime(reactor, clock) if given else client.runtime
        super().__init__(client, group, config, runtime, rng, routing)

    def stop(self) -> Any:
        """Close the broker connections and stop the detector; sends in flight fail. A
        Deferred that fires once the connections are closed (within ``close_timeout_ms``)."""
        return self._runtime.public(self._close())
