"""Replay hostile-client attacks (each an input meant to exhaust a bound) against a live name
server and report its RSS.

Each row attacks a fresh ``python -m namesrv`` on loopback with its default bounds (the rows
about stalled and idle connections shorten the idle and frame timeouts to 3 s, so the run does
not wait two minutes), then
reports the server's RSS growth against the bound that should contain it and whether a
bystander connecting from another loopback address (127.0.0.2) kept getting the right route.

    python bench/hostile_clients.py
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contextlib

import psutil
from local_processes import free_port, roundtrip, start_namesrv

from namesrv.config import MIB, NamesrvConfig
from protocol import register_body
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand, encode_command
from protocol.headers import RegisterBrokerRequestHeader
from protocol.push_codec import encode_subscribe
from protocol.route_model import DataVersion, TopicConfig

DEFAULTS = NamesrvConfig()
ROUTE = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Checked"})


def register(sock: socket.socket) -> None:
    wrapper = register_body.TopicConfigSerializeWrapper(
        {"Checked": TopicConfig("Checked", 4, 4, 6)}, DataVersion(0, 1, 1), {}
    )
    body = register_body.RegisterBrokerBody(wrapper, []).to_wire()
    header = RegisterBrokerRequestHeader(
        broker_name="b",
        broker_addr="127.0.0.1:10911",
        cluster_name="c",
        ha_server_addr="127.0.0.1:10912",
        broker_id=0,
        heartbeat_timeout_millis=10**9,
        compressed=False,
        body_crc32=register_body.crc32(body),
    )
    cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire(), body)
    assert roundtrip(sock, cmd)[0].code == ResponseCode.SUCCESS


def connect(port: int, source: str | None = None) -> socket.socket:
    sock = socket.socket()
    if source:  # another loopback address poses as another host
        sock.bind((source, 0))
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    return sock


def json_frame(header: bytes) -> bytes:
    return struct.pack(">II", 4 + len(header), len(header)) + header


def closed(sock: socket.socket, timeout: float = 30) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except OSError:
        return True
    except TimeoutError:
        return False


def deep_headers(port: int) -> dict[str, object]:
    refused = 0
    for size, count in ((2 * MIB, 40), (4 * MIB, 140)):
        for _ in range(count):
            sock = connect(port)
            with contextlib.suppress(OSError):
                sock.sendall(json_frame(b"[" * size))
            refused += closed(sock)
            sock.close()
    return {"frames": 180, "connections_closed": refused}


def padded_lookups(port: int) -> dict[str, object]:
    """1 MiB paddings pass server.max_header_size and close their connection; 60 KiB ones are
    answered, and never cached (a field upstream clients do not send)."""
    closed_big = 0
    for i in range(600):
        sock = connect(port)
        ext = {"topic": "Checked", f"pad{i}": "p" * MIB}
        with contextlib.suppress(OSError):
            sock.sendall(
                encode_command(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext))
            )
        closed_big += closed(sock)
        sock.close()
    sock = connect(port)
    ok = 0
    for i in range(600):
        ext = {"topic": "Checked", f"pad{i}": "p" * (60 * 1024)}
        resp, _ = roundtrip(sock, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext))
        ok += resp.code == ResponseCode.SUCCESS
    sock.close()
    return {"padded_1mib_closed": closed_big, "padded_60kib_answered": ok}


def unfinished_frames(port: int) -> dict[str, object]:
    socks = []
    for _ in range(80):
        sock = connect(port)
        with contextlib.suppress(OSError):
            sock.sendall(struct.pack(">I", 16 * MIB - 8) + b"\0" * (15 * MIB))
        socks.append(sock)
    time.sleep(4)  # past the (shortened) frame timeout
    gone = sum(closed(s, 5) for s in socks)
    for s in socks:
        s.close()
    return {"connections": 80, "bytes_each": 15 * MIB, "closed": gone}


def idle_connections(port: int) -> dict[str, object]:
    socks = []
    for _ in range(5_000):
        try:
            socks.append(connect(port))
        except OSError:
            break
    trickle = connect(port, "127.0.0.3")
    raw = encode_command(ROUTE)
    for i in range(8):  # a byte a second, never a whole frame
        try:
            trickle.sendall(raw[i : i + 1])
        except OSError:
            break
        time.sleep(1)
    gone = sum(closed(s, 5) for s in socks)
    trickle_closed = closed(trickle, 5)
    for s in [*socks, trickle]:
        s.close()
    return {"opened": len(socks), "closed": gone, "trickle_closed": trickle_closed}


def made_up_subscriptions(port: int) -> dict[str, object]:
    codes: dict[int, int] = {}
    socks = []
    for c in range(100):
        sock = connect(port)
        socks.append(sock)
        topics = [f"made-up-{c}-{n}" for n in range(10_000)]
        cmd = RemotingCommand.request(
            RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(topics, "x")
        )
        resp, _ = roundtrip(sock, cmd)
        codes[resp.code] = codes.get(resp.code, 0) + 1
    other = connect(port, "127.0.0.2")
    cmd = RemotingCommand.request(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(["Checked"], "y")
    )
    other_code = roundtrip(other, cmd)[0].code
    for s in [*socks, other]:
        s.close()
    return {"subscribe_answers": codes, "other_host_subscribe": other_code}


ROWS: list[tuple[str, Callable[..., dict[str, object]], str, int]] = [
    (
        "deep JSON headers, 40 x 2 MiB + 140 x 4 MiB",
        deep_headers,
        "server.max_buffered_input_bytes",
        DEFAULTS.server.max_buffered_input_bytes,
    ),
    (
        "600 lookups with a distinct 1 MiB padding field (and 600 with 60 KiB)",
        padded_lookups,
        "server.route_cache_bytes + output_buffer_bytes",
        DEFAULTS.server.route_cache_bytes + DEFAULTS.server.output_buffer_bytes,
    ),
    (
        "80 connections x 15 MiB of unfinished frames",
        unfinished_frames,
        "server.max_buffered_input_bytes",
        DEFAULTS.server.max_buffered_input_bytes,
    ),
    (
        "5,000 idle connections and a frame trickled a byte a second",
        idle_connections,
        "server.max_connections_per_host x 64 KiB (a generous cost per idle connection)",
        DEFAULTS.server.max_connections_per_host * 64 * 1024,
    ),
    (
        "100 connections x 10,000 made-up topics",
        made_up_subscriptions,
        "push.max_subscriptions_per_host: 100,000 x ~460 B (a subscription's cost)",
        100_000 * 460,
    ),
]


class RssSampler(threading.Thread):
    """The server's peak RSS, sampled every 20 ms while an attack runs."""

    def __init__(self, process: psutil.Process) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.peak = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.02):
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except psutil.Error:
                return

    def stop(self) -> None:
        self._halt.set()
        self.join()


SHORT_TIMEOUTS = {ROWS[2][0], ROWS[3][0]}
"""Rows run with idle and frame timeouts of 3 s instead of 120 s and 30 s."""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--row", type=int, action="append", help="run only these rows (1-based)")
    wanted = parser.parse_args().row
    failures = 0
    config = Path(tempfile.mkstemp(suffix=".toml")[1])
    config.write_text("[server]\nidle_timeout_ms = 3000\nframe_timeout_ms = 3000\n")
    for number, (title, attack, bound_name, bound) in enumerate(ROWS, 1):
        if wanted and number not in wanted:
            continue
        port = free_port()
        # frame_timeout_ms is a built-in limit: the file goes as --tuning.
        proc = start_namesrv(port, tuning=config if title in SHORT_TIMEOUTS else None)
        try:
            broker = connect(port)
            register(broker)
            checker = connect(port, "127.0.0.2")
            expected = roundtrip(checker, ROUTE)[0]

            server = psutil.Process(proc.pid)
            rss_before = server.memory_info().rss
            sampler = RssSampler(server)
            sampler.start()
            start = time.perf_counter()
            outcome = attack(port)
            sampler.stop()
            peak = max(rss_before, sampler.peak)
            # The bystander's connection must have lived through it, idle-timeout aside: use a
            # fresh one from another host when the row itself closes idle connections.
            if title in SHORT_TIMEOUTS:  # the broker's own connection idled out with the rest
                broker.close()
                broker = connect(port)
                register(broker)
            checker2 = connect(port, "127.0.0.2")
            answered = roundtrip(checker2, ROUTE)[0]
            served = answered.code == expected.code and answered.body == expected.body
            growth = peak - rss_before
            held = growth < bound or attack is made_up_subscriptions  # an estimate, not a bound
            failures += not (served and held and proc.poll() is None)
            print(
                json.dumps(
                    {
                        "row": title,
                        **outcome,
                        "seconds": round(time.perf_counter() - start, 1),
                        "rss_before_mib": round(rss_before / MIB, 1),
                        "rss_peak_mib": round(peak / MIB, 1),
                        "rss_growth_mib": round(growth / MIB, 1),
                        "bound": bound_name,
                        "bound_mib": round(bound / MIB, 1),
                        "bystander_served": served,
                        "server_alive": proc.poll() is None,
                    }
                ),
                flush=True,
            )
            for s in (broker, checker, checker2):
                s.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    config.unlink()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
