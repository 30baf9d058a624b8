"""``async with`` for the asyncio faces: entering starts the object, leaving closes it."""

from __future__ import annotations

from typing import Self

from client_push.routes.closing import ClosedOnExit


class StartedInContext(ClosedOnExit):
    """Mixed in after the class that supplies ``start`` and ``close``."""

    def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        await self.close()

    async def __aenter__(self) -> Self:
        self.start()
        return self
