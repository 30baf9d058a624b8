"""This name server against Apache RocketMQ's Java name server, side by side, same load.

Every server runs as its own process on loopback: ours (``python -m namesrv``) and Apache's
``org.apache.rocketmq.namesrv.NamesrvStartup`` of each ``--java`` version, its jars resolved by
Maven into a cache directory outside the repository (``--cache``, default
``~/.cache/rocketmq-routepush/VERSION/lib``, where ``python tools/rocketmq_jars.py`` puts them).
Java gets ``--java-warmup`` seconds of lookups and registers before anything is measured. Then,
in interleaved rounds (the order of servers rotates every round), the same load generator
measures each server:

* lookups/s and CPU per lookup: GET_ROUTEINFO_BY_TOPIC, 100 connections, one request in flight
  each, 2 brokers x 1,000 topics registered;
* registers/s at 1,000 topics, plain and compressed body, 4 brokers on 4 connections, each
  sending its next register as soon as one is answered, in two cases labelled apart:
  ``changed-version`` (every register carries a data version the broker has not sent before,
  as after a topic change or a broker restart: the table must be read and applied again) and
  ``heartbeat`` (the very same body again, as a broker re-registers every 30 s);
* the big case, once per server per round: 10 brokers register 100,000 topics each, in turn,
  compressed (5.x form), then 10 other brokers plain; the first round is each broker's first
  register, every later round brings a new data version; the time per register, and the worst
  wait of a lookup sent every 20 ms on another connection meanwhile (the floors take the same
  frames, so the worst wait has the machine's own beside it: a server that only gathers the
  frames, with this machine's stalls);
* RSS per (topic, broker) at 100,000 topics x 10 brokers registered compressed: the server's RSS
  grown from before the first big round, two seconds after it (and after the plain brokers too,
  over twice the entries).

A round measures the lookups, then the four register loads, each in ``--windows`` windows
(``--seconds`` in all per server and load), every server taking one window in turn, so the
machine's speed drifting within the round weighs on every server alike. The lookup figures
have two floors beside them, measured right after the project in every window:
``bench/bare_server.py`` answering each lookup with the name server's own answer bytes, decoding
nothing, on Twisted's default reactor and on the name server's lean one.

Figures are compared as per-round ratios against Java 5.3.3 (median and spread). The machine
is shared: run it when it is quiet, or say that it was not.

    python bench/vs_upstream.py --rounds 5 --seconds 4

The load generator is this script's own Python selector loop by default (``--loadgen python``),
which takes about one core of the two; ``--loadgen go`` uses ``bench/loadgen_go`` (built with
``go build`` into the cache directory on first use), which needs a fraction of that and so
leaves a multi-threaded server (Java) room on the second core. Say which one a figure came from.

``--rounds 0`` runs only the big case; ``--baseline-tree DIR`` also runs the name server of
another checkout (e.g. of main) as ``baseline``, for a same-run before/after.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import psutil  # noqa: E402
from local_processes import free_port, start_namesrv, wait_port  # noqa: E402

from protocol import register_body  # noqa: E402
from protocol.codes import RequestCode  # noqa: E402
from protocol.frame import RemotingCommand, encode_command  # noqa: E402
from protocol.headers import RegisterBrokerRequestHeader  # noqa: E402

JVM_OPTS = ["-server", "-Xms1g", "-Xmx4g", "-XX:+UseG1GC"]
LOGBACK = '<configuration><root level="OFF"/></configuration>\n'


# -- requests ------------------------------------------------------------------------------------


def register_frame(
    broker: int,
    names: list[str],
    version: int,
    *,
    compressed: bool,
    opaque: int = 1,
    v4: bool = False,
) -> bytes:
    """A REGISTER_BROKER frame as a 5.x broker sends it (``v4``: as a 4.x broker does)."""
    if compressed:  # upstream's RegisterBrokerBody.encode(true): 4.x topic configs in 5 fields
        # and no mapping section; 5.x adds the attributes JSON and the mapping count
        doc = json.dumps({"counter": version, "stateVersion": 0, "timestamp": version})
        out = bytearray(struct.pack(">i", len(doc)) + doc.encode())
        out += struct.pack(">i", len(names))
        tail = "" if v4 else " {}"
        for n in names:
            text = f"{n} 8 8 6 SINGLE_TAG{tail}".encode()
            out += struct.pack(">i", len(text)) + text
        out += struct.pack(">i", 2) + b"[]"
        if not v4:
            out += struct.pack(">i", 0)
        body = zlib.compress(bytes(out), 9)
    else:  # as fastjson writes it; built with the C encoder so big bodies are quick to make
        doc = {
            "filterServerList": [],
            "topicConfigSerializeWrapper": {
                "dataVersion": {"counter": version, "stateVersion": 0, "timestamp": version},
                "topicConfigTable": {
                    n: {
                        "attributes": {},
                        "order": False,
                        "perm": 6,
                        "readQueueNums": 8,
                        "topicFilterType": "SINGLE_TAG",
                        "topicName": n,
                        "topicSysFlag": 0,
                        "writeQueueNums": 8,
                    }
                    for n in names
                },
                "topicQueueMappingInfoMap": {},
            },
        }
        body = json.dumps(doc, separators=(",", ":")).encode()
    addr = f"10.1.{broker // 200}.{broker % 200 + 1}:10911"
    header = RegisterBrokerRequestHeader(
        broker_name=f"bench-broker-{broker}",
        broker_addr=addr,
        cluster_name="BenchCluster",
        ha_server_addr=addr.replace("10911", "10912"),
        broker_id=0,
        heartbeat_timeout_millis=None,
        compressed=compressed,
        body_crc32=register_body.crc32(body),
    )
    request = RemotingCommand.request(
        RequestCode.REGISTER_BROKER, header.to_wire(), body, opaque=opaque
    )
    return encode_command(request)


def lookup_frame(topic: str, opaque: int = 0) -> bytes:
    request = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=opaque
    )
    return encode_command(request)


def response_code(frame_body: bytes) -> int:
    """The code of a response frame (without its length prefix), JSON header assumed."""
    header_length = struct.unpack_from(">I", frame_body, 0)[0] & 0xFFFFFF
    return int(json.loads(frame_body[4 : 4 + header_length])["code"])


# -- load ------------------------------------------------------------------------------------------


WARMUP_S = 0.5
"""The closed loop's warm-up before it counts answers."""


def closed_loop(
    port: int, requests: list[bytes], seconds: float, warmup: float = WARMUP_S, cycle: int = 1
) -> float:
    """One connection per ``cycle`` requests, each sending its next request (in turn) when one
    is answered; responses/s."""
    sel = selectors.DefaultSelector()
    state: dict[socket.socket, list[Any]] = {}
    for first in range(0, len(requests), cycle):
        mine = requests[first : first + cycle]
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        state[sock] = [mine, bytearray(), bytearray(mine[0]), 1]  # requests, in, out, next
        sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    count = 0
    start = time.perf_counter()
    counted_from: float | None = None
    end = start + warmup + seconds
    checked = False
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        if counted_from is None and now >= start + warmup:
            counted_from, count = now, 0
        for key, events in sel.select(timeout=0.1):
            sock = key.fileobj  # type: ignore[assignment]
            entry = state[sock]  # type: ignore[index]
            mine, inbuf, outbuf, _ = entry
            if events & selectors.EVENT_WRITE and outbuf:
                try:
                    sent = sock.send(outbuf)  # type: ignore[union-attr]
                except BlockingIOError:
                    sent = 0
                del outbuf[:sent]
            if events & selectors.EVENT_READ:
                data = sock.recv(1 << 20)  # type: ignore[union-attr]
                if not data:
                    raise ConnectionError("server closed a benchmark connection")
                inbuf += data
                done = 0
                while len(inbuf) >= 4:
                    length = struct.unpack_from(">I", inbuf, 0)[0]
                    if len(inbuf) < 4 + length:
                        break
                    if not checked:
                        code = response_code(bytes(inbuf[4 : 4 + length]))
                        if code != 0:
                            raise RuntimeError(f"server answered code {code}")
                        checked = True
                    del inbuf[: 4 + length]
                    done += 1
                for _ in range(done):
                    outbuf += mine[entry[3] % len(mine)]
                    entry[3] += 1
                count += done
            mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if outbuf else 0)
            sel.modify(sock, mask)
    elapsed = time.perf_counter() - (counted_from or start)
    for sock in state:
        sock.close()
    return count / elapsed


def go_loadgen(cache: Path) -> Path:
    """The Go load generator's binary, built into the cache on first use."""
    binary = cache / "loadgen" / "loadgen"
    source = HERE / "loadgen_go"
    newest = max(p.stat().st_mtime for p in source.iterdir())
    if not binary.exists() or binary.stat().st_mtime < newest:
        binary.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=source, check=True)
    return binary


def closed_loop_go(
    binary: Path,
    port: int,
    requests: list[bytes],
    seconds: float,
    warmup: float = WARMUP_S,
    cycle: int = 1,
) -> float:
    """:func:`closed_loop` by the Go generator: responses/s."""
    frames = binary.parent / f"frames-{os.getpid()}"
    frames.write_bytes(b"".join(requests))  # connection i sends requests i*cycle.. in turn
    conns = len(requests) // cycle
    out = subprocess.run(
        [
            str(binary),
            "-addr",
            f"127.0.0.1:{port}",
            "-conns",
            str(conns),
            "-seconds",
            str(seconds),
            "-warmup",
            str(warmup),
            "-frames",
            str(frames),
            "-cycle",
            str(cycle),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    frames.unlink(missing_ok=True)
    if out.returncode != 0:
        raise RuntimeError(f"loadgen failed: {out.stderr.strip()}")
    count, elapsed = out.stdout.split()
    return int(count) / float(elapsed)


def roundtrip(sock: socket.socket, frame: bytes) -> bytes:
    sock.sendall(frame)
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">I", buf, 0)[0]:
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("closed")
        buf += data
    return buf[4:]


class Prober(threading.Thread):
    """Sends a lookup every ``interval`` s on its own connection; records every wait."""

    def __init__(self, port: int, topic: str, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.frame = lookup_frame(topic)
        self.interval = interval
        self.waits: list[float] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        next_at = time.perf_counter()
        while not self.stop_flag.is_set():
            sent = time.perf_counter()
            roundtrip(self.sock, self.frame)
            self.waits.append(time.perf_counter() - sent)
            next_at += self.interval
            time.sleep(max(0.0, next_at - time.perf_counter()))

    def stop(self) -> list[float]:
        self.stop_flag.set()
        self.join()
        self.sock.close()
        return self.waits


def machine_stalls() -> tuple[float, int]:
    """Microseconds some task of the machine stalled on memory (PSI, Linux >= 4.20) and pages
    the kernel scanned in direct reclaim: a round during which either grew ran on a machine
    short of free memory, where every fresh page an allocation touches may wait for reclaim."""
    stalled = 0.0
    try:
        for line in Path("/proc/pressure/memory").read_text().splitlines():
            if line.startswith("some"):
                stalled = float(line.rpartition("total=")[2])
    except OSError:
        pass
    scanned = 0
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("pgscan_direct "):
                scanned = int(line.split()[1])
    except OSError:
        pass
    return stalled, scanned


# -- servers ---------------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    ps: psutil.Process = field(init=False)

    def __post_init__(self) -> None:
        self.ps = psutil.Process(self.proc.pid)

    def cpu(self) -> float:
        times = self.ps.cpu_times()
        return times.user + times.system

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def faults_and_preemptions(self) -> tuple[int, int]:
        """Page faults (minor + major) and involuntary context switches so far."""
        faults = 0
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
            faults = int(fields[7]) + int(fields[9])  # minflt, majflt
        except OSError:
            pass
        return faults, int(self.ps.num_ctx_switches().involuntary)


def start_floors(channel: socket.socket, lookup: bytes) -> list[Server]:
    """The floors of the lookup figures: ``bare_server.py`` answering every frame with the
    bytes the name server answered ``lookup`` with, on Twisted's default reactor
    (``floor-twisted``) and on the name server's own (``floor-lean``)."""
    answer = roundtrip(channel, lookup)
    assert response_code(answer) == 0
    fd, answer_file = tempfile.mkstemp(prefix="vs-upstream-answer-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(struct.pack(">I", len(answer)) + answer)
    floors = []
    for name, extra in (("floor-twisted", []), ("floor-lean", ["--lean"])):
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "bare_server.py"), str(port), answer_file, *extra],
            stdout=subprocess.DEVNULL,
        )
        floors.append(Server(name, port, proc))
        wait_port(port)
    os.unlink(answer_file)  # read at start-up
    return floors


def start_java(version: str, cache: Path, port: int) -> subprocess.Popen[bytes]:
    lib = cache / version / "lib"
    if not any(lib.glob("rocketmq-namesrv-*.jar")):
        raise SystemExit(
            f"no rocketmq-namesrv jar in {lib}: resolve it first, e.g.\n"
            f"  mkdir -p {cache / version} && cd {cache / version} && write a pom.xml depending "
            f"on org.apache.rocketmq:rocketmq-namesrv:{version}, then\n"
            f"  mvn -q dependency:copy-dependencies -DoutputDirectory=lib  (and copy the "
            f"rocketmq-namesrv jar itself into lib)"
        )
    home = cache / version / "home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "logback_namesrv.xml").write_text(LOGBACK)
    conf = home / f"namesrv-{port}.properties"
    conf.write_text(f"listenPort={port}\n")
    args = [
        "java",
        *JVM_OPTS,
        f"-Duser.home={home}",
        f"-Drocketmq.home.dir={home}",
        "-cp",
        f"{lib}/*",
        "org.apache.rocketmq.namesrv.NamesrvStartup",
        "-c",
        str(conf),
    ]
    proc = subprocess.Popen(
        args,
        env=dict(os.environ, ROCKETMQ_HOME=str(home)),
        stdout=subprocess.DEVNULL,
        stderr=open(home / "stderr.log", "wb"),  # noqa: SIM115
    )
    wait_port(port, timeout=60)
    return proc


# -- the run ---------------------------------------------------------------------------------------


CHANGED_VERSIONS = 16
"""Registers each broker connection sends in turn in the changed-version case, each with a
data version of its own: no register repeats the body before it."""


def wait_quiet(server: Server, most: float = 1.0) -> None:
    """Wait (``most`` seconds at most) until ``server`` spends under 10 % of a core, so what it
    does after a load (Java's collector and compiler threads, 100 ms or two of CPU) is not
    charged to the server measured next."""
    deadline = time.monotonic() + most
    before = server.cpu()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = server.cpu()
        if now - before < 0.005:
            return
        before = now


Load = Callable[..., float]
"""``load(port, requests, seconds, cycle=...)``: the closed loop's responses/s."""
Loads = Callable[[Server], list[tuple[str, list[bytes], int]]]
"""A server's loads: (label, requests, requests per connection)."""


def in_windows(
    load: Load,
    members: list[Server],
    loads: Loads,
    seconds: float,
    windows: int,
    before_window: Callable[[], None],
) -> dict[tuple[str, str], tuple[float, float]]:
    """Each member's loads for ``seconds`` each, in ``windows`` windows: every member runs a
    window of each of its loads in turn, so a change of the machine's speed within the round
    weighs on every member alike, and each window starts once the member before is quiet.
    Returns (responses/s, CPU seconds per response) by (member's name, label)."""
    window = seconds / windows
    served: dict[tuple[str, str], list[float]] = {}  # answers, CPU s, answers with warm-up
    for _ in range(windows):
        before_window()
        for member in members:
            for label, requests, cycle in loads(member):
                before = member.cpu()
                rate = load(member.port, requests, window, cycle=cycle)
                totals = served.setdefault((member.name, label), [0.0, 0.0, 0.0])
                totals[0] += rate * window
                totals[1] += member.cpu() - before
                totals[2] += rate * (window + WARMUP_S)  # the warm-up's answers, at that rate
                wait_quiet(member)
    return {
        key: (answers / seconds, cpu / with_warmup if with_warmup else 0.0)
        for key, (answers, cpu, with_warmup) in served.items()
    }


def big_registers(
    server: Server,
    servers: list[Server],
    frames: list[bytes],
    conns: list[socket.socket],
    label: str,
) -> tuple[list[float], list[float], float]:
    """The big registers, one broker after the other, with a lookup every 20 ms meanwhile on
    another connection; returns the time of each register, every lookup's wait and the server's
    CPU time per register meanwhile."""
    prober = Prober(server.port, "BenchTopic0000")
    others = [s for s in servers if s is not server]
    others_cpu = sum(s.cpu() for s in others)
    stalls_before = machine_stalls()
    faults_before, preempted_before = server.faults_and_preemptions()
    cpu_before = server.cpu()
    # The prober is a thread of this process: a collection here (tens of milliseconds over
    # the frames' leftovers) would stop it and count as the server's wait.
    gc.collect()
    gc.disable()
    try:
        prober.start()
        times = []
        for broker, frame in enumerate(frames):
            started = time.perf_counter()
            code = response_code(roundtrip(conns[broker], frame))
            times.append(time.perf_counter() - started)
            if code != 0:
                raise RuntimeError(f"{server.name} refused a big register: {code}")
        time.sleep(0.2)
        waits = prober.stop()
    finally:
        gc.enable()
    cpu_ms = (server.cpu() - cpu_before) * 1e3 / len(frames)
    others_cpu = sum(s.cpu() for s in others) - others_cpu
    stalled_us, scanned = (a - b for a, b in zip(machine_stalls(), stalls_before, strict=True))
    faults, preempted = (
        a - b
        for a, b in zip(
            server.faults_and_preemptions(), (faults_before, preempted_before), strict=True
        )
    )
    print(
        f"big {label} {server.name}: register median "
        f"{statistics.median(times) * 1e3:,.0f} ms (max {max(times) * 1e3:,.0f}), "
        f"server CPU {cpu_ms:,.0f} ms per register (lookups and settling included), "
        f"worst lookup wait {max(waits) * 1e3:,.1f} ms over {len(waits)} lookups; "
        f"the other servers used {others_cpu:.2f} CPU s meanwhile; "
        f"{faults:,} page faults, {preempted:,} preemptions of the server; "
        f"machine: {stalled_us / 1e3:,.1f} ms memory stall, "
        f"{scanned:,} pages scanned in direct reclaim",
        flush=True,
    )
    return times, waits, cpu_ms


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return (
        f"median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f}, "
        f"n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--big-rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument(
        "--windows",
        "--lookup-windows",
        type=int,
        default=4,
        help="a round's --seconds of each load per server, measured in this many windows taken "
        "by every server in turn [default: %(default)s]",
    )
    parser.add_argument("--java", nargs="*", default=["5.3.3"])
    parser.add_argument("--java-warmup", type=float, default=20.0)
    parser.add_argument("--big-topics", type=int, default=100_000)
    parser.add_argument("--big-brokers", type=int, default=10)
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="also run the name server of this checkout (e.g. a worktree of main), as 'baseline'",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "rocketmq-routepush",
        help="jar cache, as python tools/rocketmq_jars.py fills it [default: %(default)s]",
    )
    parser.add_argument("--loadgen", choices=("python", "go"), default="python")
    args = parser.parse_args()
    load = closed_loop
    if args.loadgen == "go":
        binary = go_loadgen(args.cache)

        def load(
            port: int,
            requests: list[bytes],
            seconds: float,
            warmup: float = WARMUP_S,
            cycle: int = 1,
        ) -> float:
            return closed_loop_go(binary, port, requests, seconds, warmup, cycle)

    print(f"load generator: {args.loadgen}", flush=True)

    servers: list[Server] = []
    floors: list[Server] = []
    try:
        port = free_port()
        servers.append(Server("project", port, start_namesrv(port)))
        if args.baseline_tree is not None:
            port = free_port()
            servers.append(
                Server("baseline", port, start_namesrv(port, root=args.baseline_tree.resolve()))
            )
        for version in args.java:
            port = free_port()
            servers.append(Server(f"java-{version}", port, start_java(version, args.cache, port)))
        names_1k = [f"BenchTopic{i:04d}" for i in range(1_000)]
        # The lookup brokers' connections stay open (closing one would unregister its broker)
        # and they heartbeat (re-register) every server's turn, as brokers do, or they would
        # expire (a round takes about as long as the 120 s a broker may stay silent).
        channels = {s.name: socket.create_connection(("127.0.0.1", s.port)) for s in servers}
        heartbeats = [register_frame(100 + b, names_1k, 1, compressed=False) for b in range(2)]

        def heartbeat_all() -> None:
            for server in servers:
                for frame in heartbeats:
                    code = response_code(roundtrip(channels[server.name], frame))
                    assert code == 0, (server.name, code)

        heartbeat_all()
        lookup = lookup_frame("BenchTopic0000")
        floors = start_floors(channels["project"], lookup)
        versions = range(1, CHANGED_VERSIONS + 1)
        # Heartbeats: each broker sends its very body again. Changed versions: each broker
        # sends its table with a version it has not sent before (CHANGED_VERSIONS in turn).
        plain = [register_frame(b, names_1k, 1, compressed=False) for b in range(4)]
        packed = {
            v4: [register_frame(10 + b, names_1k, 1, compressed=True, v4=v4) for b in range(4)]
            for v4 in (False, True)
        }
        plain_changed = [
            register_frame(20 + b, names_1k, v, compressed=False, opaque=v)
            for b in range(4)
            for v in versions
        ]
        packed_changed = {
            v4: [
                register_frame(30 + b, names_1k, v, compressed=True, opaque=v, v4=v4)
                for b in range(4)
                for v in versions
            ]
            for v4 in (False, True)
        }

        def register_loads(server: Server) -> list[tuple[str, list[bytes], int]]:
            """(label, frames, frames per connection); each server gets the compressed form
            of its own era's brokers."""
            v4 = server.name.startswith("java-4.")
            return [
                ("changed-version plain", plain_changed, CHANGED_VERSIONS),
                ("changed-version compressed", packed_changed[v4], CHANGED_VERSIONS),
                ("heartbeat plain", plain, 1),
                ("heartbeat compressed", packed[v4], 1),
            ]

        for server in servers:
            if server.name.startswith("java"):
                print(f"warming {server.name} for {args.java_warmup:.0f} s", flush=True)
                loads = register_loads(server)
                share = args.java_warmup / (len(loads) + 1)
                load(server.port, [lookup] * 100, share)
                for _label, frames, cycle in loads:
                    load(server.port, frames, share, cycle=cycle)

        results: dict[str, dict[str, list[float]]] = {s.name: {} for s in servers + floors}

        def with_floors(order: list[Server]) -> list[Server]:
            """``order`` with the floors right after the project, in the same place of the
            round."""
            return [m for s in order for m in ([s, *floors] if s.name == "project" else [s])]

        def record(name: str, key: str, value: float) -> None:
            results[name].setdefault(key, []).append(value)

        def lookup_load(_server: Server) -> list[tuple[str, list[bytes], int]]:
            return [("lookups", [lookup] * 100, 1)]

        for rnd in range(args.rounds):
            order = servers[rnd % len(servers) :] + servers[: rnd % len(servers)]
            lookup_order = with_floors(order)
            measured = in_windows(
                load, lookup_order, lookup_load, args.seconds, args.windows, heartbeat_all
            )
            for (name, _label), (rate, cpu) in measured.items():
                record(name, "lookups/s", rate)
                record(name, "cpu us/lookup", cpu * 1e6)
            measured = in_windows(
                load, order, register_loads, args.seconds, args.windows, heartbeat_all
            )
            for (name, label), (rate, cpu) in measured.items():
                record(name, f"registers/s {label}", rate)
                record(name, f"cpu ms/register {label}", cpu * 1e3)
            line = ", ".join(
                f"{s.name} {results[s.name]['lookups/s'][-1]:,.0f} lk/s, reg/s changed "
                f"{results[s.name]['registers/s changed-version plain'][-1]:,.0f} plain "
                f"{results[s.name]['registers/s changed-version compressed'][-1]:,.0f} compr., "
                f"heartbeat {results[s.name]['registers/s heartbeat plain'][-1]:,.0f} plain "
                f"{results[s.name]['registers/s heartbeat compressed'][-1]:,.0f} compr."
                for s in servers
            )
            print(f"round {rnd + 1}: {line}", flush=True)

        big_names = [f"T{i:06d}" for i in range(args.big_topics)]
        rss_before = {s.name: s.rss() for s in servers}
        big_conns: dict[str, list[socket.socket]] = {s.name: [] for s in servers + floors}
        for rnd in range(args.big_rounds):
            phase = "first" if rnd == 0 else "new version"
            for form in ("compressed", "plain"):
                packed_form = form == "compressed"
                base = 300 if packed_form else 200
                frames = [
                    register_frame(base + b, big_names, rnd + 1, compressed=packed_form)
                    for b in range(args.big_brokers)
                ]
                order = servers[rnd % len(servers) :] + servers[: rnd % len(servers)]
                # The floors take the same frames: what reading them and a lookup's wait
                # meanwhile cost a server that does nothing else.
                order = with_floors(order)
                for server in order:
                    heartbeat_all()
                    conns = big_conns[server.name]
                    while len(conns) < 2 * args.big_brokers:
                        conns.append(socket.create_connection(("127.0.0.1", server.port)))
                    first_conn = 0 if packed_form else args.big_brokers
                    label = f"{form} {phase}"
                    times, waits, cpu_ms = big_registers(
                        server, servers, frames, conns[first_conn:], label
                    )
                    for t in times:
                        record(server.name, "big register ms", t * 1e3)
                    median = statistics.median(times) * 1e3
                    record(server.name, f"big register median ms {label}", median)
                    record(server.name, f"worst lookup wait ms {label}", max(waits) * 1e3)
                    record(server.name, f"big register cpu ms {label}", cpu_ms)
                    if rnd == 0 and server not in floors:
                        time.sleep(2.0)
                        grown = server.rss() - rss_before[server.name]
                        entries = args.big_topics * args.big_brokers
                        if packed_form:
                            record(server.name, "RSS B/entry (compressed brokers)", grown / entries)
                        else:
                            record(
                                server.name, "RSS B/entry (both, 2x entries)", grown / entries / 2
                            )
                            record(server.name, "RSS before MiB", rss_before[server.name] / 2**20)
                            record(server.name, "RSS MiB", server.rss() / 2**20)

        print("\nper server (median over rounds):")
        for server in servers + floors:
            print(f"  {server.name}:")
            for key, values in results[server.name].items():
                print(f"    {key}: {statistics.median(values):,.2f}")
        baselines = [f"java-{args.java[0]}"] if args.java else []
        if args.baseline_tree is not None:
            baselines.append("baseline")
        baselines += [floor.name for floor in floors]
        for baseline in baselines:
            print(f"\nproject / {baseline}, per-round ratios:")
            ours, theirs = results["project"], results[baseline]
            for key in ours:
                if key == "big register ms":
                    continue
                if key not in theirs:
                    continue
                ratios = [a / b for a, b in zip(ours[key], theirs[key], strict=False) if b]
                print(f"  {key}: {spread(ratios)}")
        if args.java and args.rounds:
            java = results[f"java-{args.java[0]}"]
            print(f"\nthe floors / java-{args.java[0]}, per-round ratios (what the floor allows):")
            for floor in floors:
                for key in ("lookups/s", "cpu us/lookup"):
                    pairs = zip(results[floor.name][key], java[key], strict=False)
                    print(f"  {floor.name} {key}: {spread([a / b for a, b in pairs if b])}")
    finally:
        for server in servers + floors:
            server.proc.terminate()
        for server in servers + floors:
            try:
                server.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.proc.kill()


if __name__ == "__main__":
    main()
