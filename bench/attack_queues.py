"""Replay the queue, answer and connection-cap attacks against a live name server.

Each row starts a fresh ``python -m namesrv`` on 127.0.0.1 (of the checkout at ``--root``, so
the same script measures an older commit too), runs one attack from outside, and reports the
server's RSS growth, how an honest client fared meanwhile (route lookups from 127.0.0.9, one
every 20 ms: median and worst latency, and how many got no answer within 5 s), and the state
left behind.

    python bench/attack_queues.py                 # this checkout
    python bench/attack_queues.py --root ../old   # another checkout, same attacks

Rows:

1. ``pipelined-registers``: one connection pipelines 60 REGISTER_BROKER frames of one broker
   address, 5.7 MB each (15,000 topics with 126-character names, plain JSON, each with a new
   data version and another perm for its last topic, so none is a heartbeat), then closes.
   The server reads register bodies in slices of 4 KiB here (``registry.register_read_slice_
   bytes``) and decodes every body whole (no chunk cache), so each is as slow to serve as a
   register of millions of topics while the registry does not grow: the registers queue
   behind each other while the connection is read.
2. ``unread-listings``: a registry of 100,000 topics with 126-character names (a 13 MB topic
   list); 30 connections each ask GET_ALL_TOPIC_LIST_FROM_NAMESERVER once and never read.
3. ``silent-subscribers``: ``server.max_connections`` = 200; 198 connections from 127.0.0.2
   and 127.0.0.3 each SUBSCRIBE once and stay silent (with the honest client and its broker
   the bound is full); then one newcomer from each of 127.0.0.4 .. 127.0.0.7 asks a lookup.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
from hostile_clients import RssSampler, connect
from local_processes import ROOT, free_port, roundtrip, start_namesrv

from namesrv.config import MIB
from protocol import register_body
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand, encode_command
from protocol.headers import RegisterBrokerRequestHeader
from protocol.push_codec import encode_subscribe
from protocol.route_model import DataVersion, TopicConfig

PROBE_TOPIC = "Checked"


def long_names(count: int, start: int = 0) -> list[str]:
    return [f"{'L' * 120}{n:06d}" for n in range(start, start + count)]


def register_command(
    names: list[str], name: str, addr: str, *, compressed: bool, version: int = 1
) -> RemotingCommand:
    wrapper = register_body.TopicConfigSerializeWrapper(
        {n: TopicConfig(n, 4, 4, 6) for n in names}, DataVersion(0, version, version), {}
    )
    body = register_body.RegisterBrokerBody(wrapper, []).to_wire(compressed=compressed)
    header = RegisterBrokerRequestHeader(
        broker_name=name,
        broker_addr=addr,
        cluster_name="c",
        ha_server_addr=addr,
        broker_id=0,
        heartbeat_timeout_millis=10**9,
        compressed=compressed,
        body_crc32=register_body.crc32(body),
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire(), body)


class Prober(threading.Thread):
    """The honest client: a route lookup every 20 ms from 127.0.0.9 on its own connection."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.latencies: list[float] = []
        self.failures = 0
        self._halt = threading.Event()

    def run(self) -> None:
        sock: socket.socket | None = None
        lookup = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": PROBE_TOPIC})
        while not self._halt.wait(0.02):
            start = time.perf_counter()
            try:
                if sock is None:
                    sock = connect(self.port, "127.0.0.9")
                    sock.settimeout(5)
                answer = roundtrip(sock, lookup)[0]
                if answer.code != ResponseCode.SUCCESS:
                    raise ConnectionError(answer.code)
                self.latencies.append(time.perf_counter() - start)
            except (OSError, ConnectionError):
                self.failures += 1
                if sock is not None:
                    sock.close()
                sock = None
        if sock is not None:
            sock.close()

    def stop(self) -> dict[str, object]:
        self._halt.set()
        self.join()
        lat = sorted(self.latencies)
        return {
            "honest_lookups": len(lat),
            "honest_p50_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
            "honest_max_ms": round(lat[-1] * 1000, 1) if lat else None,
            "honest_failed": self.failures,
        }


def plain_register(names: list[str], version: int, last_perm: int) -> RemotingCommand:
    """A plain register body as a broker writes it, built fast: each ``version`` differs from
    the others in the data version and the last topic's perm, so none is a heartbeat."""
    table = {
        n: {
            "perm": 6,
            "readQueueNums": 4,
            "topicFilterType": "SINGLE_TAG",
            "topicName": n,
            "topicSysFlag": 0,
            "writeQueueNums": 4,
        }
        for n in names
    }
    table[names[-1]]["perm"] = last_perm
    doc = {
        "filterServerList": [],
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": version, "stateVersion": 0, "timestamp": version},
            "topicConfigTable": table,
        },
    }
    body = json.dumps(doc, separators=(",", ":")).encode()
    header = RegisterBrokerRequestHeader(
        broker_name="big",
        broker_addr="10.0.0.9:10911",
        cluster_name="c",
        ha_server_addr="10.0.0.9:10912",
        broker_id=0,
        heartbeat_timeout_millis=10**9,
        compressed=False,
        body_crc32=register_body.crc32(body),
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire(), body)


def pipelined_registers(port: int) -> dict[str, object]:
    names = long_names(15_000)
    frames = [encode_command(plain_register(names, v, 6 if v % 2 else 4)) for v in range(1, 61)]
    sock = connect(port, "127.0.0.4")
    sent = 0

    def send() -> None:
        nonlocal sent
        with contextlib.suppress(OSError):
            for frame in frames:
                sock.sendall(frame)
                sent += 1

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sender.join(timeout=20)
    sock.close()  # whatever was not read yet goes with the connection
    sender.join(timeout=5)
    time.sleep(3)  # what the server does with a closed connection's registers
    return {"frame_mib": round(len(frames[0]) / MIB, 1), "frames_sent": sent}


def unread_listings(port: int) -> dict[str, object]:
    broker = connect(port, "127.0.0.5")
    for b in range(4):
        names = long_names(25_000, b * 25_000)
        cmd = register_command(names, f"b{b}", f"10.0.1.{b}:10911", compressed=True)
        assert roundtrip(broker, cmd)[0].code == ResponseCode.SUCCESS
    reader = connect(port, "127.0.0.6")
    _listing, raw = roundtrip(
        reader, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    )
    reader.close()
    hogs = []
    for n in range(30):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind((f"127.0.0.{2 + n % 2}", 0))
        sock.connect(("127.0.0.1", port))
        sock.sendall(
            encode_command(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        )
        hogs.append(sock)
    time.sleep(8)
    for sock in hogs:
        sock.close()
    broker.close()
    return {"listing_mib": round(len(raw) / MIB, 1), "unread_connections": len(hogs)}


def silent_subscribers(port: int) -> dict[str, object]:
    hogs = []
    for n in range(198):
        sock = connect(port, f"127.0.0.{2 + n % 2}")
        cmd = RemotingCommand.request(
            RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe([f"t{n}"], "g")
        )
        if roundtrip(sock, cmd)[0].code != ResponseCode.SUCCESS:
            break
        hogs.append(sock)
    time.sleep(1)
    served = 0
    lookup = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": PROBE_TOPIC})
    newcomers = []
    for host in range(4, 8):
        try:
            sock = connect(port, f"127.0.0.{host}")
            sock.settimeout(5)
            served += roundtrip(sock, lookup)[0].code == ResponseCode.SUCCESS
            newcomers.append(sock)
        except (OSError, ConnectionError):
            pass
    alive = 0
    for sock in hogs:  # a connection the server closed reads as closed at once
        sock.setblocking(False)
        try:
            alive += sock.recv(1) != b""
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    for sock in [*hogs, *newcomers]:
        sock.close()
    return {
        "subscribed": len(hogs),
        "newcomers_served": served,
        "newcomers": 4,
        "subscribers_left_open": alive,
    }


ROWS: dict[str, tuple[Callable[[int], dict[str, object]], str]] = {
    "pipelined-registers": (
        pipelined_registers,
        "[registry]\nregister_read_slice_bytes = 4096\nregister_chunk_cache_bytes = 0\n",
    ),
    "unread-listings": (unread_listings, ""),
    "silent-subscribers": (
        silent_subscribers,
        "[server]\nmax_connections = 200\nmax_connections_per_host = 200\n",
    ),
}


def broker_for_probe(port: int) -> socket.socket:
    sock = connect(port, "127.0.0.8")
    cmd = register_command([PROBE_TOPIC], "probe", "10.0.0.1:10911", compressed=False)
    assert roundtrip(sock, cmd)[0].code == ResponseCode.SUCCESS
    return sock


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout to run the server of")
    parser.add_argument("--row", action="append", choices=list(ROWS), help="only these rows")
    args = parser.parse_args()
    for title, (attack, config_text) in ROWS.items():
        if args.row and title not in args.row:
            continue
        config = None
        if config_text:
            config = Path(tempfile.mkstemp(suffix=".toml")[1])
            config.write_text(config_text)
        port = free_port()
        # The rows' files set built-in limits (slice sizes) as well as settings.
        proc = start_namesrv(port, root=args.root.resolve(), tuning=config)
        try:
            broker = broker_for_probe(port)
            server = psutil.Process(proc.pid)
            rss_before = server.memory_info().rss
            cpu_before = sum(server.cpu_times()[:2])
            sampler = RssSampler(server)
            prober = Prober(port)
            sampler.start()
            prober.start()
            start = time.perf_counter()
            outcome = attack(port)
            honest = prober.stop()
            sampler.stop()
            rss_after = server.memory_info().rss
            print(
                json.dumps(
                    {
                        "row": title,
                        **outcome,
                        **honest,
                        "seconds": round(time.perf_counter() - start, 1),
                        "server_cpu_s": round(sum(server.cpu_times()[:2]) - cpu_before, 1),
                        "rss_before_mib": round(rss_before / MIB, 1),
                        "rss_peak_growth_mib": round((sampler.peak - rss_before) / MIB, 1),
                        "rss_after_growth_mib": round((rss_after - rss_before) / MIB, 1),
                        "server_alive": proc.poll() is None,
                    }
                ),
                flush=True,
            )
            broker.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            if config is not None:
                config.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
