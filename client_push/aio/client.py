"""The route client for asyncio programs: the shared ``RouteClientCore`` on the running loop.

``async with RouteClient(config) as client:`` connects and starts the timers on the running
loop; leaving it closes everything. ``clock`` (default: the wall clock with the loop's
timers) drives every timer, so tests run polls and expiry on a fake one.
"""

from __future__ import annotations

import random

from client_push.aio.context import StartedInContext
from client_push.config import ClientConfig
from client_push.routes.client_core import RouteClientCore, UnknownActionError
from client_push.routes.telemetry import TelemetrySink
from client_push.runtime.asyncio_loop import AsyncioRuntime
from client_push.runtime.interface import Clock

__all__ = ["RouteClient", "UnknownActionError"]


class RouteClient(RouteClientCore, StartedInContext):
    def __init__(
        self,
        config: ClientConfig,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        telemetry: TelemetrySink | None = None,
    ) -> None:
        super().__init__(config, AsyncioRuntime(clock), rng, telemetry, must_start=True)

    async def close(self) -> None:
        """Stop timers, fail waiting lookups with ``ClientStoppedError``, end every
        ``changes()`` stream and close connections (within ``close_timeout_ms``)."""
        await self._close()
