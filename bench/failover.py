"""A master's failover under real Apache RocketMQ, routed by this name server: what each
producer sees.

Apache RocketMQ in controller mode, every process on loopback: a standalone controller
(``org.apache.rocketmq.controller.ControllerStartup``) and two brokers of one broker name with
``enableControllerMode=true`` (upstream's quick-start settings: ``brokerId=-1``,
``brokerRole=SLAVE``, the controller elects the master), registered with this name server
(``python -m namesrv``). Jars come from Maven Central into a cache outside the repository
(``python tools/rocketmq_jars.py``; ``--cache``, default ``~/.cache/rocketmq-routepush``; the
directory ``VERSION/lib`` must hold rocketmq-controller, -broker, -tools, -client and their
dependencies).

Two producers send to one topic of that broker name, side by side in the same run, each
starting a send every ``--interval-ms`` (10) without waiting for the previous one:

* ``client_push``'s producer (Twisted, route push on), in a child process of this script;
* upstream's Java producer (``bench/FailoverProducer.java``, compiled into the cache on first
  use) with its defaults: it learns routes only by its 30 s name-server poll;
* with ``--java-agent JAR``, the same Java producer again, unmodified, run with the route-push
  agent (``bridges/java-agent``) as ``-javaagent``.

Each round ``kill -9``'s the master at a chosen phase of the Java client's poll (``--phases``,
seconds after a poll; the poll runs every 30 s from the client's start), waits until both
producers sent again (or ``--round-timeout-s``), restarts the killed broker (it rejoins as
slave), and waits until the controller has it back in the sync state set. Per round it
reports: when this name server's route showed the new master (polled every 20 ms), when each
producer's first send after the kill succeeded, and how many sends of each failed.

    python bench/failover.py --rounds 4 [--baseline-tree DIR]

``--baseline-tree DIR`` also runs the producer of another checkout (e.g. of main) as a third
sender in the same cluster and the same rounds, for a same-run before/after.

Never part of the test suite: it needs Java, minutes, and a quiet machine (say when it was not).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if "--producer-child" not in sys.argv:
    # A producer child imports the checkout its PYTHONPATH names (this one or a baseline).
    sys.path[:0] = [str(ROOT), str(HERE)]

from apache_procs import (  # noqa: E402
    Broker,
    Java,
    SendLog,
    jar_lib,
    java_producer,
    new_broker,
    now_ms,
    stop_processes,
    tree_commit,
    wait_log,
    write_props,
)
from local_processes import free_port, roundtrip, start_namesrv, wait_port  # noqa: E402

from protocol import bodies  # noqa: E402
from protocol.codes import RequestCode  # noqa: E402
from protocol.frame import RemotingCommand  # noqa: E402

TOPIC = "FailoverBench"
CLUSTER = "FailoverCluster"
BROKER_NAME = "broker-fo"
POLL_S = 30.0
"""Upstream's ``pollNameServerInterval``: the Java client's route poll."""


# -- observers -------------------------------------------------------------------------------------


@dataclass
class RouteState:
    at_ms: float
    master: str | None
    slaves: tuple[str, ...]


class RouteWatcher(threading.Thread):
    """Polls this name server for the topic's route every 20 ms; keeps every change of the
    broker group's master and slaves, with its time."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.changes: list[RouteState] = []
        self.stopping = threading.Event()

    @property
    def current(self) -> RouteState | None:
        return self.changes[-1] if self.changes else None

    def run(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port))
        opaque = 0
        while not self.stopping.is_set():
            opaque += 1
            req = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}, opaque=opaque
            )
            resp, _raw = roundtrip(sock, req)
            master, slaves = None, ()
            if resp.code == 0:
                for data in bodies.decode_route(resp.body).broker_datas:
                    if data.broker_name == BROKER_NAME:
                        master = data.broker_addrs.get(0)
                        slaves = tuple(sorted(a for i, a in data.broker_addrs.items() if i != 0))
            state = RouteState(now_ms(), master, slaves)
            last = self.current
            if last is None or (last.master, last.slaves) != (master, slaves):
                self.changes.append(state)
            time.sleep(0.02)

    def wait(self, check: Any, timeout: float) -> RouteState | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.current
            if state is not None and check(state):
                return state
            time.sleep(0.02)
        return None


# -- client_push's producer (the child process) ------------------------------------------------


def producer_child(namesrv: str, interval_ms: int) -> None:
    """Sends every ``interval_ms`` with ``client_push``'s producer; one line per send."""
    from twisted.internet import reactor, task

    from client_push.config import ClientConfig
    from client_push.producer.producer import Producer
    from client_push.routes.client import RouteClient

    client = RouteClient(ClientConfig(namesrv_addrs=(namesrv,)), reactor)
    producer = Producer(client, "failover_bench_py", reactor=reactor)
    client.start()
    producer.start()
    body = b"x" * 128
    seq = 0

    def one() -> None:
        nonlocal seq
        seq += 1
        n, t0 = seq, now_ms()

        def done(result: Any, ok: bool) -> None:
            detail = (
                result.queue.broker_name
                if ok
                else f"{type(result.value).__name__}: " + str(result.value).replace("\n", " ")[:160]
            )
            sys.stdout.write(f"{'OK' if ok else 'FAIL'} {n} {t0:.0f} {now_ms():.0f} {detail}\n")
            sys.stdout.flush()

        d = producer.send(TOPIC, body)
        d.addCallbacks(done, done, callbackArgs=(True,), errbackArgs=(False,))

    print(f"started {now_ms():.0f}", flush=True)
    task.LoopingCall(one).start(interval_ms / 1000.0)
    threading.Thread(
        target=lambda: (sys.stdin.read(), reactor.callFromThread(reactor.stop)),  # type: ignore[attr-defined]
        daemon=True,
    ).start()
    reactor.run()  # type: ignore[attr-defined]


# -- the run ---------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        lib = jar_lib(args.cache, args.version, "controller", "broker", "tools", "client")
        version_dir = lib.parent
        self.run_dir = version_dir / "failover" / time.strftime("%Y%m%d-%H%M%S")
        self.run_dir.mkdir(parents=True)
        self.java = Java(lib, self.run_dir)
        self.commit = args.label or tree_commit(ROOT)
        """Read at the start: the tree's HEAD may move while the bench runs."""
        self.procs: list[subprocess.Popen[Any]] = []
        self.brokers: list[Broker] = []

    def start_cluster(self) -> None:
        self.ns_port = free_port()
        config = None
        if self.args.tick_ms is not None:
            config = self.run_dir / "namesrv.toml"
            config.write_text(f"[push]\ntick_interval_ms = {self.args.tick_ms}\n")
        self.procs.append(start_namesrv(self.ns_port, config))
        namesrv = f"127.0.0.1:{self.ns_port}"
        ctrl_port = free_port()
        self.controller = f"127.0.0.1:{ctrl_port}"
        conf = write_props(
            self.run_dir / "controller.properties",
            {
                "controllerDLegerGroup": "group1",
                "controllerDLegerPeers": f"n0-{self.controller}",
                "controllerDLegerSelfId": "n0",
                "controllerStorePath": self.run_dir / "controller-store",
            },
        )
        log = self.run_dir / "controller.log"
        proc = self.java.start("org.apache.rocketmq.controller.ControllerStartup", conf, log)
        self.procs.append(proc)
        wait_port(ctrl_port, timeout=120)
        taken: set[int] = set()
        for i in range(2):
            props = {
                "brokerClusterName": CLUSTER,
                "brokerName": BROKER_NAME,
                "brokerId": -1,
                "brokerRole": "SLAVE",
                "enableControllerMode": "true",
                "controllerAddr": self.controller,
                "namesrvAddr": namesrv,
            }
            self.brokers.append(new_broker(self.run_dir, i, taken, props))
        for broker in self.brokers:
            self.start_broker(broker)

    def start_broker(self, broker: Broker) -> None:
        broker.proc = self.java.start(
            "org.apache.rocketmq.broker.BrokerStartup", broker.conf, broker.log
        )
        wait_log(broker.log, "boot success", broker.proc, timeout=180)

    def in_sync(self, members: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.java.mqadmin("getSyncStateSet", "-a", self.controller, "-b", BROKER_NAME)
            if f"#SyncStateSetNums\t{members}" in out:
                return True
            time.sleep(1.0)
        return False

    def create_topic(self) -> None:
        admin = [sys.executable, "-m", "namesrv.admin", "-n", f"127.0.0.1:{self.ns_port}"]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        for broker in self.brokers:  # the slave too, so the new master has it at once
            subprocess.run(
                [*admin, "update-topic", "-b", broker.addr, "-t", TOPIC, "-r", "4", "-w", "4"],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip

    def start_producers(self) -> list[SendLog]:
        """client_push's producer of this tree (and of ``--baseline-tree``), then Java's."""
        namesrv = f"127.0.0.1:{self.ns_port}"
        interval = str(self.args.interval_ms)
        trees = [("client_push", ROOT)]
        if self.args.baseline_tree:
            trees.append(("client_push_baseline", Path(self.args.baseline_tree).resolve()))
        logs = []
        for name, tree in trees:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--producer-child", namesrv, "--interval-ms", interval],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=(self.run_dir / f"{name}.log").open("w"), text=True,
                env=dict(os.environ, PYTHONPATH=str(tree)),
            )  # fmt: skip
            self.procs.append(proc)
            logs.append(SendLog(name, proc))
        javas = []
        if self.args.java_agent:
            javas.append(("java+agent", [f"-javaagent:{Path(self.args.java_agent).resolve()}"]))
        javas.append(("java", []))
        for name, agent in javas:
            log = java_producer(
                self.java.lib, name, namesrv, TOPIC, self.args.interval_ms, self.run_dir, *agent
            )
            self.procs.append(log.proc)
            logs.append(log)
        return logs

    def stop(self) -> None:
        """Stops every process; the brokers' stores are removed (their logs are kept)."""
        stop_processes([*self.procs, *(b.proc for b in self.brokers if b.proc)])
        for i in range(len(self.brokers)):
            shutil.rmtree(self.run_dir / f"broker{i}", ignore_errors=True)

    def run(self) -> dict[str, Any]:
        self.start_cluster()
        watcher = RouteWatcher(self.ns_port)
        self.create_topic()
        watcher.start()
        if watcher.wait(lambda s: s.master and s.slaves, timeout=120) is None:
            raise SystemExit(f"no master and slave in the route of {TOPIC}: {watcher.changes}")
        if not self.in_sync(2, timeout=120):
            raise SystemExit("the slave never joined the sync state set")
        producers = self.start_producers()
        java = producers[-1]
        deadline = time.monotonic() + 60
        while not (all(p.first_ok_after(0) for p in producers) and java.started_ms):
            if time.monotonic() > deadline:
                raise SystemExit("a producer never sent successfully; see its log in the run dir")
            time.sleep(0.1)
        rounds = []
        phases = [float(p) for p in self.args.phases.split(",")][: self.args.rounds]
        round_start = now_ms()
        for number, phase in enumerate(phases, 1):
            rounds.append(self.one_round(number, phase, watcher, producers, round_start))
            round_start = now_ms()
            print(json.dumps(rounds[-1]), flush=True)
        tail = now_ms()
        time.sleep(2.0)
        first_kill = rounds[0]["kill_ms"] if rounds else now_ms()
        for producer in producers:
            producer.stop()
        watcher.stopping.set()
        return {
            "commit": self.commit,
            "tick_ms": self.args.tick_ms,
            "interval_ms": self.args.interval_ms,
            "baseline_commit": self.args.baseline_label
            or (tree_commit(Path(self.args.baseline_tree)) if self.args.baseline_tree else None),
            "producers": [p.name for p in producers],
            "rounds": rounds,
            "failed_before_first_kill": {
                p.name: len(p.failures(0, first_kill - 1000)) for p in producers
            },
            "failed_after_last_round": {p.name: len(p.failures(tail, now_ms())) for p in producers},
            "run_dir": str(self.run_dir),
        }

    def one_round(
        self,
        number: int,
        phase_s: float,
        watcher: RouteWatcher,
        producers: list[SendLog],
        since_ms: float,
    ) -> dict[str, Any]:
        java = producers[-1]
        # The Java client's route poll runs at start + 10 ms + k * 30 s.
        first_poll = java.started_ms + 10
        target = first_poll + phase_s * 1000
        while target < now_ms() + 1000:
            target += POLL_S * 1000
        time.sleep((target - now_ms()) / 1000)
        before = watcher.current
        assert before is not None and before.master
        victim = next(b for b in self.brokers if b.addr == before.master)
        assert victim.proc is not None
        kill_ms = now_ms()
        victim.proc.send_signal(signal.SIGKILL)
        phase = ((kill_ms - first_poll) / 1000) % POLL_S
        new = watcher.wait(lambda s: s.master not in (None, victim.addr), self.args.round_timeout_s)
        deadline = time.monotonic() + self.args.round_timeout_s
        while time.monotonic() < deadline and not all(p.first_ok_after(kill_ms) for p in producers):
            time.sleep(0.05)
        time.sleep(1.0)
        masterless = [s for s in watcher.changes if s.at_ms >= kill_ms and s.master is None]
        victim.proc.wait()
        self.start_broker(victim)
        rejoined = self.in_sync(2, timeout=180)
        end_ms = now_ms()

        def after(t: float | None) -> float | None:
            return None if t is None else round((t - kill_ms) / 1000, 3)

        out: dict[str, Any] = {
            "round": number,
            "kill_ms": kill_ms,
            "phase_s": round(phase, 1),
            "killed": victim.addr,
            "new_master": new.master if new else None,
            "route_new_master_s": after(new.at_ms if new else None),
            "route_masterless_states": len(masterless),
            "restarted_in_sync": rejoined,
        }
        for p in producers:
            failed = p.failures(since_ms, end_ms)
            at = sorted(round((f.end_ms - kill_ms) / 1000, 2) for f in failed)
            out[p.name] = {
                "sends_again_s": after(p.first_ok_after(kill_ms)),
                "failed": len(failed),
                # When the failed sends ended, in seconds after the kill: where the losses lie.
                "failed_at_s": at if len(at) <= 12 else [*at[:6], "...", *at[-6:]],
                "errors": sorted({f.detail[:70] for f in failed})[:3],
            }
        return out


def table(result: dict[str, Any]) -> str:
    names = result["producers"]
    head = "| round | kill phase in Java's 30 s poll | new master in route |"
    head += "".join(f" {n} sends again | {n} failed |" for n in names)
    lines = [head, "|" + " ---: |" * (3 + 2 * len(names))]

    def s(v: float | None) -> str:
        return "never" if v is None else f"{v:.2f} s"

    rounds = result["rounds"]
    for r in rounds:
        row = f"| {r['round']} | {r['phase_s']:.1f} s | {s(r['route_new_master_s'])} |"
        row += "".join(f" {s(r[n]['sends_again_s'])} | {r[n]['failed']} |" for n in names)
        lines.append(row)
    lines.append("")
    for n in names:
        again = [r[n]["sends_again_s"] for r in rounds if r[n]["sends_again_s"] is not None]
        lines.append(
            f"{n}: {sum(r[n]['failed'] for r in rounds)} failed sends in {len(rounds)} rounds; "
            f"sends again after {max(again) if again else '-'} s at worst, "
            f"median {statistics.median(again) if again else '-'} s"
            + ("" if len(again) == len(rounds) else f"; never in {len(rounds) - len(again)}")
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="~/.cache/rocketmq-routepush")
    parser.add_argument("--version", default="5.3.3")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--phases", default="3,11,19,27", help="kill phases, seconds after the Java poll"
    )
    parser.add_argument("--interval-ms", type=int, default=10)
    parser.add_argument(
        "--tick-ms", type=int, help="the name server's push.tick_interval_ms (default: its own)"
    )
    parser.add_argument("--round-timeout-s", type=float, default=45.0)
    parser.add_argument("--json", dest="json_out", help="also write the result here")
    parser.add_argument("--label", help="the commit measured (default: this tree's git HEAD)")
    parser.add_argument(
        "--baseline-tree",
        metavar="DIR",
        help="also run client_push's producer of another checkout, beside this one's",
    )
    parser.add_argument("--baseline-label", help="the commit of --baseline-tree")
    parser.add_argument(
        "--java-agent",
        metavar="JAR",
        help="also run the same Java producer with this route-push agent (-javaagent), "
        "e.g. bridges/java-agent/target/rocketmq-routepush-agent.jar",
    )
    parser.add_argument("--producer-child", metavar="NAMESRV", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.producer_child:
        producer_child(args.producer_child, args.interval_ms)
        return
    bench = Bench(args)
    try:
        result = bench.run()
    finally:
        bench.stop()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    print(f"commit {result['commit']}, baseline {result['baseline_commit']}")
    print(table(result))


if __name__ == "__main__":
    main()
