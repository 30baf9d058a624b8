"""An aiohttp service that answers with a topic's route, kept fresh by route push.

    python examples/aio_route_service.py --namesrv 127.0.0.1:9876 --port 8080 --watch TopicTest
    curl localhost:8080/routes/TopicTest

It listens on 127.0.0.1 only; ``--host 0.0.0.0`` (or one interface's address) serves other
machines too.

``GET /routes/{topic}`` answers with the route the client holds (fetched on first use, then
refetched whenever the name server notifies a change), so a change made at the name server
shows in the next answer without restarting anything. ``--watch`` topics are followed with
``RouteClient.changes`` and each change is logged as it arrives. Runs on uvloop when it is
installed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from aiohttp import web

from client_push import ClientConfig, TopicNotExistError
from client_push.aio import RouteClient
from client_push.errors import RouteClientError
from client_push.routes.route_cache import CachedRoute

ROUTE_CLIENT = web.AppKey("route_client", RouteClient)
log = logging.getLogger("aio_route_service")


def route_json(entry: CachedRoute) -> dict[str, Any]:
    route = entry.route
    return {
        "topic": entry.topic,
        "version": entry.version,
        "brokers": {
            broker.broker_name: {str(bid): addr for bid, addr in broker.broker_addrs.items()}
            for broker in route.broker_datas
        },
        "queues": [
            {
                "broker": q.broker_name,
                "read": q.read_queue_nums,
                "write": q.write_queue_nums,
                "perm": q.perm,
            }
            for q in route.queue_datas
        ],
        "writable_queues": len(entry.publish_info.message_queues),
    }


async def get_route(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    try:
        entry = await request.app[ROUTE_CLIENT].get_route(topic)
    except TopicNotExistError as exc:
        return web.json_response({"topic": topic, "error": str(exc)}, status=404)
    except RouteClientError as exc:
        return web.json_response({"topic": topic, "error": str(exc)}, status=503)
    return web.json_response(route_json(entry))


async def log_changes(client: RouteClient, topics: Sequence[str]) -> None:
    async with client.changes(topics) as changes:
        async for change in changes:
            log.info(
                "route of %s: version %d (%s)%s",
                change.topic,
                change.version,
                change.cause,
                "" if change.exists else ", topic does not exist",
            )


def build_app(config: ClientConfig, watch: Sequence[str] = ()) -> web.Application:
    """The service: one route client for the app's lifetime, closed with it."""

    async def route_client(app: web.Application) -> AsyncIterator[None]:
        async with RouteClient(config) as client:
            app[ROUTE_CLIENT] = client
            watcher = asyncio.create_task(log_changes(client, watch)) if watch else None
            yield
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher

    app = web.Application()
    app.cleanup_ctx.append(route_client)
    app.router.add_get("/routes/{topic}", get_route)
    return app


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876", help="HOST:PORT[;HOST:PORT]")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every "
        "interface)",
    )
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--watch", action="append", default=[], help="log this topic's changes")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    loop = None
    with contextlib.suppress(ImportError):
        import uvloop

        loop = uvloop.new_event_loop()
    app = build_app(ClientConfig(namesrv_addrs=args.namesrv), args.watch)
    web.run_app(app, host=args.host, port=args.port, loop=loop)


if __name__ == "__main__":
    main()
