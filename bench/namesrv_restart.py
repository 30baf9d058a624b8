"""Name-server restarts and a partition from the brokers under real Apache RocketMQ: what each
producer's sends see.

Every process on loopback: this name server (``python -m namesrv``, one or two), two Apache
brokers of different broker names in plain master mode (no controller), registering every
30 s (upstream's default ``registerNameServerPeriod``), and one topic on both (``mqadmin
updateTopic -c``). Jars as for ``bench/failover.py`` (``tools/rocketmq_jars.py``, ``--cache``).
Producers start a send every ``--interval-ms`` (20) without waiting for the previous one:

* ``client_push``: the asyncio ``Producer`` (``client_push.aio``), defaults, in a child process;
* ``java``: Apache's producer with its defaults (``bench/FailoverProducer.java``).

Scenarios (``--scenario``), each on a cluster of its own; a round is a steady phase of at least
``--seconds``, the event, then ``--seconds`` more (at least 40 s, beyond the brokers' 30 s
register period, for the figures to mean anything). The event comes ``--phases`` seconds (per
round, cycled; default 3, 11, 19, 27) after a periodic register of broker-r0: how long a
restarted name server lacks the route depends on it. That schedule is estimated from the
broker's start (first periodic register 10 s after it) until a restart shows it; the phase
each broker's next register proves is reported too.

* ``restart``: one name server, ``kill -9``'d and started again on its port ``--gap-s`` (1 s)
  later;
* ``rolling``: two name servers, in every producer's and broker's address list; the first
  killed and restarted as above, the second likewise ``--rolling-s`` (3 s) after the first
  accepted connections again;
* ``partition``: the brokers reach the name server only through a TCP relay this script runs
  (the producers talk to the name server directly); the relay closes every connection and
  refuses new ones for ``--partition-seconds`` (45), then relays again. The brokers stay up and
  reachable from the producers.

Per scenario, round and producer: sends started in the round, those failed and those never
answered, when the failures ended (seconds after the event: the kill, the first kill, the cut),
and the failures grouped by exception and message (digits as ``#``). Per round also when each
name server's route of the topic named both brokers again.

    python bench/namesrv_restart.py [--scenario restart|rolling|partition|all] [--rounds N]
        [--clients client_push,java] [--hog] [--tree DIR] [--json FILE]

``--tree DIR`` runs the name server and ``client_push`` of another checkout (the Apache side and
this script stay this tree's). ``--hog`` runs a process beside it that keeps every core busy.
Never part of the test suite: it needs Java and minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHILD_FLAGS = ("--producer-child", "--hog-child")
if not any(flag in sys.argv for flag in CHILD_FLAGS):
    # A producer child imports the checkout its PYTHONPATH names (this one or --tree's).
    sys.path[:0] = [str(ROOT), str(HERE)]

TOPIC = "NamesrvRestartBench"
CLUSTER = "RestartCluster"
BROKER_NAMES = ("broker-r0", "broker-r1")
SCENARIOS = ("restart", "rolling", "partition")
CLIENTS = ("client_push", "java")
REGISTER_PERIOD_S = 30.0
"""Upstream brokers' ``registerNameServerPeriod``."""
REGISTER_DELAY_S = 10.0
"""Upstream brokers' first periodic register, after their start."""
SETTLE_S = 5.0
"""After the last round: room for sends in flight to end (3 s timeout) before the producers stop."""


def now_ms() -> float:
    return time.time() * 1000.0


# -- children --------------------------------------------------------------------------------------


def producer_child(namesrv: str, interval_ms: int) -> None:
    """Sends every ``interval_ms`` with ``client_push``'s asyncio producer, one line per send
    (``OK|FAIL SEQ START_MS END_MS DETAIL``), until stdin closes."""
    import asyncio

    from client_push.aio import ClientConfig, Producer, RouteClient

    async def run() -> None:
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        threading.Thread(
            target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stopping.set)),
            daemon=True,
        ).start()
        config = ClientConfig(namesrv_addrs=tuple(namesrv.split(";")))
        body = b"x" * 128
        async with RouteClient(config) as client, Producer(client, "restart_bench_py") as producer:

            async def one(seq: int) -> None:
                t0 = now_ms()
                try:
                    result = await producer.send(TOPIC, body)
                    line = f"OK {seq} {t0:.0f} {now_ms():.0f} {result.queue.broker_name}"
                except Exception as e:  # every failure is what is measured
                    why = str(e).replace("\n", " ")[:160]
                    line = f"FAIL {seq} {t0:.0f} {now_ms():.0f} {type(e).__name__}: {why}"
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

            print(f"started {now_ms():.0f}", flush=True)
            sends: set[asyncio.Task[None]] = set()
            start, seq = loop.time(), 0
            while not stopping.is_set():
                seq += 1
                send = asyncio.create_task(one(seq))
                sends.add(send)
                send.add_done_callback(sends.discard)
                delay = start + seq * interval_ms / 1000 - loop.time()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), max(0.0, delay))
            if sends:
                await asyncio.wait(sends, timeout=SETTLE_S)

    asyncio.run(run())


def hog_child() -> None:
    """One busy process per core, in this process's group (killed together)."""
    for _ in range((os.cpu_count() or 2) - 1):
        if os.fork() == 0:
            break
    while True:
        pass


# -- the TCP relay between the brokers and the name server ---------------------------------------


class Relay:
    """Relays 127.0.0.1:``port`` to ``target``; ``cut()`` closes every relayed connection and
    the listener (new connections are refused) until ``restore()`` listens again."""

    def __init__(self, target: int) -> None:
        from local_processes import free_port

        self.target = target
        self.port = free_port()
        self.lock = threading.Lock()
        self.conns: list[socket.socket] = []
        self.listener: socket.socket | None = None
        self.relayed = 0

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self.lock:
            listener, self.listener = self.listener, None
            conns, self.conns = self.conns, []
        if listener is not None:
            listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _accept(self, listener: socket.socket) -> None:
        while self.listener is listener:
            try:
                down, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", self.target), timeout=2)
            except OSError:
                down.close()
                continue
            up.settimeout(None)
            down.settimeout(None)
            with self.lock:
                if self.listener is not listener:
                    down.close()
                    up.close()
                    return
                self.conns += [down, up]
                self.relayed += 1
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


# -- observers -------------------------------------------------------------------------------------


class RouteProbe(threading.Thread):
    """Asks one name server for the topic's route every 100 ms (reconnecting after a kill);
    keeps each change of the broker names it routes (``None``: no answer), with its time."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.changes: list[tuple[float, frozenset[str] | None]] = []
        self.stopping = threading.Event()

    def brokers(
        self, sock: socket.socket | None, opaque: int
    ) -> tuple[frozenset[str] | None, socket.socket | None]:
        from local_processes import roundtrip

        from protocol import bodies
        from protocol.codes import RequestCode
        from protocol.frame import RemotingCommand

        try:
            if sock is None:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=1)
            req = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}, opaque=opaque
            )
            resp, _raw = roundtrip(sock, req)
        except OSError:
            if sock is not None:
                sock.close()
            return None, None
        if resp.code != 0:
            return frozenset(), sock
        datas = bodies.decode_route(resp.body).broker_datas
        return frozenset(d.broker_name for d in datas), sock

    def run(self) -> None:
        sock: socket.socket | None = None
        opaque = 0
        while not self.stopping.is_set():
            opaque += 1
            names, sock = self.brokers(sock, opaque)
            if not self.changes or self.changes[-1][1] != names:
                self.changes.append((now_ms(), names))
            time.sleep(0.1)
        if sock is not None:
            sock.close()

    @property
    def complete(self) -> bool:
        return bool(self.changes) and self.changes[-1][1] == frozenset(BROKER_NAMES)

    def routes_since(self, t_ms: float, brokers: int) -> float | None:
        """When the route named at least ``brokers`` brokers at or after ``t_ms``."""
        return self.first_since(t_ms, lambda names: len(names) >= brokers)

    def appeared_since(self, t_ms: float, name: str) -> float | None:
        """When the route named broker ``name`` at or after ``t_ms``."""
        return self.first_since(t_ms, lambda names: name in names)

    def short_since(self, t_ms: float) -> float | None:
        """When the route first named fewer brokers (or did not answer) after ``t_ms``."""
        later = [at for at, n in self.changes if at > t_ms and n != frozenset(BROKER_NAMES)]
        return later[0] if later else None

    def first_since(self, t_ms: float, check: Any) -> float | None:
        changes = list(self.changes)
        state = [n for at, n in changes if at <= t_ms][-1:]
        if state and state[0] is not None and check(state[0]):
            return t_ms
        later = [at for at, n in changes if at > t_ms and n is not None and check(n)]
        return later[0] if later else None


def failure_kind(detail: str) -> str:
    return re.sub(r"\d[\d,.]*", "#", detail)[:160]


# -- one scenario ----------------------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    args: argparse.Namespace
    run_dir: Path
    java: Any
    tree: Path
    namesrvs: list[Any] = field(default_factory=list)
    relay: Relay | None = None
    brokers: list[Any] = field(default_factory=list)
    producers: list[Any] = field(default_factory=list)
    probes: list[RouteProbe] = field(default_factory=list)
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    registers: list[float] = field(default_factory=list)
    """Per broker, a time it registered (estimated from its start until a restart shows it)."""

    def start_namesrv(self, ns: Any) -> None:
        from local_processes import start_namesrv

        ns.proc = start_namesrv(ns.port, ns.conf, root=self.tree, log=ns.log)
        self.procs.append(ns.proc)

    def kill_namesrv(self, ns: Any) -> None:
        assert ns.proc is not None
        ns.proc.send_signal(signal.SIGKILL)
        ns.proc.wait()

    def boot(self) -> None:
        from apache_procs import Server, new_broker, wait_log
        from local_processes import free_port

        count = 2 if self.name == "rolling" else 1
        config = Path(self.args.namesrv_config).resolve() if self.args.namesrv_config else None
        for i in range(count):
            ns = Server(free_port(), config, self.run_dir / f"namesrv{i}.log")
            self.start_namesrv(ns)
            self.namesrvs.append(ns)
        addrs = ";".join(ns.addr for ns in self.namesrvs)
        if self.name == "partition":
            self.relay = Relay(self.namesrvs[0].port)
            self.relay.restore()
            addrs = f"127.0.0.1:{self.relay.port}"
        taken: set[int] = set()
        for i, name in enumerate(BROKER_NAMES):
            props = {
                "brokerClusterName": CLUSTER,
                "brokerName": name,
                "brokerId": 0,
                "brokerRole": "ASYNC_MASTER",
                "namesrvAddr": addrs,
            }
            self.brokers.append(new_broker(self.run_dir, i, taken, props))
        for broker in self.brokers:
            broker.proc = self.java.start(
                "org.apache.rocketmq.broker.BrokerStartup", broker.conf, broker.log
            )
            self.procs.append(broker.proc)
        for broker in self.brokers:
            wait_log(broker.log, "boot success", broker.proc, timeout=180)
            # A broker registers when it starts, then every period from REGISTER_DELAY_S on.
            self.registers.append(now_ms() + REGISTER_DELAY_S * 1000)
        self.probes = [RouteProbe(ns.port) for ns in self.namesrvs]
        for probe in self.probes:
            probe.start()
        self.create_topic()

    def create_topic(self) -> None:
        ns = self.namesrvs[0].addr
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            self.java.mqadmin(
                "updateTopic", "-n", ns, "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4"
            )
            if self.wait_routes(20):
                return
        raise SystemExit(f"{TOPIC} never routed to both brokers; see the logs in {self.run_dir}")

    def wait_routes(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(p.complete for p in self.probes):
                return True
            time.sleep(0.2)
        return False

    def start_producers(self) -> None:
        from apache_procs import SendLog, java_producer

        addrs = ";".join(ns.addr for ns in self.namesrvs)
        for client in self.args.clients:
            if client == "client_push":
                proc = subprocess.Popen(
                    [
                        sys.executable, __file__, "--producer-child", addrs,
                        "--interval-ms", str(self.args.interval_ms),
                    ],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=(self.run_dir / "client_push.log").open("w"), text=True,
                    env=dict(os.environ, PYTHONPATH=str(self.tree)),
                )  # fmt: skip
                self.procs.append(proc)
                self.producers.append(SendLog(client, proc))
            else:
                log = java_producer(
                    self.java.lib, client, addrs, TOPIC, self.args.interval_ms, self.run_dir
                )
                self.procs.append(log.proc)
                self.producers.append(log)
        deadline = time.monotonic() + 90
        while not all(p.first_ok_after(0) for p in self.producers):
            if time.monotonic() > deadline:
                raise SystemExit(f"a producer never sent successfully; see {self.run_dir}")
            if any(p.proc.poll() is not None for p in self.producers):
                raise SystemExit(f"a producer exited; see its log in {self.run_dir}")
            time.sleep(0.1)

    def event(self) -> tuple[float, list[dict[str, Any]]]:
        """Does the scenario's event; its time and what happened when (ms since the epoch)."""
        steps: list[dict[str, Any]] = []

        def bounce(i: int) -> None:
            ns = self.namesrvs[i]
            killed = now_ms()
            self.kill_namesrv(ns)
            time.sleep(self.args.gap_s)
            self.start_namesrv(ns)
            steps.append({"namesrv": i, "killed_ms": killed, "back_ms": now_ms()})

        at = now_ms()
        if self.name == "partition":
            assert self.relay is not None
            self.relay.cut()
            time.sleep(self.args.partition_seconds)
            self.relay.restore()
            steps.append({"namesrv": 0, "cut_ms": at, "back_ms": now_ms()})
        else:
            bounce(0)
            if self.name == "rolling":
                time.sleep(self.args.rolling_s)
                bounce(1)
        return at, steps

    def one_round(self, number: int) -> dict[str, Any]:
        start = now_ms()
        period = REGISTER_PERIOD_S * 1000
        phase = self.args.phases[(number - 1) % len(self.args.phases)]
        at = self.registers[0] + phase * 1000
        at += period * max(0, -(-(start + self.args.seconds * 1000 - at) // period))
        time.sleep(max(0.0, (at - now_ms()) / 1000))
        event_ms, steps = self.event()
        time.sleep(self.args.seconds)
        end = now_ms()

        def rel(t: float | None) -> float | None:
            return None if t is None else round((t - event_ms) / 1000, 2)

        period_s = REGISTER_PERIOD_S

        for step in steps:
            probe = self.probes[step["namesrv"]]
            down = step.get("killed_ms", step.get("cut_ms"))
            step["route_short_s"] = rel(probe.short_since(down))
            step["route_one_again_s"] = rel(probe.routes_since(step["back_ms"], 1))
            step["route_full_again_s"] = rel(probe.routes_since(step["back_ms"], len(BROKER_NAMES)))
            # Each broker's first register the server saw again fixes that broker's schedule:
            # how far the event fell into its register period.
            step["register_phase_s"] = {}
            for i, name in enumerate(BROKER_NAMES):
                seen = probe.appeared_since(step["back_ms"], name)
                if seen is not None:
                    self.registers[i] = seen
                    step["register_phase_s"][name] = round(((down - seen) / 1000) % period_s, 1)
            for key in ("killed_ms", "cut_ms", "back_ms"):
                if key in step:
                    step[key.replace("_ms", "_s")] = rel(step.pop(key))
        return {"round": number, "start_ms": start, "event_ms": event_ms, "end_ms": end,
                "aimed_phase_s": phase, "steps": steps}  # fmt: skip

    def count(self, rnd: dict[str, Any]) -> None:
        """Adds each producer's figures to ``rnd``: sends started in the round's window."""
        start, end, event = rnd["start_ms"], rnd["end_ms"], rnd["event_ms"]
        for p in self.producers:
            sends = [s for s in list(p.sends) if start <= s.start_ms < end]
            failed = [s for s in sends if not s.ok]
            seqs = {s.seq for s in sends}
            unanswered = 0
            if seqs:
                answered = {s.seq for s in list(p.sends)}
                unanswered = sum(1 for q in range(min(seqs), max(seqs) + 1) if q not in answered)
            ends = sorted(s.end_ms for s in failed)
            kinds = Counter(failure_kind(s.detail) for s in failed)
            rnd[p.name] = {
                "sends": len(sends) + unanswered,
                "failed": len(failed),
                "unanswered": unanswered,
                "failures_from_s": round((ends[0] - event) / 1000, 2) if ends else None,
                "failures_to_s": round((ends[-1] - event) / 1000, 2) if ends else None,
                "kinds": dict(kinds.most_common()),
            }

    def run(self) -> list[dict[str, Any]]:
        self.boot()
        self.start_producers()
        rounds = [self.one_round(n) for n in range(1, self.args.rounds + 1)]
        time.sleep(SETTLE_S)
        for rnd in rounds:
            self.count(rnd)
            rnd["scenario"] = self.name
        return rounds

    def stop(self) -> None:
        from apache_procs import stop_processes

        for producer in self.producers:
            if producer.proc.stdin is not None and not producer.proc.stdin.closed:
                producer.proc.stdin.close()
        for probe in self.probes:
            probe.stopping.set()
        if self.relay is not None:
            self.relay.cut()
        stop_processes(self.procs)
        for i in range(len(self.brokers)):
            shutil.rmtree(self.run_dir / f"broker{i}", ignore_errors=True)


# -- report ----------------------------------------------------------------------------------------


def describe(rnd: dict[str, Any]) -> str:
    parts = []
    for step in rnd["steps"]:
        what = "cut" if "cut_s" in step else "killed"
        short, one, full = (
            "never" if t is None else f"{t} s"
            for t in (step["route_short_s"], step["route_one_again_s"], step["route_full_again_s"])
        )
        phases = ", ".join(f"{n} {v} s" for n, v in step["register_phase_s"].items()) or "unseen"
        parts.append(
            f"namesrv{step['namesrv']} {what} at {step.get('killed_s', step.get('cut_s'))} s "
            f"(into the brokers' register period: {phases}), back at {step['back_s']} s; "
            f"its route short of a broker from {short}, a broker again at {one}, both at {full}"
        )
    return "; ".join(parts)


def table(result: dict[str, Any]) -> str:
    lines = [
        "| scenario | round | client | sends | failed | no answer | failures (s after event) "
        "| failure kinds |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- | --- |",
    ]
    notes = []
    for rnd in result["rounds"]:
        notes.append(
            f"{rnd['scenario']} round {rnd['round']} (aimed {rnd['aimed_phase_s']:g} s after "
            f"{BROKER_NAMES[0]}'s register): {describe(rnd)}"
        )
        for client in result["clients"]:
            c = rnd[client]
            window = (
                "-"
                if c["failures_from_s"] is None
                else f"{c['failures_from_s']:.2f} to {c['failures_to_s']:.2f}"
            )
            kinds = "; ".join(f"{n:,} x {k[:100]}" for k, n in c["kinds"].items()) or "-"
            lines.append(
                f"| {rnd['scenario']} | {rnd['round']} | {client} | {c['sends']:,} "
                f"| {c['failed']:,} | {c['unanswered']:,} | {window} | {kinds} |"
            )
    return "\n".join([*lines, "", *notes])


# -- main ------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--clients", default=",".join(CLIENTS), help="client_push,java")
    parser.add_argument("--seconds", type=float, default=45.0, help="the steady and after phases")
    parser.add_argument("--partition-seconds", type=float, default=45.0)
    parser.add_argument("--gap-s", type=float, default=1.0, help="a killed name server's downtime")
    parser.add_argument("--rolling-s", type=float, default=3.0)
    parser.add_argument("--interval-ms", type=int, default=20)
    parser.add_argument(
        "--phases",
        default="3,11,19,27",
        help="per round (cycled): the event this many seconds after broker-r0's periodic register",
    )
    parser.add_argument("--hog", action="store_true", help="keep every core busy beside the run")
    parser.add_argument("--tree", help="run the name server and client_push of this checkout")
    parser.add_argument("--namesrv-config", help="a TOML config for the name servers")
    parser.add_argument("--label", help="the commit measured (default: the tree's git HEAD)")
    parser.add_argument("--json", dest="json_out", help="also write the result here")
    parser.add_argument("--cache", default="~/.cache/rocketmq-routepush")
    parser.add_argument("--version", default="5.3.3")
    parser.add_argument("--producer-child", metavar="NAMESRV", help=argparse.SUPPRESS)
    parser.add_argument("--hog-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.producer_child:
        producer_child(args.producer_child, args.interval_ms)
        return
    if args.hog_child:
        hog_child()
        return
    args.clients = [c for c in args.clients.split(",") if c]
    args.phases = [float(v) for v in args.phases.split(",")]
    if unknown := set(args.clients) - set(CLIENTS):
        parser.error(f"unknown clients: {', '.join(sorted(unknown))}")
    if args.seconds < 40:
        print(f"note: --seconds {args.seconds:g} is shorter than the brokers' 30 s register "
              "period plus room: the failures may not have ended", file=sys.stderr)  # fmt: skip

    from apache_procs import Java, jar_lib, tree_commit

    tree = Path(args.tree).resolve() if args.tree else ROOT
    lib = jar_lib(args.cache, args.version, "broker", "tools", "client")
    run_dir = lib.parent / "namesrv_restart" / time.strftime("%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True)
    result: dict[str, Any] = {
        "commit": args.label or tree_commit(tree),
        "hog": args.hog,
        "interval_ms": args.interval_ms,
        "seconds": args.seconds,
        "clients": args.clients,
        "rounds": [],
        "run_dir": str(run_dir),
    }
    # SIGTERM ends the run as Ctrl-C does: every process started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    hog = None
    try:
        if args.hog:
            hog = subprocess.Popen(
                [sys.executable, __file__, "--hog-child"], start_new_session=True
            )
        for name in SCENARIOS if args.scenario == "all" else (args.scenario,):
            scenario_dir = run_dir / name
            scenario_dir.mkdir()
            scenario = Scenario(name, args, scenario_dir, Java(lib, scenario_dir), tree)
            try:
                rounds = scenario.run()
            finally:
                scenario.stop()
            result["rounds"] += rounds
            for rnd in rounds:
                print(json.dumps(rnd), file=sys.stderr, flush=True)
    finally:
        if hog is not None:
            os.killpg(hog.pid, signal.SIGKILL)
            hog.wait()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    print(f"commit {result['commit']}, a send every {args.interval_ms} ms, "
          f"{args.seconds:g} s per phase{', CPU hog beside it' if args.hog else ''}")  # fmt: skip
    print(table(result))


if __name__ == "__main__":
    main()
