"""Attack a live name server through its parsers and its registry's size, and report the cost.

Each row starts a fresh ``python -m namesrv`` (of this checkout, or of ``--tree``, another
checkout to compare with) on loopback with its default config, registers an honest broker,
and while the attack runs a bystander on another loopback address (127.0.0.2) looks a route
up every 10 ms. Reported: the bystander's slowest and median lookup while the attack ran (the
reactor's stall), the server's CPU seconds and RSS growth, the attacker's answers, and whether
the registry changed (a topic of the attacker's answered or not).

    python bench/attack_parsing.py
    python bench/attack_parsing.py --row 1 --row 2 --tree ../other-checkout
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
from hostile_clients import ROUTE, RssSampler, connect, register
from local_processes import free_port, percentile, roundtrip, start_namesrv

from namesrv.config import MIB
from protocol import register_body
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command
from protocol.headers import RegisterBrokerRequestHeader

ROOT = Path(__file__).resolve().parent.parent


def register_command(body: bytes, *, compressed: bool, name: str = "attacker") -> RemotingCommand:
    header = RegisterBrokerRequestHeader(
        broker_name=name,
        broker_addr="127.0.0.9:10911",
        cluster_name="c",
        ha_server_addr="127.0.0.9:10912",
        broker_id=0,
        heartbeat_timeout_millis=10**9,
        compressed=compressed,
        body_crc32=register_body.crc32(body),
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire(), body)


def record(text: bytes) -> bytes:
    return struct.pack(">i", len(text)) + text


def compressed_body(data_version: bytes, records: list[bytes] | bytes, count: int) -> bytes:
    """A compressed REGISTER_BROKER body as a 4.x broker writes it (no mapping infos)."""
    joined = records if isinstance(records, bytes) else b"".join(records)
    inflated = (
        record(data_version) + struct.pack(">i", count) + joined + record(b"[]")
    )  # filter servers
    return zlib.compress(inflated, 9)


def escaped_quotes(size: int) -> bytes:
    """An unterminated JSON string of escaped quotes: what a backtracking rewrite of bare
    keys scanned to its end once per quote."""
    return b'"' + b'\\"' * (size // 2)


class Prober(threading.Thread):
    """Looks up a route every 10 ms on its own connection; keeps each lookup's seconds."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = connect(port, "127.0.0.2")
        self.sock.settimeout(120)
        self.latencies: list[float] = []
        self.failures = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.01):
            start = time.perf_counter()
            try:
                answer = roundtrip(self.sock, ROUTE)[0]
            except OSError:
                self.failures += 1
                return
            self.latencies.append(time.perf_counter() - start)
            self.failures += answer.code != ResponseCode.SUCCESS

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.sock.close()


def answers(sock: socket.socket, count: int) -> dict[int, int]:
    """Response codes of the next ``count`` frames on ``sock``."""
    decoder = FrameDecoder()
    codes: dict[int, int] = {}
    got = 0
    while got < count:
        data = sock.recv(1 << 20)
        if not data:
            break
        for cmd in decoder.feed(data):
            codes[cmd.code] = codes.get(cmd.code, 0) + 1
            got += 1
    return codes


def topic_known(port: int, topic: str) -> bool:
    sock = connect(port)
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    answer = roundtrip(sock, cmd)[0]
    sock.close()
    return answer.code == ResponseCode.SUCCESS


Payload = dict[str, Any]


def quadratic_register() -> Payload:
    """A compressed REGISTER_BROKER of about a hundred bytes whose data version is 48 KiB of
    escaped quotes, never closed."""
    body = compressed_body(escaped_quotes(48 * 1024), [], 0)
    return {"command": register_command(body, compressed=True), "body_bytes": len(body)}


def quadratic_data_version() -> Payload:
    """QUERY_DATA_VERSION with a 16 KiB body of escaped quotes."""
    body = escaped_quotes(16 * 1024)
    ext = {"brokerName": "attacker", "brokerAddr": "127.0.0.9:10911", "clusterName": "c"}
    ext["brokerId"] = "0"
    cmd = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, ext, body)
    return {"command": cmd, "body_bytes": len(body)}


MANY_TOPICS = 2_200_000


def many_topics() -> Payload:
    """One compressed register of 2.2 million short-named topics (about 6 MB sent)."""
    records = b"".join(record(b"t%07d 1 1 6 SINGLE_TAG" % i) for i in range(MANY_TOPICS))
    body = compressed_body(b'{"counter":1,"timestamp":1}', records, MANY_TOPICS)
    return {
        "command": register_command(body, compressed=True),
        "body_bytes": len(body),
        "topics_sent": MANY_TOPICS,
        "check_topic": "t0000001",
    }


def big_attributes() -> Payload:
    """One topic whose attributes are a 60 MB JSON text (about 60 KB compressed)."""
    attributes = b'{"a":"' + b"x" * (60 * 1000 * 1000) + b'"}'
    record_text = record(b"BigAttrs 1 1 6 SINGLE_TAG " + attributes)
    body = compressed_body(b'{"counter":1,"timestamp":1}', [record_text], 1)
    return {
        "command": register_command(body, compressed=True),
        "body_bytes": len(body),
        "check_topic": "BigAttrs",
    }


def bombs() -> Payload:
    """80 compressed registers that inflate past every bound (zeros), sent one after another."""
    bomb = zlib.compress(b"\0" * (70 * MIB), 9)
    frame = encode_command(register_command(bomb, compressed=True))
    return {"frames": [frame] * 80, "bomb_bytes": len(bomb)}


def send(port: int, payload: Payload) -> dict[str, object]:
    """The attack: one request and its answer, or frames sent back to back and their answers."""
    sock = connect(port)
    sock.settimeout(600)
    outcome: dict[str, object] = {k: v for k, v in payload.items() if k.endswith(("bytes", "sent"))}
    if "command" in payload:
        answer = roundtrip(sock, payload["command"])[0]
        outcome.update(answer=answer.code, remark=(answer.remark or "")[:100])
    else:
        frames = payload["frames"]
        for frame in frames:
            sock.sendall(frame)
        outcome.update(requests=len(frames), answers=answers(sock, len(frames)))
    # Looked at before the attacker's connection closes (a closed channel unregisters it).
    if "check_topic" in payload:
        outcome["attacker_topic_known"] = topic_known(port, payload["check_topic"])
    outcome["attacker_registered"] = attacker_registered(port)
    sock.close()
    return outcome


def attacker_registered(port: int) -> bool:
    """Whether the attacking broker is in the cluster info: the registry changed."""
    sock = connect(port)
    answer = roundtrip(sock, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))[0]
    sock.close()
    return b'"attacker"' in answer.body


ROWS: list[tuple[str, Callable[[], Payload]]] = [
    ("compressed REGISTER_BROKER, its data version 48 KiB of escaped quotes", quadratic_register),
    ("QUERY_DATA_VERSION, 16 KiB of escaped quotes", quadratic_data_version),
    ("compressed REGISTER_BROKER of 2.2 million topics", many_topics),
    ("80 compressed bombs (70 MiB of zeros each)", bombs),
    ("a topic with 60 MB of attributes (compressed)", big_attributes),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", type=int, action="append", help="run only these rows (1-based)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run")
    args = parser.parse_args()
    for number, (title, prepare) in enumerate(ROWS, 1):
        if args.row and number not in args.row:
            continue
        payload = prepare()  # built before the bystander looks: its thread shares our GIL
        port = free_port()
        proc = start_namesrv(port, None, args.tree.resolve())
        try:
            broker = connect(port)
            register(broker)
            server = psutil.Process(proc.pid)
            rss_before = server.memory_info().rss
            cpu_before = sum(server.cpu_times()[:2])
            sampler = RssSampler(server)
            sampler.start()
            prober = Prober(port)
            prober.start()
            start = time.perf_counter()
            outcome = send(port, payload)
            seconds = time.perf_counter() - start
            time.sleep(0.2)  # a few lookups after the answer
            prober.stop()
            sampler.stop()
            cpu = sum(server.cpu_times()[:2]) - cpu_before
            rss_after = server.memory_info().rss
            lat = prober.latencies or [float("nan")]
            print(
                json.dumps(
                    {
                        "row": title,
                        "tree": args.tree.resolve().name,
                        **outcome,
                        "seconds": round(seconds, 2),
                        "server_cpu_s": round(cpu, 2),
                        "lookups": len(prober.latencies),
                        "lookup_max_ms": round(max(lat) * 1000, 1),
                        "lookup_p50_ms": round(percentile(lat, 0.5) * 1000, 2),
                        "lookup_failures": prober.failures,
                        "rss_before_mib": round(rss_before / MIB, 1),
                        "rss_peak_mib": round(max(rss_before, sampler.peak) / MIB, 1),
                        "rss_after_mib": round(rss_after / MIB, 1),
                        "server_alive": proc.poll() is None,
                    }
                ),
                flush=True,
            )
            broker.close()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
