"""The event loop a command runs on (``--loop``), and the client's public faces on it.

The commands are written once over ``client_push.runtime``: ``run`` hands a command's ``main``
to the chosen adapter, and ``Faces`` names the route client and producer classes of that loop
(their constructors take the same arguments) and how each is closed.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from client_push.runtime.interface import Main

T = TypeVar("T")

LOOPS = ("twisted", "asyncio", "uvloop")
DEFAULT_LOOP = "twisted"


def add_loop_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default=DEFAULT_LOOP,
        help=f"event loop to run the client on ({DEFAULT_LOOP})",
    )


@dataclass(frozen=True, slots=True)
class Faces:
    """``route_client(config, rng=...)``, ``producer(client, group, config, rng=...)`` and
    ``close(obj)`` (an awaitable that ends once ``obj`` is closed) on one loop."""

    route_client: Callable[..., Any]
    producer: Callable[..., Any]
    close: Callable[[Any], Awaitable[Any]]


def faces(loop: str) -> Faces:
    if loop == "twisted":
        from client_push.producer.producer import Producer
        from client_push.routes.client import RouteClient

        return Faces(RouteClient, Producer, lambda obj: obj.stop())
    from client_push import aio

    return Faces(aio.RouteClient, aio.Producer, lambda obj: obj.close())


def run(loop: str, main: Main[T]) -> T:
    """Run ``main`` on ``loop`` (one of ``LOOPS``) until it returns; its result."""
    if loop == "twisted":
        from client_push.runtime import twisted_loop

        return twisted_loop.run(main)
    if loop not in LOOPS:
        raise ValueError(f"unknown loop {loop!r}")
    from client_push.runtime import asyncio_loop

    return asyncio_loop.run(main, uvloop=loop == "uvloop")
