"""``async with`` for the asyncio faces: entering starts the object, leaving closes it."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self


class StartedInContext:
    """Mixed in after the class that supplies ``start`` and ``close``."""

    def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any:
        await self.close()
