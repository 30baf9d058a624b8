"""Route-change propagation to N real route clients: inline routes, push, the 30 s poll.

For each mode (``inline``: the name server pushes with the new route inside the
notification, clients install it with no request; ``push``: the notification names the
change and every client refetches it; ``poll``: push off on the server, clients poll every
30 s as upstream clients do), in one run:

1. the name server runs as its own process (tick 1 s, pressure monitor off so a busy bench
   machine does not degrade it); broker ``broker-t`` holds topic ``T``, ``broker-a`` holds
   100 background topics;
2. N ``client_push.RouteClient`` instances, spread over worker processes, each hold ``T`` and
   the 100 background topics; a worker starts its clients at random offsets over
   ``--stagger`` seconds, at most ``--startup-concurrency`` at a time;
3. propagation: T's write perm is flipped; the time until each client holds the new route is
   read from the clients' telemetry records (``fetched_at_ms``), p50/p99 over all clients,
   from the change and from the notification's ``emitted_at_ms`` (no tick phase); the
   name server's own count of GET_ROUTEINFO_BY_TOPIC (GET_PUSH_STATUS counters) is read 5 s
   before and 5 s after the change, so the requests the change caused stand beside the
   background (the clients' safety-net polls of their 101 topics), and beside the clients'
   own records of their fetches of T in those windows, by reason;
4. request rate: over a window (default 120 s, one safety-net poll period with push) with one
   background-topic change every 10 s, the GET_ROUTEINFO requests the clients sent, per second.

Printed at the end: both propagation distributions, both request rates, their ratio, and the
ratio at the same freshness (polling often enough to match push's p99 costs requests in
inverse proportion to its interval).

    python bench/propagation.py [--clients 1000] [--workers 4] [--window 120]
                                [--modes inline,push,poll] [--stagger 30]
                                [--startup-concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE), str(ROOT / "tests")]

from local_processes import free_port, percentile, roundtrip, start_namesrv  # noqa: E402
from support.fake_broker import register_request, topic_configs  # noqa: E402

from protocol.codes import RequestCode  # noqa: E402
from protocol.frame import RemotingCommand  # noqa: E402
from protocol.route_model import DataVersion, TopicConfig  # noqa: E402

TOPIC = "T"
BACKGROUND = [f"B{i:03d}" for i in range(100)]
POLL_MS = 30_000
AFTER_S = 5.0
"""The window after (and before) a change over which the server's GET_ROUTEINFO are counted."""
MODES = ("inline", "push", "poll")


# -- worker role (its own process) ---------------------------------------------------------


def worker(port: int, clients: int, mode: str, stagger_s: float, concurrency: int) -> None:
    from twisted.internet import defer, reactor, stdio, task
    from twisted.protocols.basic import LineReceiver

    from client_push.config import ClientConfig
    from client_push.errors import RouteClientError
    from client_push.routes.client import RouteClient
    from client_push.routes.telemetry import RefetchRecord

    logging.basicConfig(level=logging.ERROR)
    push = mode != "poll"

    class Sink:
        def __init__(self) -> None:
            self.count = 0
            self.topic_records: list[tuple[int, int, str, int | None]] = []

        def record(self, rec: RefetchRecord) -> None:
            self.count += 1
            if rec.topic == TOPIC:
                self.topic_records.append(
                    (rec.version, rec.fetched_at_ms, rec.cause, rec.notified_at_ms)
                )

        def close(self) -> None:
            pass

    sinks = [Sink() for _ in range(clients)]
    route_clients = [
        RouteClient(
            ClientConfig(
                namesrv_addrs=(f"127.0.0.1:{port}",),
                poll_interval_ms=POLL_MS,
                topic_idle_expiry_ms=3_600_000,
                client_id=f"bench-{os.getpid()}-{i}",
                inline_routes=mode == "inline",
            ),
            reactor,
            random.Random(os.getpid() * 10_000 + i),
            telemetry=sinks[i],
        )
        for i in range(clients)
    ]

    class Commands(LineReceiver):
        delimiter = b"\n"

        def lineReceived(self, line: bytes) -> None:
            word = line.decode().strip()
            if word == "COUNT":
                self.say(f"COUNT {sum(s.count for s in sinks)}")
            elif word == "REPORT":
                self.say(json.dumps([s.topic_records for s in sinks]))
            elif word == "EXIT":
                reactor.stop()

        def say(self, text: str) -> None:
            self.transport.write(text.encode() + b"\n")

    rng = random.Random(os.getpid())

    @defer.inlineCallbacks
    def held(c: RouteClient, topic: str) -> defer.Generator[defer.Deferred[object], object, None]:
        # A start-up burst on a loaded machine may time a first lookup out: ask again.
        while True:
            try:
                yield defer.ensureDeferred(c.get_route(topic))
                return
            except RouteClientError:
                yield task.deferLater(reactor, 1.0, lambda: None)

    @defer.inlineCallbacks
    def start_one(c: RouteClient) -> defer.Generator[defer.Deferred[object], object, None]:
        c.start()
        yield defer.gatherResults([held(c, t) for t in (TOPIC, *BACKGROUND)])
        while push and not c.push_active:
            yield task.deferLater(reactor, 0.1, lambda: None)

    # At most this many clients of this process are between start and push active at once:
    # a client's start-up is 101 lookups and a SUBSCRIBE, and a worker sharing the cores with
    # its siblings falls seconds behind when hundreds start together, so its requests time
    # out (3 s), a timed-out SUBSCRIBE leaves the client polling its 101 topics every 30 s,
    # and the load grows instead of draining. Paced by completion, start-up takes what the
    # machine needs and no request times out.
    starting = defer.DeferredSemaphore(concurrency)

    @defer.inlineCallbacks
    def warm_up() -> defer.Generator[defer.Deferred[object], object, None]:
        # Clients of a fleet start at different moments, so their polls are spread over the
        # interval rather than all firing together: each starts at a random offset.
        yield defer.gatherResults(
            [
                task.deferLater(reactor, rng.uniform(0, stagger_s), starting.run, start_one, c)
                for c in route_clients
            ]
        )
        commands.say("READY")

    started_at = time.monotonic()

    def progress() -> None:
        # Start-up on stderr (stdout is the driver's channel): what is up, what timed out.
        totals: dict[str, int] = {}
        for c in route_clients:
            for key in ("requests_timed_out", "subscribe_failed", "subscribe_refused"):
                totals[key] = totals.get(key, 0) + c.counters[key]
        print(
            f"worker {os.getpid()} {time.monotonic() - started_at:5.0f} s: "
            f"{sum(c.connected for c in route_clients)} connected, "
            f"{sum(c.push_active for c in route_clients)} push active of {clients}; {totals}",
            file=sys.stderr,
            flush=True,
        )

    task.LoopingCall(progress).start(10.0, now=False)
    commands = Commands()
    stdio.StandardIO(commands)
    reactor.callWhenRunning(warm_up)
    reactor.run()


# -- driver ------------------------------------------------------------------------------------


class Workers:
    def __init__(self, port: int, mode: str, args: argparse.Namespace) -> None:
        clients, workers = args.clients, args.workers
        share = [clients // workers + (1 if i < clients % workers else 0) for i in range(workers)]
        role = ["--role", "worker", "--port", str(port), "--mode", mode]
        role += ["--stagger", str(args.stagger)]
        role += ["--startup-concurrency", str(args.startup_concurrency)]
        self.procs = [
            subprocess.Popen(
                [sys.executable, __file__, *role, "--clients", str(n)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
            )
            for n in share
        ]
        for proc in self.procs:
            self._expect(proc, "READY")

    @staticmethod
    def _expect(proc: subprocess.Popen, word: str) -> str:
        line = proc.stdout.readline().strip()  # type: ignore[union-attr]
        if not line.startswith(word):
            raise RuntimeError(f"worker said {line!r}, expected {word}")
        return line

    def ask(self, word: str) -> list[str]:
        for proc in self.procs:
            proc.stdin.write(word + "\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        return [proc.stdout.readline().strip() for proc in self.procs]  # type: ignore[union-attr]

    def requests(self) -> int:
        return sum(int(line.split()[1]) for line in self.ask("COUNT"))

    def topic_records(self) -> list[list[tuple[int, int, str, int | None]]]:
        out: list[list[tuple[int, int, str, int | None]]] = []
        for line in self.ask("REPORT"):
            out.extend(json.loads(line))
        return out

    def close(self) -> None:
        for proc in self.procs:
            try:
                proc.stdin.write("EXIT\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
            except OSError:
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def call(sock: socket.socket, cmd: RemotingCommand) -> RemotingCommand:
    resp, _ = roundtrip(sock, cmd)
    if resp.code != 0:
        raise RuntimeError(f"request {cmd.code} refused: {resp.code} {resp.remark}")
    return resp


def server_gets(sock: socket.socket) -> int:
    """GET_ROUTEINFO_BY_TOPIC requests the name server answered so far (its own count)."""
    status = json.loads(call(sock, RemotingCommand.request(RequestCode.GET_PUSH_STATUS)).body)
    return int(status["counters"].get("handled.GET_ROUTEINFO_BY_TOPIC", 0))


def background_register(queues: dict[str, int], counter: int) -> RemotingCommand:
    configs = {
        t: TopicConfig(topic_name=t, read_queue_nums=q, write_queue_nums=q)
        for t, q in queues.items()
    }
    return register_request(
        configs,
        broker_name="broker-a",
        broker_addr="10.0.0.1:10911",
        data_version=DataVersion(0, counter, counter),
    )


def run_mode(mode: str, args: argparse.Namespace, workdir: str) -> dict[str, object]:
    push = mode != "poll"
    port = free_port()
    config = Path(workdir) / f"propagation-{mode}.toml"
    config.write_text(
        # Every client connects from 127.0.0.1: lift the per-host bounds over the fleet.
        "[server]\nmax_connections_per_host = 10000\n"
        f"[push]\nenabled = {'true' if push else 'false'}\ntick_interval_ms = {args.tick_ms}\n"
        "max_subscriptions_per_host = 1000000\n"
        "[pressure]\nenabled = false\n"
    )
    server = start_namesrv(port, config)
    workers: Workers | None = None
    try:
        broker = socket.create_connection(("127.0.0.1", port))
        call(broker, register_request(topic_configs(TOPIC), broker_name="broker-t",
                                      broker_addr="10.0.0.2:10911"))  # fmt: skip
        queues = dict.fromkeys(BACKGROUND, 8)
        call(broker, background_register(queues, 1))
        started = time.monotonic()
        workers = Workers(port, mode, args)
        print(f"[{mode}] {args.clients} clients ready in "
              f"{time.monotonic() - started:.1f} s", flush=True)  # fmt: skip

        # Propagation of T's change to every client.
        wait = max(args.tick_ms / 1000 + 3, AFTER_S) if push else POLL_MS / 1000 + 5
        latencies: list[float] = []
        from_notify: list[float] = []
        causes: dict[str, int] = {}
        fetch_causes: dict[str, int] = {}
        gets_before: list[int] = []
        gets_after: list[int] = []
        rounds = args.rounds if push else 1
        for r in range(rounds):
            before = {i: max(v for v, _, _, _ in recs) for i, recs in
                      enumerate(workers.topic_records())}  # fmt: skip
            time.sleep(random.uniform(0, args.tick_ms / 1000))
            code = (
                RequestCode.WIPE_WRITE_PERM_OF_BROKER
                if r % 2 == 0
                else RequestCode.ADD_WRITE_PERM_OF_BROKER
            )
            if push:
                first_gets = server_gets(broker)
                time.sleep(AFTER_S)
                change_gets = server_gets(broker)
                gets_before.append(change_gets - first_gets)
            t0 = time.time() * 1000
            call(broker, RemotingCommand.request(code, {"brokerName": "broker-t"}))
            if push:
                time.sleep(AFTER_S)
                gets_after.append(server_gets(broker) - change_gets)
                time.sleep(max(0.0, wait - AFTER_S))
            else:
                time.sleep(wait)
            records = workers.topic_records()
            for i, recs in enumerate(records):
                newer = [(at, cause, n) for v, at, cause, n in recs if v > before[i] and at >= t0]
                # Every record but an inline install is a GET_ROUTEINFO answered: T's share of
                # the server's count in the 5 s after the change, by the client's reason.
                for _, at, cause, _ in recs:
                    if t0 <= at < t0 + AFTER_S * 1000 and cause != "inline":
                        fetch_causes[cause] = fetch_causes.get(cause, 0) + 1
                if newer:
                    at, cause, notified = min(newer, key=lambda rec: rec[0])
                    latencies.append(at - t0)
                    causes[cause] = causes.get(cause, 0) + 1
                    if notified is not None:
                        # Without the tick's phase: what a refetch adds to a notification.
                        from_notify.append(at - notified)
                else:
                    latencies.append(float("inf"))
        missing = sum(1 for x in latencies if x == float("inf"))

        # Request rate over the window, with a background change every 10 s.
        heartbeat = RemotingCommand.request(
            RequestCode.BROKER_HEARTBEAT,
            {"clusterName": "DefaultCluster", "brokerAddr": "10.0.0.2:10911"},
        )
        call(broker, heartbeat)
        first = workers.requests()
        window_start = time.monotonic()
        counter = 2
        rng = random.Random(3)
        while time.monotonic() - window_start < args.window:
            time.sleep(min(10.0, args.window - (time.monotonic() - window_start)))
            topic = rng.choice(BACKGROUND)
            queues[topic] = 4 if queues[topic] == 8 else 8
            counter += 1
            call(broker, background_register(queues, counter))
            call(broker, heartbeat)  # broker-t stays alive as a real broker would
        elapsed = time.monotonic() - window_start
        rate = (workers.requests() - first) / elapsed
        broker.close()
        return {
            "latencies": latencies,
            "missing": missing,
            "rate": rate,
            "causes": causes,
            "from_notify": from_notify,
            "fetch_causes": fetch_causes,
            "gets_before": gets_before,
            "gets_after": gets_after,
        }
    finally:
        if workers is not None:
            workers.close()
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", default="driver", choices=["driver", "worker"])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--window", type=float, default=120.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tick-ms", type=int, default=1000)
    parser.add_argument(
        "--stagger", type=float, default=POLL_MS / 1000, help="client start spread, seconds"
    )
    parser.add_argument(
        "--startup-concurrency",
        type=int,
        default=8,
        help="clients of one worker starting at once (lookups and SUBSCRIBE in flight)",
    )
    parser.add_argument("--port", type=int)
    parser.add_argument("--mode", choices=MODES, default="push")
    parser.add_argument("--modes", default=",".join(MODES), help="modes to run, in order (driver)")
    args = parser.parse_args()
    if args.role == "worker":
        worker(args.port, args.clients, args.mode, args.stagger, args.startup_concurrency)
        return
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {', '.join(MODES)}")

    with tempfile.TemporaryDirectory() as workdir:
        results = {mode: run_mode(mode, args, workdir) for mode in modes}
    for mode, res in results.items():
        lat = [x for x in res["latencies"] if x != float("inf")]  # type: ignore[union-attr]
        print(
            f"{mode}: change -> client holds new route p50 {percentile(lat, 0.5):8.0f} ms "
            f"p99 {percentile(lat, 0.99):8.0f} ms max {max(lat):8.0f} ms "
            f"({len(lat)} samples, {res['missing']} clients never saw it; learned by "
            f"{res['causes']}); GET_ROUTEINFO rate {res['rate']:8.0f} req/s "
            f"({args.clients} clients x {len(BACKGROUND) + 1} topics)"
        )
        notify = res["from_notify"]
        if notify:
            print(
                f"{mode}: notification emitted -> client holds new route p50 "
                f"{percentile(notify, 0.5):6.0f} ms p99 {percentile(notify, 0.99):6.0f} ms "
                f"({len(notify)} clients learned by a notification)"
            )
        if res["gets_after"]:
            print(
                f"{mode}: server GET_ROUTEINFO in the {AFTER_S:.0f} s after a change "
                f"{res['gets_after']} (5 s before it: {res['gets_before']}); the clients' "
                f"fetches of {TOPIC} in those windows, by reason: {res['fetch_causes']}"
            )
    if "push" not in results or "poll" not in results:
        return
    push_lat = [x for x in results["push"]["latencies"] if x != float("inf")]  # type: ignore[union-attr]
    push_rate, poll_rate = results["push"]["rate"], results["poll"]["rate"]
    p99 = max(percentile(push_lat, 0.99), 1.0)
    same_freshness = poll_rate * POLL_MS / p99  # type: ignore[operator]
    print(
        f"push p99 target <= {args.tick_ms + 500} ms: {p99:.0f} ms | requests: poll/push "
        f"{poll_rate / push_rate:.1f}x at 30 s poll; polling every {p99:.0f} ms to match push's "
        f"p99 would need {same_freshness:,.0f} req/s = {same_freshness / push_rate:,.0f}x push"
    )  # type: ignore[operator]


if __name__ == "__main__":
    main()
