"""The producer for asyncio programs: the shared ``ProducerCore`` on the running loop.

::

    async with RouteClient(ClientConfig(...)) as client:
        async with Producer(client, "my-group", ProducerConfig()) as producer:
            result = await producer.send("TopicTest", b"hello", keys=["order-1"], tags="TagA")

The rules (retries, the fault strategy, GoAway, auto-creation, what a cancelled send leaves
behind: nothing) are ``client_push.producer.producer_core``'s, the same as Twisted's.
"""

from __future__ import annotations

import random

from client_push.aio.client import RouteClient
from client_push.aio.context import StartedInContext
from client_push.producer.config import ProducerConfig
from client_push.producer.producer_core import ProducerCore
from client_push.producer.send_core import BrokerRefusedError, SendError, SendResult
from client_push.runtime.asyncio_loop import AsyncioRuntime
from client_push.runtime.interface import Clock

__all__ = ["BrokerRefusedError", "Producer", "SendError", "SendResult"]


class Producer(ProducerCore, StartedInContext):
    def __init__(
        self,
        client: RouteClient,
        group: str,
        config: ProducerConfig | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """``clock``: every timer of the producer (attempt timeouts, backoffs, waits, the
        detector); default the route client's."""
        runtime = AsyncioRuntime(clock) if clock is not None else client.runtime
        super().__init__(client, group, config, runtime, rng, must_start=True)

    async def close(self) -> None:
        """Stop the detector, fail the sends in flight and close the broker connections
        (within ``close_timeout_ms``)."""
        await self._close()
