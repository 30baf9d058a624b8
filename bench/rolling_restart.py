"""Rolling restarts under load, with GoAway and without.

Part ``brokers``: one name server, three broker stand-ins (``namesrv_sandbox/standin.py``),
a producer sending ``--messages`` at about ``--rate`` per second while the brokers restart one
after the other (shut down with ``--grace-ms``, down for ``--down-ms``, back on the same port,
``--settle-ms`` before the next). With GoAway the stand-in announces its shutdown (7004) and the
producer honours it; without, the stand-in unregisters and closes after the grace, like an
upstream broker, and the producer ignores GoAway.

Part ``namesrv``: two name servers, three stand-ins registered with both (every
``--register-s``), ``--clients`` route clients looking a route up in a loop (the held route,
and the GET_ROUTEINFO request a cache miss sends, on the client's connection), while the name
servers restart one after the other (GoAway with the other as the alternative, or an abrupt
close without). At the end every client must be connected and
subscribed to a live name server, and a route change (broker-c's write perm wiped) must reach
all of them.

    python bench/rolling_restart.py [--part brokers|namesrv|both] [--go-away on|off|both]
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import socket
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from twisted.internet import defer, task  # noqa: E402

from client_push.config import ClientConfig  # noqa: E402
from client_push.producer.config import ProducerConfig  # noqa: E402
from client_push.producer.producer import Producer  # noqa: E402
from client_push.routes.client import RouteClient  # noqa: E402
from client_push.runtime.twisted_loop import TwistedRuntime  # noqa: E402
from client_push.wire.remoting import ConnectionBounds, RemotingConnection  # noqa: E402
from namesrv.config import from_mapping  # noqa: E402
from namesrv.server import NameServer  # noqa: E402
from namesrv_sandbox.standin import BrokerStandIn  # noqa: E402
from protocol.codes import RequestCode, ResponseCode  # noqa: E402
from protocol.frame import RemotingCommand  # noqa: E402

NAMES = ("broker-a", "broker-b", "broker-c")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sleep(reactor: Any, ms: float) -> defer.Deferred[None]:
    return task.deferLater(reactor, ms / 1000.0, lambda: None)


def start_namesrv(reactor: Any, port: int, alternatives: list[str], grace_ms: int) -> NameServer:
    server = NameServer(
        from_mapping(
            {
                "server": {
                    "listen": f"127.0.0.1:{port}",
                    "shutdown_grace_ms": grace_ms,
                    "go_away_alternatives": alternatives,
                },
                "pressure": {"enabled": False},
            }
        ),
        reactor,
        epoch=secrets.token_hex(4),
    )
    server.listen()
    return server


def kill_namesrv(server: NameServer) -> defer.Deferred[None]:
    """An abrupt stop (no GoAway): the port closes and every connection is cut."""
    for conn in list(server.connections.values()):
        conn.transport.abortConnection()  # type: ignore[union-attr]
    for loop in server._loops:
        if loop.running:
            loop.stop()
    port = server._port
    return defer.maybeDeferred(port.stopListening) if port else defer.succeed(None)


# -- brokers ------------------------------------------------------------------------------------


async def brokers_part(reactor: Any, args: argparse.Namespace, go_away: bool) -> dict[str, Any]:
    ns_port = free_port()
    ns = start_namesrv(reactor, ns_port, [], 0)
    addr = f"127.0.0.1:{ns_port}"
    brokers = {n: BrokerStandIn(n, {"T": 4}, [addr], reactor=reactor) for n in NAMES}
    for b in brokers.values():
        await b.start()
    client = RouteClient(ClientConfig(namesrv_addrs=(addr,)), reactor)
    client.start()
    config = ProducerConfig(honour_go_away=go_away, retries=args.retries)
    producer = Producer(client, "bench", config, reactor=reactor)
    producer.start()
    state = {"next": 0, "failed": 0, "ok": 0}
    errors: Counter[str] = Counter()
    per_worker_s = args.concurrency / args.rate
    done_restarting = defer.Deferred()

    async def worker() -> None:
        while state["next"] < args.messages:
            state["next"] += 1
            t0 = time.monotonic()
            try:
                await producer.send("T", b"rolling-%d" % state["next"])
                state["ok"] += 1
            except Exception as exc:
                state["failed"] += 1
                errors[f"{type(exc).__name__}: {str(exc)[-80:]}"] += 1
            wait = per_worker_s - (time.monotonic() - t0)
            if wait > 0:
                await sleep(reactor, wait * 1000)

    async def restart_all() -> None:
        await sleep(reactor, args.settle_ms)
        for name in NAMES:
            old = brokers[name]
            await old.shutdown(args.grace_ms, go_away=go_away)
            await sleep(reactor, args.down_ms)
            new = BrokerStandIn(name, {"T": 4}, [addr], reactor=reactor, port=old.port)
            await new.start()
            brokers[name] = new
            await sleep(reactor, args.settle_ms)
        done_restarting.callback(None)

    started = time.monotonic()
    restarting = defer.ensureDeferred(restart_all())
    await defer.gatherResults(
        [defer.ensureDeferred(worker()) for _ in range(args.concurrency)], consumeErrors=True
    )
    elapsed = time.monotonic() - started
    restarted_in_time = done_restarting.called
    await restarting
    stats = producer.stats()
    producer.stop()
    await client.stop()
    received_after = {n: b.received for n, b in brokers.items()}
    for b in brokers.values():
        await b.kill()
    await ns.stop(grace_ms=0)
    conn_stats = stats["connections"]
    return {
        "part": "brokers",
        "go_away": go_away,
        "retries_allowed": args.retries,
        "messages": args.messages,
        "sent_ok": state["ok"],
        "failed": state["failed"],
        "errors": dict(errors),
        "retries": stats.get("retries", 0),
        "failed_attempts": stats.get("attempts_unreachable", 0) + stats.get("answers_go_away", 0),
        "go_away_received": stats.get("go_away_received", 0),
        "connect_failures": conn_stats.get("connect_failures", 0),
        "received_by_restarted_brokers": received_after,
        "all_restarted_while_sending": restarted_in_time,
        "elapsed_s": round(elapsed, 1),
    }


# -- name servers --------------------------------------------------------------------------------


async def admin(reactor: Any, addr: str, cmd: RemotingCommand) -> RemotingCommand:
    proto = RemotingConnection(TwistedRuntime(reactor), ConnectionBounds(), label=addr)
    await proto.open(addr, 3_000)
    try:
        return await proto.request(cmd, 3_000)
    finally:
        proto.close()


async def namesrv_part(reactor: Any, args: argparse.Namespace, go_away: bool) -> dict[str, Any]:
    ports = [free_port(), free_port()]
    addrs = [f"127.0.0.1:{p}" for p in ports]
    servers = [start_namesrv(reactor, ports[i], [addrs[1 - i]], args.ns_grace_ms) for i in range(2)]
    brokers = [
        BrokerStandIn(n, {"T": 4}, addrs, reactor=reactor, register_interval_s=args.register_s)
        for n in NAMES
    ]
    for b in brokers:
        await b.start()
    config = ClientConfig(namesrv_addrs=tuple(addrs))
    clients = [RouteClient(config, reactor, random.Random(i)) for i in range(args.clients)]
    for c in clients:
        c.start()
    state = {"lookups": 0, "failed": 0, "running": True}
    errors: Counter[str] = Counter()

    async def looker(client: RouteClient) -> None:
        # A held route is answered from the cache; each loop also sends the GET_ROUTEINFO a
        # cache miss sends, over the client's own connection (GoAway retry included).
        lookup = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T", "acceptStandardJsonOnly": "true"}
        )
        while state["running"]:
            try:
                await client.get_route("T")
                answer = await client._link.request(lookup)
                if answer.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"code {answer.code}: {answer.remark}")
                state["lookups"] += 1
            except Exception as exc:
                state["failed"] += 1
                errors[f"{type(exc).__name__}: {str(exc)[:60]}"] += 1
            await sleep(reactor, args.lookup_ms)

    loops = [defer.ensureDeferred(looker(c)) for c in clients]
    await sleep(reactor, 2_000)
    fetch_failed_before = sum(c.counters["fetch_failed"] for c in clients)
    for i in range(2):
        if go_away:
            await servers[i].stop()
        else:
            await kill_namesrv(servers[i])
        await sleep(reactor, args.down_ms)
        servers[i] = start_namesrv(reactor, ports[i], [addrs[1 - i]], args.ns_grace_ms)
        # the restarted server is empty until the brokers register again
        await sleep(reactor, args.register_s * 1000 + 1_000)
    await sleep(reactor, 3_000)
    state["running"] = False
    await defer.gatherResults(loops, consumeErrors=True)
    fetch_failed = sum(c.counters["fetch_failed"] for c in clients) - fetch_failed_before
    live = set(addrs)
    settled = sum(1 for c in clients if c.connected and c.push_active and c.namesrv in live)
    on = Counter(c.namesrv for c in clients)

    # a route change afterwards must reach every client
    for addr in addrs:
        cmd = RemotingCommand.request(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-c"}
        )
        answer = await admin(reactor, addr, cmd)
        assert answer.code == ResponseCode.SUCCESS, answer.remark

    def reached() -> int:
        count = 0
        for c in clients:
            entry = c.cached_route("T")
            if entry is not None and all(
                q.broker_name != "broker-c" for q in entry.publish_info.message_queues
            ):
                count += 1
        return count

    t0 = time.monotonic()
    while reached() < len(clients) and time.monotonic() - t0 < 10:
        await sleep(reactor, 50)
    change_s = time.monotonic() - t0
    got = reached()
    notified = sum(c.counters["fetch.notify"] for c in clients)
    for c in clients:
        await c.stop()
    for b in brokers:
        await b.kill()
    for s in servers:
        await s.stop(grace_ms=0)
    return {
        "part": "namesrv",
        "go_away": go_away,
        "clients": args.clients,
        "lookups": state["lookups"],
        "failed_lookups": state["failed"],
        "lookup_errors": dict(errors),
        "failed_background_fetches": fetch_failed,
        "clients_subscribed_to_a_live_namesrv": settled,
        "clients_by_namesrv": dict(on),
        "route_change_reached": got,
        "route_change_by_push": notified,
        "route_change_s": round(change_s, 2),
    }


async def main(reactor: Any, args: argparse.Namespace) -> None:
    parts = ["brokers", "namesrv"] if args.part == "both" else [args.part]
    modes = [True, False] if args.go_away == "both" else [args.go_away == "on"]
    for part in parts:
        for go_away in modes:
            run = brokers_part if part == "brokers" else namesrv_part
            print(json.dumps(await run(reactor, args, go_away)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("brokers", "namesrv", "both"), default="both")
    parser.add_argument("--go-away", choices=("on", "off", "both"), default="both")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=800.0, help="sends per second")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--retries", type=int, default=2, help="producer retries (upstream 2)")
    parser.add_argument("--grace-ms", type=int, default=1_000)
    parser.add_argument("--down-ms", type=int, default=1_000)
    parser.add_argument("--settle-ms", type=int, default=1_000)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--lookup-ms", type=int, default=100)
    parser.add_argument("--register-s", type=float, default=2.0)
    parser.add_argument("--ns-grace-ms", type=int, default=2_000)
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, parser.parse_args())))
