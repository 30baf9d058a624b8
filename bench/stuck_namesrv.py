"""A route client against a name server that accepts the connection and never reads: its
memory while the application keeps asking, and how long ``close()`` takes.

One loop per run (``--loop twisted|asyncio|uvloop``); the stuck server runs on the same loop.
The application asks ``--topics`` distinct topics (names of ``--topic-bytes``) in turns of
``--batch`` lookups every 10 ms, round and round, for ``--seconds``: more topics than
``max_requests_in_flight`` allows in flight, so the bounds are what keeps memory flat. Every
second it prints the process's RSS, the requests and request bytes in flight and the lookups
refused; at the end, the time ``close()`` took (``close_timeout_ms``, default 3 s).

    python bench/stuck_namesrv.py --loop asyncio [--seconds 20] [--topics 20000]
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from client_push.config import ClientConfig  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Run:
    def __init__(self, args: argparse.Namespace, client: Any) -> None:
        self.args = args
        self.client = client
        self.topics = [f"{i:06d}" + "x" * args.topic_bytes for i in range(args.topics)]
        self.next = 0
        self.failed = 0
        self.rows: list[dict[str, Any]] = []

    def batch(self) -> list[str]:
        out = []
        for _ in range(self.args.batch):
            out.append(self.topics[self.next])
            self.next = (self.next + 1) % len(self.topics)
        return out

    def sample(self, second: int) -> None:
        out = self.client.outstanding()
        row = {
            "s": second,
            "rss_mib": round(rss_mib(), 1),
            "requests": out["requests"],
            "held_back": out["held_back_writes"],
            "request_mib": round(out["request_bytes"] / 2**20, 1),
            "lookups_refused": self.failed,
            "writes_paused": self.client.stats().get("wire.writes_paused", 0),
        }
        self.rows.append(row)
        print(json.dumps(row), flush=True)


def config(args: argparse.Namespace, addr: str) -> ClientConfig:
    return ClientConfig(namesrv_addrs=(addr,), request_timeout_ms=args.timeout_ms)


def run_twisted(args: argparse.Namespace) -> None:
    from twisted.internet import defer, protocol, reactor, task

    from client_push.routes.client import RouteClient

    held: list[Any] = []

    class Deaf(protocol.Protocol):
        def connectionMade(self) -> None:
            held.append(self)
            self.transport.pauseProducing()  # type: ignore[union-attr]

    port = reactor.listenTCP(0, protocol.Factory.forProtocol(Deaf), interface="127.0.0.1")
    port.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    addr = f"127.0.0.1:{port.getHost().port}"

    async def main() -> None:
        client = RouteClient(config(args, addr), reactor)
        client.start()
        run = Run(args, client)

        def count(failure: Any) -> None:
            run.failed += 1

        started = time.monotonic()
        second = 0
        while time.monotonic() - started < args.seconds:
            for topic in run.batch():
                defer.ensureDeferred(client.get_route(topic)).addErrback(count)
            await task.deferLater(reactor, 0.01, lambda: None)
            if time.monotonic() - started >= second + 1:
                second += 1
                run.sample(second)
        t0 = time.monotonic()
        await client.stop()
        print(json.dumps({"close_s": round(time.monotonic() - t0, 3)}), flush=True)

    def done(result: Any) -> None:
        if isinstance(result, Exception) or hasattr(result, "getTraceback"):
            print(result)
        reactor.stop()

    defer.ensureDeferred(main()).addBoth(done)
    reactor.run()


def run_asyncio(args: argparse.Namespace) -> None:
    import asyncio

    from client_push.aio import RouteClient

    held: list[Any] = []

    class Deaf(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            held.append(transport)
            transport.pause_reading()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Deaf, "127.0.0.1", 0)
        server.sockets[0].setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        addr = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        client = RouteClient(config(args, addr))
        await client.__aenter__()
        run = Run(args, client)
        tasks: set[asyncio.Task[Any]] = set()

        async def one(topic: str) -> None:
            try:
                await client.get_route(topic)
            except Exception:
                run.failed += 1

        started = time.monotonic()
        second = 0
        while time.monotonic() - started < args.seconds:
            for topic in run.batch():
                t = loop.create_task(one(topic))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
            await asyncio.sleep(0.01)
            if time.monotonic() - started >= second + 1:
                second += 1
                run.sample(second)
        t0 = time.monotonic()
        await client.close()
        print(json.dumps({"close_s": round(time.monotonic() - t0, 3)}), flush=True)
        server.close()

    if args.loop == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loop", choices=("twisted", "asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--topics", type=int, default=20_000)
    parser.add_argument("--topic-bytes", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--timeout-ms", type=int, default=3_000, help="request_timeout_ms")
    args = parser.parse_args()
    if args.loop == "twisted":
        run_twisted(args)
    else:
        run_asyncio(args)


if __name__ == "__main__":
    main()
