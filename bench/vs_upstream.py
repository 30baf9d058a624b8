"""This name server against Apache RocketMQ's Java name server, side by side, same load.

Every server runs as its own process on loopback: ours (``python -m namesrv``) and Apache's
``org.apache.rocketmq.namesrv.NamesrvStartup`` of each ``--java`` version, its jars resolved by
Maven into a cache directory outside the repository (``--cache``, default
``~/.cache/rocketmq-bench/VERSION/lib``; see ``--help``). Java gets ``--java-warmup`` seconds of
lookups and registers before anything is measured. Then, in interleaved rounds (the order of
servers rotates every round), the same load generator measures each server:

* lookups/s and CPU per lookup: GET_ROUTEINFO_BY_TOPIC, 100 connections, one request in flight
  each, 2 brokers x 1,000 topics registered;
* registers/s at 1,000 topics, plain and compressed body: 4 brokers on 4 connections, each
  re-sending its register as soon as it is answered (the heartbeat: same body, same version);
* the big case, once per server per round: 10 brokers register 100,000 topics each, in turn,
  with a new data version every round; the time per register, and the worst wait of a lookup
  sent every 20 ms on another connection meanwhile;
* RSS at 100,000 topics x 10 brokers: the server's RSS grown from before the first big round.

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
import json
import os
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import zlib
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
from protocol.route_model import DataVersion, TopicConfig  # noqa: E402

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
    if compressed and v4:  # a 4.x broker: topic configs in 5 fields, no mapping section
        parts = [json.dumps({"counter": version, "stateVersion": 0, "timestamp": version})]
        out = bytearray(struct.pack(">i", len(parts[0])) + parts[0].encode())
        out += struct.pack(">i", len(names))
        for n in names:
            text = f"{n} 8 8 6 SINGLE_TAG".encode()
            out += struct.pack(">i", len(text)) + text
        out += struct.pack(">i", 2) + b"[]"
        body = zlib.compress(bytes(out), 9)
    elif compressed:
        table = {n: TopicConfig(n, 8, 8, 6) for n in names}
        wrapper = register_body.TopicConfigSerializeWrapper(table, DataVersion(0, version, version))
        body = register_body.RegisterBrokerBody(wrapper, []).to_wire(compressed=True)
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


def closed_loop(port: int, requests: list[bytes], seconds: float, warmup: float = 0.5) -> float:
    """One connection per request, each re-sending its request when answered; responses/s."""
    sel = selectors.DefaultSelector()
    state: dict[socket.socket, list[Any]] = {}
    for request in requests:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        state[sock] = [request, bytearray(), bytearray(request)]  # request, inbuf, outbuf
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
            request, inbuf, outbuf = state[sock]  # type: ignore[index]
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
                if done:
                    count += done
                    outbuf += request * done
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
    binary: Path, port: int, requests: list[bytes], seconds: float, warmup: float = 0.5
) -> float:
    """:func:`closed_loop` by the Go generator: responses/s."""
    frames = binary.parent / f"frames-{os.getpid()}"
    frames.write_bytes(b"".join(requests))  # connection i sends request i
    conns = len(requests)
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
    parser.add_argument("--java", nargs="*", default=["5.3.3", "4.9.7"])
    parser.add_argument("--java-warmup", type=float, default=20.0)
    parser.add_argument("--big-topics", type=int, default=100_000)
    parser.add_argument("--big-brokers", type=int, default=10)
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="also run the name server of this checkout (e.g. a worktree of main), as 'baseline'",
    )
    parser.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "rocketmq-bench", help="jar cache"
    )
    parser.add_argument("--loadgen", choices=("python", "go"), default="python")
    args = parser.parse_args()
    load = closed_loop
    if args.loadgen == "go":
        binary = go_loadgen(args.cache)

        def load(port: int, requests: list[bytes], seconds: float, warmup: float = 0.5) -> float:
            return closed_loop_go(binary, port, requests, seconds, warmup)

    print(f"load generator: {args.loadgen}", flush=True)

    servers: list[Server] = []
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
        # and they heartbeat (re-register) every round, as brokers do, or they would expire.
        channels = {s.name: socket.create_connection(("127.0.0.1", s.port)) for s in servers}
        heartbeats = [register_frame(100 + b, names_1k, 1, compressed=False) for b in range(2)]

        def heartbeat(server: Server) -> None:
            for frame in heartbeats:
                code = response_code(roundtrip(channels[server.name], frame))
                assert code == 0, (server.name, code)

        for server in servers:
            heartbeat(server)
        lookup = lookup_frame("BenchTopic0000")
        plain = [register_frame(b, names_1k, 1, compressed=False) for b in range(4)]
        packed = [register_frame(10 + b, names_1k, 1, compressed=True) for b in range(4)]
        packed_v4 = [
            register_frame(10 + b, names_1k, 1, compressed=True, v4=True) for b in range(4)
        ]

        def compressed_for(server: Server) -> list[bytes]:
            """Each server gets the compressed form of its own era's brokers."""
            return packed_v4 if server.name.startswith("java-4.") else packed

        for server in servers:
            if server.name.startswith("java"):
                print(f"warming {server.name} for {args.java_warmup:.0f} s", flush=True)
                third = args.java_warmup / 3
                load(server.port, [lookup] * 100, third)
                load(server.port, plain, third)
                load(server.port, compressed_for(server), third)

        results: dict[str, dict[str, list[float]]] = {s.name: {} for s in servers}

        def record(server: Server, key: str, value: float) -> None:
            results[server.name].setdefault(key, []).append(value)

        for rnd in range(args.rounds):
            order = servers[rnd % len(servers) :] + servers[: rnd % len(servers)]
            for server in order:
                heartbeat(server)
                before = server.cpu()
                rate = load(server.port, [lookup] * 100, args.seconds)
                cpu = server.cpu() - before
                record(server, "lookups/s", rate)
                record(server, "cpu us/lookup", cpu / (rate * (args.seconds + 0.5)) * 1e6)
                for label, frames in (("plain", plain), ("compressed", compressed_for(server))):
                    before = server.cpu()
                    rate = load(server.port, frames, args.seconds)
                    cpu = server.cpu() - before
                    record(server, f"registers/s {label}", rate)
                    record(
                        server,
                        f"cpu ms/register {label}",
                        cpu / (rate * (args.seconds + 0.5)) * 1e3,
                    )
            line = ", ".join(
                f"{s.name} {results[s.name]['lookups/s'][-1]:,.0f} lk/s "
                f"{results[s.name]['registers/s plain'][-1]:,.0f}/"
                f"{results[s.name]['registers/s compressed'][-1]:,.0f} reg/s"
                for s in servers
            )
            print(f"round {rnd + 1}: {line}", flush=True)

        big_names = [f"T{i:06d}" for i in range(args.big_topics)]
        rss_before = {s.name: s.rss() for s in servers}
        big_conns: dict[str, list[socket.socket]] = {s.name: [] for s in servers}
        for rnd in range(args.big_rounds):
            frames = [
                register_frame(200 + b, big_names, rnd + 1, compressed=False)
                for b in range(args.big_brokers)
            ]
            order = servers[rnd % len(servers) :] + servers[: rnd % len(servers)]
            for server in order:
                heartbeat(server)
                conns = big_conns[server.name]
                while len(conns) < args.big_brokers:
                    conns.append(socket.create_connection(("127.0.0.1", server.port)))
                prober = Prober(server.port, "BenchTopic0000")
                others = [s for s in servers if s is not server]
                others_cpu = sum(s.cpu() for s in others)
                stalls_before = machine_stalls()
                faults_before, preempted_before = server.faults_and_preemptions()
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
                others_cpu = sum(s.cpu() for s in others) - others_cpu
                stalled_us, scanned = (
                    a - b for a, b in zip(machine_stalls(), stalls_before, strict=True)
                )
                faults, preempted = (
                    a - b
                    for a, b in zip(
                        server.faults_and_preemptions(),
                        (faults_before, preempted_before),
                        strict=True,
                    )
                )
                for t in times:
                    record(server, "big register ms", t * 1e3)
                record(server, "big register median ms", statistics.median(times) * 1e3)
                record(server, "worst lookup wait ms", max(waits) * 1e3)
                if rnd == 0:
                    time.sleep(2.0)
                    grown = server.rss() - rss_before[server.name]
                    entries = args.big_topics * args.big_brokers
                    record(server, "RSS B/entry", grown / entries)
                    record(server, "RSS before MiB", rss_before[server.name] / 2**20)
                    record(server, "RSS MiB", server.rss() / 2**20)
                print(
                    f"big round {rnd + 1} {server.name}: register median "
                    f"{statistics.median(times) * 1e3:,.0f} ms (max {max(times) * 1e3:,.0f}), "
                    f"worst lookup wait {max(waits) * 1e3:,.1f} ms over {len(waits)} lookups; "
                    f"the other servers used {others_cpu:.2f} CPU s meanwhile; "
                    f"{faults:,} page faults, {preempted:,} preemptions of the server; "
                    f"machine: {stalled_us / 1e3:,.1f} ms memory stall, "
                    f"{scanned:,} pages scanned in direct reclaim",
                    flush=True,
                )

        print("\nper server (median over rounds):")
        for server in servers:
            figures = ", ".join(
                f"{k} {statistics.median(v):,.2f}" for k, v in results[server.name].items()
            )
            print(f"  {server.name}: {figures}")
        baselines = [f"java-{args.java[0]}"] if args.java else []
        if args.baseline_tree is not None:
            baselines.append("baseline")
        for baseline in baselines:
            print(f"\nproject / {baseline}, per-round ratios:")
            ours, theirs = results["project"], results[baseline]
            for key in ours:
                if key == "big register ms":
                    continue
                ratios = [a / b for a, b in zip(ours[key], theirs.get(key, []), strict=False) if b]
                print(f"  {key}: {spread(ratios)}")
    finally:
        for server in servers:
            server.proc.terminate()
        for server in servers:
            try:
                server.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.proc.kill()


if __name__ == "__main__":
    main()
