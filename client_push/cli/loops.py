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

from client_push.runtime.interface import Future, Main, Runtime, settle

T = TypeVar("T")

LOOPS = ("twisted", "asyncio", "uvloop")
DEFAULT_LOOP = "twisted"


EXIT_TLS_MISMATCH = 3
"""A command stopped because its name server speaks TLS and it does not, or the reverse."""
TLS_CHECK_INTERVAL_S = 0.1


def add_loop_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default=DEFAULT_LOOP,
        help="event loop to run the client on",
    )


def tls_mismatch(
    stats: dict[str, Any], tls: bool, namesrv: str, failed_handshakes: int = 2
) -> str | None:
    """What a command says and stops on when its connections met a TLS mismatch (no retry
    mends one): a server that refused plaintext, or ``failed_handshakes`` TLS connections
    closed before any answer while none was ever answered (one server closing while it
    starts or stops is not a mismatch; a command that ends anyway needs fewer)."""
    if stats.get("wire.tls_required"):
        return f"the name server at {namesrv} requires TLS (server.tls = enforcing): run with --tls"
    failed = stats.get("wire.tls_failed", 0)
    if tls and failed >= failed_handshakes and not stats.get("wire.connections_answered"):
        return (
            f"the TLS handshake with {namesrv} failed and it never answered: it may not speak "
            "TLS (run without --tls), or --tls-ca does not verify it"
        )
    return None


def watch_tls(
    runtime: Runtime, client: Any, tls: bool, namesrv: str, stop: Future[None]
) -> Future[str]:
    """A future settled with :func:`tls_mismatch`'s message once ``client`` meets one (its
    ``stats()`` checked every ``TLS_CHECK_INTERVAL_S``); ``stop`` settled with it."""
    found: Future[str] = runtime.future()

    def check() -> None:
        if stop.done() or found.done():
            return
        message = tls_mismatch(client.stats(), tls, namesrv)
        if message is None:
            runtime.clock.call_later(TLS_CHECK_INTERVAL_S, check)
            return
        settle(found, message)
        settle(stop, None)

    runtime.clock.call_later(TLS_CHECK_INTERVAL_S, check)
    return found


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
