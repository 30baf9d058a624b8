"""``ClosedOnExit``: ``async with obj:`` gives ``obj`` and awaits ``obj.aclose()`` however the
block is left. The one ``async with`` of the client: change streams and the asyncio faces."""

from __future__ import annotations

from typing import Self


class ClosedOnExit:
    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
