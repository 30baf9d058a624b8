"""Fuzz a live name server over loopback and report crashes, unanswered checks and RSS.

The name server runs as its own process (``python -m namesrv``) with its default bounds. A
registered broker gives it real routes. Generated inputs (mutated valid requests, wrong-typed and
deeply nested headers, padding, garbage, bad lengths, truncated frames, mutated register bodies)
go out on a few fuzz connections; a connection is replaced whenever an input breaks its stream
(judged by our own decoder, so every input reaches a stream the server is still reading). Every
``--check-every`` inputs a separate connection asks for a route and must get the right answer
within ``--check-timeout`` seconds. At the end it prints the figures: inputs, crashes (the
process died, or logged a traceback), unanswered or wrong checks, and the server's RSS against
the sum of its configured input bounds.

Soaks: ``--soaks N`` sends N rounds one after another (the first ``--first-inputs`` long, the
others ``--inputs``), each on fresh fuzz connections closed at its end, and reads the server's
RSS before the first, after each, and after ``--idle-seconds`` of quiet, so memory a soak leaves
behind shows as growth from one round to the next. ``--trace-dir`` runs the server under
tracemalloc (``traced_namesrv.py``) and prints, between those points, the allocation sites
whose traced memory changed most: where the memory lives, when it is Python's.

    python bench/fuzz_server.py --inputs 1000000
    python bench/fuzz_server.py --first-inputs 300000 --inputs 100000 --soaks 3 --idle-seconds 30
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contextlib

import psutil
from local_processes import free_port, roundtrip, wait_port

from namesrv.config import NamesrvConfig
from protocol import register_body
from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, decode_frame, encode_command
from protocol.headers import RegisterBrokerRequestHeader
from protocol.push_codec import encode_subscribe
from protocol.route_model import DataVersion, TopicConfig

TOPICS = [f"FuzzTopic{i}" for i in range(20)]


def register_command(
    topics: list[str], compressed: bool = False, name: str = "fuzz-broker", addr: str = "127.0.0.1"
) -> RemotingCommand:
    wrapper = register_body.TopicConfigSerializeWrapper(
        topic_config_table={t: TopicConfig(t, 4, 4, 6) for t in topics},
        data_version=DataVersion(state_version=0, timestamp=1, counter=1),
        topic_queue_mapping_info_map={},
    )
    body = register_body.RegisterBrokerBody(wrapper, []).to_wire(compressed)
    header = RegisterBrokerRequestHeader(
        broker_name=name,
        broker_addr=f"{addr}:10911",
        cluster_name="FuzzCluster",
        ha_server_addr=f"{addr}:10912",
        broker_id=0,
        heartbeat_timeout_millis=10**9,
        compressed=compressed,
        body_crc32=register_body.crc32(body),
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire(), body)


def corpus() -> list[bytes]:
    """Valid requests of every kind a client or broker sends, both serializations."""
    cmds = [
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPICS[0]}),
        RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            {"topic": TOPICS[1]},
            serialize_type=SerializeType.ROCKETMQ,
        ),
        RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO),
        RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"}),
        RemotingCommand.request(
            RequestCode.QUERY_DATA_VERSION,
            {"brokerName": "b", "brokerAddr": "1.1.1.1:1", "clusterName": "c", "brokerId": "0"},
            json.dumps(register_body.data_version_doc(DataVersion(1, 2, 3))).encode(),
        ),
        RemotingCommand.request(
            RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(TOPICS[:3], "fuzz")
        ),
        # Another broker's: the checked routes must not move when a fuzz connection closes.
        register_command(["Fz1", "Fz2"], name="other-broker", addr="127.0.0.2"),
        register_command(["Fz3"], compressed=True, name="other-broker", addr="127.0.0.2"),
        RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, oneway=True),
    ]
    return [encode_command(c) for c in cmds]


JSON_JUNK: list[object] = ["105", 1.5, None, True, [], {}, [1, [2]], {"a": {"b": 1}}, 2**40, -1, ""]


def frame(header: bytes, body: bytes = b"", kind: int = 0) -> bytes:
    return (
        struct.pack(">II", 4 + len(header) + len(body), (kind << 24) | len(header)) + header + body
    )


class Generator:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.corpus = corpus()
        self.kinds = [
            (10, self.valid),
            (20, self.flip_bytes),
            (15, self.wrong_type_header),
            (4, self.deep_header),
            (10, self.random_frame),
            (3, self.garbage),
            (4, self.truncated),
            (8, self.binary_header),
            (12, self.body_mutation),
            (4, self.bad_length),
            (5, self.padded_lookup),
            (5, self.made_up_subscribe),
        ]
        self.weights = [w for w, _ in self.kinds]
        self.makers = [m for _, m in self.kinds]

    def __call__(self) -> tuple[str, bytes]:
        maker = self.rng.choices(self.makers, self.weights)[0]
        return maker.__name__, maker()

    def pick(self) -> bytes:
        return self.rng.choice(self.corpus)

    def valid(self) -> bytes:
        return self.pick()

    def flip_bytes(self) -> bytes:
        data = bytearray(self.pick())
        for _ in range(self.rng.randint(1, 8)):
            pos = self.rng.randrange(4, len(data))
            data[pos] = self.rng.randrange(256)
        return bytes(data)

    def wrong_type_header(self) -> bytes:
        doc: dict[str, object] = {
            "code": 105,
            "opaque": self.rng.randrange(2**31),
            "flag": 0,
            "language": "JAVA",
            "version": 479,
            "extFields": {"topic": self.rng.choice(TOPICS)},
        }
        key = self.rng.choice(
            ["code", "opaque", "flag", "language", "version", "extFields", "remark", "x"]
        )
        doc[key] = self.rng.choice(JSON_JUNK)
        return frame(json.dumps(doc).encode())

    def deep_header(self) -> bytes:
        depth = self.rng.choice([100, 1_000, 10_000, 60_000, 200_000])
        return frame(self.rng.choice([b"[", b"{", b'{"a":']) * depth)

    def random_frame(self) -> bytes:
        header = self.rng.randbytes(self.rng.randint(0, 300))
        body = self.rng.randbytes(self.rng.randint(0, 300))
        return frame(header, body, kind=self.rng.choice([0, 0, 1, 1, 2, 255]))

    def garbage(self) -> bytes:
        return self.rng.randbytes(self.rng.randint(1, 200))

    def truncated(self) -> bytes:
        data = self.pick()
        return data[: self.rng.randrange(1, len(data))]

    def binary_header(self) -> bytes:
        fixed = struct.pack(">hBhii", 105, 0, 479, self.rng.randrange(2**31), 0)
        rest = self.rng.randbytes(self.rng.randint(0, 40))
        if self.rng.random() < 0.5:
            rest = struct.pack(">i", 0) + struct.pack(">i", self.rng.randint(-5, 500)) + rest
        header = fixed + rest
        return frame(header, kind=1)

    def body_mutation(self) -> bytes:
        cmd = decode_frame(self.rng.choice(self.corpus[5:8])[4:])
        body = bytearray(cmd.body)
        choice = self.rng.random()
        if choice < 0.4 and body:
            for _ in range(self.rng.randint(1, 6)):
                body[self.rng.randrange(len(body))] = self.rng.randrange(256)
        elif choice < 0.6:
            body = bytearray(zlib.compress(self.rng.randbytes(self.rng.randint(0, 200))))
        elif choice < 0.8:
            body = bytearray(b"[" * self.rng.randint(10, 5_000))
        else:
            body = body[: self.rng.randrange(len(body) + 1)]
        cmd.body = bytes(body)
        if "bodyCrc32" in cmd.ext_fields and self.rng.random() < 0.7:
            cmd.ext_fields["bodyCrc32"] = str(register_body.crc32(cmd.body))
        return encode_command(cmd)

    def bad_length(self) -> bytes:
        data = bytearray(self.pick())
        data[0:4] = struct.pack(">I", self.rng.choice([0, 1, 3, 2**31, 2**32 - 1, 17 * 2**20]))
        return bytes(data)

    def padded_lookup(self) -> bytes:
        ext = {
            "topic": self.rng.choice(TOPICS),
            f"p{self.rng.randrange(10**9)}": "x" * self.rng.randint(1, 60_000),
        }
        return encode_command(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext))

    def made_up_subscribe(self) -> bytes:
        topics = [f"made-up-{self.rng.randrange(10**9)}" for _ in range(self.rng.randint(1, 200))]
        return encode_command(
            RemotingCommand.request(
                RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(topics, "fz")
            )
        )


def stream_survives(data: bytes, config: NamesrvConfig) -> bool:
    """Whether the server, reading ``data`` on an intact stream, goes on reading after it."""
    decoder = FrameDecoder(config.server.max_frame_size)
    try:
        frames = decoder.feed_raw(data)
    except FrameError:
        return False
    if decoder.buffered:
        return False  # a partial frame: we hang up after it
    for raw in frames:
        try:
            decode_frame(raw, config.server.max_header_size)
        except FrameError as exc:
            if not exc.answerable:
                return False
    return True


class FuzzConnection:
    def __init__(self, port: int, sel: selectors.BaseSelector) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.sel = sel
        self.finishing = False
        sel.register(self.sock, selectors.EVENT_READ, self)

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.sel.unregister(self.sock)
            self.sock.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=int, default=1_000_000, help="inputs per soak")
    parser.add_argument(
        "--soaks", type=int, default=1, help="soak rounds of --inputs each, one after another"
    )
    parser.add_argument(
        "--first-inputs", type=int, help="inputs of the first soak (default: --inputs)"
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=0.0, help="wait after the last soak, then read RSS"
    )
    parser.add_argument(
        "--trace-dir",
        type=Path,
        help="run the server with tracemalloc and print where its memory grew, by allocation "
        "site, between the start and the end of each soak and the idle wait",
    )
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--check-every", type=int, default=1_000)
    parser.add_argument("--check-timeout", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--show-log", action="store_true")
    args = parser.parse_args()

    config = NamesrvConfig()
    port = free_port()
    log_path = Path(tempfile.mkstemp(prefix="fuzz-namesrv-", suffix=".log")[1])
    log_file = log_path.open("w")

    here = Path(__file__).resolve().parent
    namesrv_args = ["--listen", f"127.0.0.1:{port}", "--log-level", "INFO"]
    if args.trace_dir is not None:
        command = [sys.executable, str(here / "traced_namesrv.py")]
        command += ["--snapshot-dir", str(args.trace_dir), "--", *namesrv_args]
    else:
        command = [sys.executable, "-m", "namesrv", *namesrv_args]
    proc = subprocess.Popen(
        command, env=dict(os.environ, PYTHONPATH=str(here.parent)), stderr=log_file
    )
    try:
        return _fuzz(args, config, port, proc, log_path, log_file)
    finally:
        if proc.poll() is None:
            proc.kill()


class Tracer:
    """Asks a traced server for tracemalloc snapshots and prints what grew between two."""

    def __init__(self, proc: subprocess.Popen[bytes], directory: Path | None) -> None:
        self.proc = proc
        self.directory = directory
        self.count = 0
        self.snapshots: list[object] = []

    def snap(self) -> None:
        if self.directory is None:
            return
        import signal
        import tracemalloc

        self.count += 1
        done = self.directory / f"snapshot-{self.count}.done"
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 120
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        snapshot = tracemalloc.Snapshot.load(str(done.with_suffix(".pickle")))
        self.snapshots.append(snapshot)

    def report(self, labels: list[str], top: int = 12) -> None:
        snaps: list = self.snapshots  # type: ignore[type-arg]
        for i in range(1, len(snaps)):
            before, after = snaps[i - 1], snaps[i]
            total = sum(s.size for s in after.statistics("filename")) >> 10
            print(f"tracemalloc {labels[i - 1]} -> {labels[i]} (traced now {total} KiB):")
            for stat in after.compare_to(before, "lineno")[:top]:
                frame = stat.traceback[0]
                print(
                    f"  {stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks "
                    f"{frame.filename}:{frame.lineno}"
                )


class Soak:
    """The fuzz connections, the checker and the broker of one run, and its tallies."""

    def __init__(self, args, config, port, proc) -> None:  # type: ignore[no-untyped-def]
        self.args, self.config, self.port, self.proc = args, config, port, proc
        self.server = psutil.Process(proc.pid)
        self.broker = socket.create_connection(("127.0.0.1", port), timeout=10)
        answer, _ = roundtrip(self.broker, register_command(TOPICS))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        self.checker = socket.create_connection(("127.0.0.1", port), timeout=args.check_timeout)
        self.check = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPICS[5]}
        )
        self.expected, _ = roundtrip(self.checker, self.check)
        assert self.expected.code == ResponseCode.SUCCESS
        self.gen = Generator(random.Random(args.seed))
        self.by_kind: dict[str, int] = {}
        self.checks = self.unanswered = self.wrong = self.reconnects = self.sent = 0
        self.rss_max = self.rss()

    def rss(self) -> int:
        return int(self.server.memory_info().rss)

    def run(self, inputs: int) -> None:
        """``inputs`` more inputs on fresh fuzz connections, closed at the end."""
        args, port = self.args, self.port
        sel = selectors.DefaultSelector()
        conns = [FuzzConnection(port, sel) for _ in range(args.connections)]
        started = time.perf_counter()
        for n in range(1, inputs + 1):
            conn = conns[n % len(conns)]
            kind, data = self.gen()
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            _send(conn, data)
            self.sent += 1
            if not stream_survives(data, self.config):
                # Half-close and read until the server closes: it reads everything we sent first.
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_WR)
                conn.finishing = True
                self.reconnects += 1
                conns[conns.index(conn)] = FuzzConnection(port, sel)
                while _finishing(sel) > 50:
                    _drain(sel, 0.01)
            if n % 64 == 0:
                _drain(sel, 0)
            if n % args.check_every == 0:
                self._check()
                if self.proc.poll() is not None:
                    break
            if n % 100_000 == 0:
                rate = n / (time.perf_counter() - started)
                print(f"{n} inputs, {rate:.0f}/s, rss {self.rss() >> 20} MiB", flush=True)
        # Every connection is half-closed and read to its end, so the server has seen it all.
        for key in list(sel.get_map().values()):
            conn = key.data
            if not conn.finishing:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_WR)
                conn.finishing = True
        deadline = time.monotonic() + 30
        while _finishing(sel) and time.monotonic() < deadline:
            _drain(sel, 0.05)
        for key in list(sel.get_map().values()):
            key.data.close()
        sel.close()

    def _check(self) -> None:
        self.checks += 1
        try:
            got, _ = roundtrip(self.checker, self.check)
            if got.code != ResponseCode.SUCCESS or got.body != self.expected.body:
                self.wrong += 1
                if self.wrong == 1:
                    print("first wrong check:", got.code, got.remark, got.body[:300])
        except (OSError, ConnectionError):
            self.unanswered += 1
            self.checker = socket.create_connection(
                ("127.0.0.1", self.port), timeout=self.args.check_timeout
            )
        # The broker heartbeats as a broker does, so its routes stay (and idle never bites).
        roundtrip(self.broker, register_command(TOPICS))
        self.rss_max = max(self.rss_max, self.rss())


def _fuzz(args, config, port, proc, log_path, log_file) -> int:  # type: ignore[no-untyped-def]
    wait_port(port)
    soak = Soak(args, config, port, proc)
    tracer = Tracer(proc, args.trace_dir)
    labels = ["start"]
    tracer.snap()
    rss = {"start": soak.rss()}
    started = time.perf_counter()
    for round_no in range(1, args.soaks + 1):
        first = round_no == 1 and args.first_inputs is not None
        soak.run(args.first_inputs if first else args.inputs)
        if proc.poll() is not None:
            break
        label = f"after_soak_{round_no}"
        rss[label] = soak.rss()
        labels.append(label)
        tracer.snap()
        print(f"{label}: rss {rss[label] / 2**20:.1f} MiB", flush=True)
    elapsed = time.perf_counter() - started
    if args.idle_seconds and proc.poll() is None:
        deadline = time.monotonic() + args.idle_seconds
        while time.monotonic() < deadline:  # the broker keeps heartbeating, as a live one does
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
            roundtrip(soak.broker, register_command(TOPICS))
        rss["after_idle"] = soak.rss()
        labels.append("after_idle")
        tracer.snap()
    alive = proc.poll() is None
    if alive:
        proc.terminate()
        proc.wait(timeout=30)
    log_file.close()
    log = log_path.read_text()
    tracebacks = log.count("Traceback")
    s = config.server
    bound = (
        s.max_buffered_input_bytes + s.route_cache_bytes + args.connections * s.output_buffer_bytes
    )
    tracer.report(labels)
    print(
        json.dumps(
            {
                "inputs": soak.sent,
                "soaks": args.soaks,
                "seconds": round(elapsed, 1),
                "inputs_per_second": round(soak.sent / elapsed),
                "by_kind": dict(sorted(soak.by_kind.items())),
                "reconnects": soak.reconnects,
                "server_alive_at_end": alive,
                "crashes": int(not alive) + tracebacks,
                "tracebacks_logged": tracebacks,
                "log_lines": log.count("\n"),
                "checks": soak.checks,
                "checks_unanswered": soak.unanswered,
                "checks_wrong": soak.wrong,
                "rss_mib": {k: round(v / 2**20, 1) for k, v in rss.items()},
                "rss_max_mib": round(soak.rss_max / 2**20, 1),
                "rss_growth_mib": round((soak.rss_max - rss["start"]) / 2**20, 1),
                "input_bounds_mib": round(bound / 2**20, 1),
            },
            indent=1,
        )
    )
    print("log sample:", log[-3000:]) if args.show_log else None
    log_path.unlink()
    ok = alive and not tracebacks and not soak.unanswered and not soak.wrong
    return 0 if ok else 1


def _send(conn: FuzzConnection, data: bytes) -> None:
    """Blocking send that keeps reading every connection, so the server never stalls on us."""
    view = memoryview(data)
    while view:
        try:
            n = conn.sock.send(view)
            view = view[n:]
        except BlockingIOError:
            _drain(conn.sel, 0.01)
        except OSError:
            return


def _drain(sel: selectors.BaseSelector, timeout: float) -> None:
    for key, _ in sel.select(timeout=timeout):
        conn: FuzzConnection = key.data
        try:
            data = conn.sock.recv(1 << 20)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data:
            conn.close()


def _finishing(sel: selectors.BaseSelector) -> int:
    return sum(1 for key in sel.get_map().values() if key.data.finishing)


if __name__ == "__main__":
    sys.exit(main())
