"""A broker with many topics stopping and starting under many subscribed route clients.

Two brokers serve the same ``--topics`` topics (a two-master cluster); ``--clients`` real
``client_push.RouteClient`` instances each hold ``--held`` of those topics (client i the
``--held`` topics from i x topics / clients on, so every topic is held by clients x held / topics
clients). ``broker-a`` unregisters (it stops), then registers again (it starts).

Modes, in one run:

- ``before``: the seed's behaviour. ``[push.broker_events]`` all off (broker events silent, as
  ``[push.suppress]`` keeps them), clients without the version check, full poll every 120 s.
- ``after``: broker events on (defaults), clients with their defaults (departures dropped at
  once and confirmed over a window, arrivals refetched spread, 30 s version check).

Everything runs in this process over loopback sockets, with the name server's and the clients'
timers on one ``task.Clock``: traffic is real (every byte and request counted is one the
server really sent or handled), times are the clock's, stepped by ``--step`` seconds with the
loopback traffic drained after each step. Client start-ups are staggered over 120 s so their
poll phases are spread as in a real fleet.

For each event and mode it prints: bytes the name server sent to clients, route requests
(GET_ROUTEINFO + SUBSCRIBE) it handled in the busiest clock second, and the clock time from the
event until the last client holds the new state (every held route without broker-a after the
stop; with it after the start). Observation lasts ``--observe`` seconds after each event.

    python bench/broker_events.py [--clients 1000] [--topics 10000] [--held 100]
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.fake_broker import register_request, topic_configs, unregister_request  # noqa: E402
from twisted.internet import defer, reactor, task  # noqa: E402

from client_push.config import ClientConfig  # noqa: E402
from client_push.routes.client import RouteClient, RouteEvent  # noqa: E402
from client_push.wire import remoting  # noqa: E402
from namesrv.config import from_mapping  # noqa: E402
from namesrv.server import NameServer  # noqa: E402
from protocol.route_model import DataVersion  # noqa: E402

A_ADDR = "10.0.0.1:10911"
B_ADDR = "10.0.0.2:10911"
STAGGER_S = 120.0
MODES = ("before", "after", "after_lean")
"""after_lean: as after, with ``confirm_exact_departures = false`` on the clients."""

received = Counter[str]()
_original_data_received = remoting.RemotingConnection.data_received


def _counting_data_received(self: Any, data: bytes) -> None:
    received["bytes"] += len(data)
    _original_data_received(self, data)


remoting.RemotingConnection.data_received = _counting_data_received  # type: ignore[method-assign]


async def yield_reactor(seconds: float = 0.0) -> None:
    await task.deferLater(reactor, seconds, lambda: None)


class Fleet:
    def __init__(self, args: argparse.Namespace, mode: str) -> None:
        self.args = args
        self.mode = mode
        self.clock = task.Clock()
        self.clients: list[RouteClient] = []
        self.stale: set[tuple[int, str]] = set()
        """(client index, topic) pairs not yet holding the state the current event leads to."""
        self.want_broker_a = True
        self.last_fresh_at = 0.0

    def start_server(self) -> None:
        events = {"unregister": False, "channel_close": False, "expiry": False, "arrival": False}
        raw: dict[str, Any] = {
            # The stand-in brokers send nothing between their events: an idle close would
            # take broker-a away before its stop.
            # Every client and broker connects from 127.0.0.1: one host.
            "server": {
                "listen": "127.0.0.1:0",
                "shutdown_grace_ms": 0,
                "idle_timeout_ms": 0,
                "max_connections_per_host": self.args.clients + 10,
            },
            "registry": {"broker_expiry_ms": 100_000_000},
            "pressure": {"enabled": False},
            "push": {"max_total_subscriptions": 10_000_000},
        }
        if self.mode == "before":
            raw["push"]["broker_events"] = events
        self.server = NameServer(from_mapping(raw), reactor, clock=self.clock, epoch="bench")
        self.port = self.server.listen().getHost().port  # type: ignore[attr-defined]

    def requests(self) -> int:
        stats = self.server.stats()
        return stats.get("handled.GET_ROUTEINFO_BY_TOPIC", 0) + stats.get(
            "handled.SUBSCRIBE_TOPIC_ROUTE_CHANGED", 0
        )

    async def drain(self) -> None:
        """Yield until every request sent was handled and every answer applied."""
        quiet = 0
        last = -1
        while quiet < 3:
            await yield_reactor(0.002)
            now = self.requests()
            inflight = sum(len(c._inflight) for c in self.clients)
            quiet = quiet + 1 if (now == last and inflight == 0) else 0
            last = now

    def topics_of(self, i: int) -> list[str]:
        n, held, clients = self.args.topics, self.args.held, self.args.clients
        first = i * n // clients
        return [f"T{(first + k) % n:05d}" for k in range(held)]

    def client_config(self) -> ClientConfig:
        extra: dict[str, Any] = {}
        if self.mode == "before":
            extra = {"version_check_interval_ms": 10**9}
        elif self.mode == "after_lean":
            extra = {"confirm_exact_departures": False}
        return ClientConfig(
            namesrv_addrs=(f"127.0.0.1:{self.port}",),
            topic_idle_expiry_ms=10**9,
            request_timeout_ms=600_000,
            **extra,
        )

    def listener(self, i: int, topic: str) -> Any:
        def on_event(event: RouteEvent) -> None:
            if (i, topic) not in self.stale:
                return
            route = event.route
            has_a = route is not None and any(
                q.broker_name == "broker-a" for q in route.route.queue_datas
            )
            if has_a == self.want_broker_a:
                self.stale.discard((i, topic))
                if not self.stale:
                    self.last_fresh_at = self.clock.seconds()

        return on_event

    async def start(self) -> None:
        self.start_server()
        self.brokers = []
        for name, addr in (("broker-a", A_ADDR), ("broker-b", B_ADDR)):
            conn = await connect(self.port)
            self.brokers.append(conn)
            await self.answered(self.register(name, addr, 1), conn)
        self.clock.advance(1.0)
        await self.drain()
        rng = random.Random(7)
        per_step = max(1, self.args.clients // 100)
        batch: list[RouteClient] = []
        for i in range(self.args.clients):
            client = RouteClient(
                self.client_config(), reactor, random.Random(rng.random()), clock=self.clock
            )
            client.start()
            for topic in self.topics_of(i):
                client.add_listener(topic, self.listener(i, topic))
            self.clients.append(client)
            batch.append(client)
            if len(batch) == per_step:
                # Up and subscribed before the clock moves: its poll phase starts now.
                while not all(
                    c.push_active and c.stats()["cached_routes"] == self.args.held for c in batch
                ):
                    await yield_reactor(0.002)
                await self.drain()
                batch = []
                self.clock.advance(STAGGER_S * per_step / self.args.clients)
        await self.drain()
        # Every client past its first full poll; in steps, so each timer re-arms at its own time.
        for _ in range(int(STAGGER_S / self.args.step)):
            self.clock.advance(self.args.step)
            await self.drain()

    def register(self, name: str, addr: str, counter: int) -> Any:
        version = DataVersion(state_version=0, timestamp=counter, counter=counter)
        topics = [f"T{k:05d}" for k in range(self.args.topics)]
        return register_request(
            topic_configs(*topics), broker_name=name, broker_addr=addr, data_version=version
        )

    async def answered(self, request: Any, conn: Any = None) -> Any:
        """A broker's request (broker-a's by default), answered: the server applies a large
        table (or drops a departed broker's) in slices on its clock, so the clock turns (by
        0 s) until the answer is in."""
        answer = (conn or self.brokers[0]).request(request)
        while not answer.called:
            self.clock.advance(0)
            await yield_reactor(0.002)
        return await answer

    async def observe(self, event: str, want_broker_a: bool) -> dict[str, Any]:
        self.want_broker_a = want_broker_a
        self.stale = {(i, t) for i in range(len(self.clients)) for t in self.topics_of(i)}
        bytes_before = received["bytes"]
        notify_before = self.server.stats().get("notification_bytes", 0)
        started = self.clock.seconds()
        self.last_fresh_at = started
        if event == "stop":
            await self.answered(unregister_request(broker_addr=A_ADDR))
        else:
            await self.answered(self.register("broker-a", A_ADDR, 2))
        per_second: Counter[int] = Counter()
        steps = round(self.args.observe / self.args.step)
        total_before = self.requests()
        for _ in range(steps):
            before = self.requests()
            self.clock.advance(self.args.step)
            await self.drain()
            second = int(self.clock.seconds() - started - 1e-9)
            per_second[second] += self.requests() - before
        return {
            "bytes": received["bytes"] - bytes_before,
            "notify_bytes": self.server.stats().get("notification_bytes", 0) - notify_before,
            "requests": self.requests() - total_before,
            "peak_rps": max(per_second.values()) if per_second else 0,
            "last_client_s": (self.last_fresh_at - started) if not self.stale else None,
            "stale_left": len(self.stale),
        }

    async def close(self) -> None:
        for client in self.clients:
            await client.stop()
        for conn in self.brokers:
            conn.transport.loseConnection()
        await self.server.stop(grace_ms=0)


async def connect(port: int) -> Any:
    from support.wire_client import connect as wire_connect

    return await wire_connect(port)


async def run(args: argparse.Namespace) -> dict[str, dict[str, dict[str, Any]]]:
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for mode in MODES:
        fleet = Fleet(args, mode)
        wall = time.monotonic()
        await fleet.start()
        print(
            f"[{mode}] {len(fleet.clients)} clients up, {fleet.requests()} requests so far "
            f"({time.monotonic() - wall:.0f} s wall)",
            flush=True,
        )
        results[mode] = {}
        for event, want in (("stop", False), ("start", True)):
            results[mode][event] = await fleet.observe(event, want)
            print(f"[{mode}] {event}: {results[mode][event]}", flush=True)
        await fleet.close()
    return results


def report(args: argparse.Namespace, results: dict[str, dict[str, dict[str, Any]]]) -> None:
    print()
    print(
        f"broker with {args.topics} topics, {args.clients} clients x {args.held} held topics, "
        f"observed {args.observe:.0f} s after each event, step {args.step} s"
    )
    print(
        "| event | mode | bytes to clients | NOTIFY bytes | requests | peak req/s "
        "| last client holds it |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for event in ("stop", "start"):
        for mode in MODES:
            r = results[mode][event]
            last = (
                f"{r['last_client_s']:.1f} s"
                if r["last_client_s"] is not None
                else f"not within {args.observe:.0f} s ({r['stale_left']} stale)"
            )
            print(
                f"| {event} | {mode} | {r['bytes']:,} | {r['notify_bytes']:,} | "
                f"{r['requests']:,} | {r['peak_rps']:,} | {last} |"
            )
    for event in ("stop", "start"):
        b = results["before"][event]
        for mode in MODES[1:]:
            a = results[mode][event]
            ratio = (a["bytes"] / b["bytes"]) if b["bytes"] else float("nan")
            peak = (a["peak_rps"] / b["peak_rps"]) if b["peak_rps"] else float("nan")
            print(f"{event}: {mode}/before bytes {ratio:.2f}, peak req/s {peak:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--held", type=int, default=100)
    parser.add_argument("--observe", type=float, default=130.0)
    parser.add_argument("--step", type=float, default=0.25)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    outcome: dict[str, Any] = {}

    async def main_async() -> None:
        outcome["results"] = await run(args)

    d = defer.ensureDeferred(main_async())
    d.addErrback(lambda f: (f.printTraceback(), outcome.setdefault("failed", True)))
    d.addBoth(lambda _: reactor.callLater(0, reactor.stop))  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]
    if "results" in outcome:
        report(args, outcome["results"])


if __name__ == "__main__":
    main()
