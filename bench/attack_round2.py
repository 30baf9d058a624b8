"""Repeat the second security round's attacks against a live name server, from outside.

Each row starts ``python -m namesrv`` at its defaults, in a home directory of its own (so the
KV config file and the replay record sit at their default paths), with its log at the default
level (INFO) written to a file and its journal on in a temporary directory (so both can be
measured); a row adds only the config it names. The attack runs over loopback as a client,
broker or scraper would, while an honest bystander on 127.0.0.9 looks up a route every 20 ms.
Rows whose attack is a request access control judges run twice: ACL off, then ACL on (the
attacker signs as an account without the right, or as a broker key for broker requests).
One JSON line a row:

- ``honest``: the bystander's lookups, median and worst latency (ms), lookups unanswered
  within 5 s: the worst latency is the longest the reactor was held, at most;
- ``rss``: the server's peak and final RSS growth over the attack (MiB);
- ``log_bps`` / ``journal_bps``: bytes the server logged (journaled) per second of the attack;
- what the attack got and whether it changed the server's state (row by row).

Rows (the numbers of docs/security.md's second round):

1. UPDATE_NAMESRV_CONFIG naming 200,000 and 900,000 unknown keys, 10 times each;
3. 1.5 million tiny PUT_KV_CONFIG entries pipelined, then GET_KVLIST_BY_NAMESPACE 20 times;
4. PUT_KV_CONFIG of 1,000-byte values until refused: RSS against ``max_kv_config_bytes``;
5. a broker of 60,000 topics, ORDER_TOPIC_CONFIG filled for each, ``orderMessageEnable``
   toggled 20 times;
7. 200 REGISTER_TOPIC_IN_NAMESRV naming 7,747 unknown brokers; 20 brokers with
   ``heartbeatTimeoutMillis=10`` and 30 KB cluster names re-registering every second;
8. names carrying a line break and a forged log line (wipe perm, unknown broker, expiry);
9. strong-signed PUT_KV_CONFIG and WIPE_WRITE_PERM stamped 60 s ahead, captured, the server
   restarted at its defaults, the bytes sent again (and, for comparison, the same with the
   record turned off);
12. 5 metrics connections pipelining 3,000 GETs each, never reading, 15 s;
13. ``namesrv-admin`` printing broker, cluster names and KV values holding escape sequences;
15. KV writes to the bound and 20,000 rewrites at the default file path; a sandbox stand-in
    sent 200 messages of 1 MiB.

    python bench/attack_round2.py
    python bench/attack_round2.py --row 9 --row 12 --acl off
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
from attack_auth import OPS_AND_NOBODY
from attack_queues import PROBE_TOPIC, Prober, register_command
from hostile_clients import RssSampler, connect
from local_processes import ROOT, free_port, roundtrip, start_namesrv, wait_port

from namesrv.config import MIB, NamesrvConfig
from protocol import bodies, signing
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command
from protocol.message import encode_message, send_header
from protocol.route_model import QueueData, TopicRouteData

IDENTITY = "ns.bench"
SECRETS = {"ops": "ops-secret", "nobody": "nobody-secret", "broker": "broker-secret"}
ACL_TEXT = f"""
[acl]
enabled = true
server_identity = "{IDENTITY}"{OPS_AND_NOBODY}[[acl.accounts]]
access_key = "broker"
secret_key = "broker-secret"
brokers = ["*"]
signature = "upstream"
"""
KV_BOUND = NamesrvConfig().registry.max_kv_config_bytes
FORGED = "x\n2026-01-01 00:00:00,000 ERROR namesrv.server: FORGED"
TITLE = "\x1b]0;owned\x07"
EVIL_BROKER = f"b{TITLE}\x1b[2J\nFORGED\x9b31m\u202e"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")
_nonces = itertools.count()


def code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


@dataclass
class Target:
    """A running server and how to sign for it."""

    port: int
    proc: subprocess.Popen[bytes]
    home: Path
    acl: bool
    config: Path
    log: Path
    journal: Path
    metrics_port: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def sign(self, cmd: RemotingCommand, key: str, ahead_ms: int = 0) -> RemotingCommand:
        """``cmd`` signed by ``key`` when ACL is on (strong form, or upstream's for brokers)."""
        if not self.acl:
            return cmd
        if key == "broker":
            ext = signing.sign_upstream(cmd.ext_fields, cmd.body, key, SECRETS[key])
        else:
            ext = signing.sign_strong(
                cmd.code,
                cmd.ext_fields,
                cmd.body,
                key,
                signing.strong_key(SECRETS[key]),
                time.time_ns() // 1_000_000 + ahead_ms,
                f"r2-{os.getpid()}-{next(_nonces):010d}",
                IDENTITY,
            )
        return RemotingCommand.request(cmd.code, ext, cmd.body)

    def ask(self, cmd: RemotingCommand, key: str | None = "ops") -> RemotingCommand:
        """``cmd``'s answer on a connection of its own; signed by ``key`` unless None."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=60) as sock:
            return roundtrip(sock, cmd if key is None else self.sign(cmd, key))[0]

    def kv(self, namespace: str, key: str) -> str | None:
        ext = {"namespace": namespace, "key": key}
        resp = self.ask(RemotingCommand.request(RequestCode.GET_KV_CONFIG, ext), None)
        return resp.ext_fields.get("value") if resp.code == ResponseCode.SUCCESS else None


def put_kv(namespace: str, key: str, value: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value}
    )


def update_config(body: bytes) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)


def pipeline(
    port: int, commands: Iterable[RemotingCommand], source: str = "127.0.0.4"
) -> Counter[str]:
    """Send ``commands`` on one connection as fast as the server reads them, reading the
    answers meanwhile; the answers counted by code."""
    sock = connect(port, source)
    sock.settimeout(120)
    sent = [0]
    done = threading.Event()

    def send() -> None:
        batch: list[bytes] = []
        with suppress(OSError):
            for n, cmd in enumerate(commands, 1):
                cmd.opaque = n
                batch.append(encode_command(cmd))
                if len(batch) == 2_000:
                    sock.sendall(b"".join(batch))
                    sent[0] = n
                    batch.clear()
            if batch:
                sock.sendall(b"".join(batch))
            sent[0] = n
        done.set()

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    decoder = FrameDecoder()
    counts: Counter[str] = Counter()
    seen = 0
    try:
        while not (done.is_set() and seen >= sent[0]):
            data = sock.recv(1 << 20)
            if not data:
                counts["closed"] += 1
                break
            for resp in decoder.feed(data):
                seen += 1
                counts[code_name(resp.code)] += 1
    finally:
        sock.close()
        sender.join(timeout=10)
    return counts


class ProbeBroker(threading.Thread):
    """The broker of the bystander's topic, registering every 20 s as a broker does (a row
    outlasts the broker expiry)."""

    def __init__(self, t: Target) -> None:
        super().__init__(daemon=True)
        self.sock = connect(t.port, "127.0.0.8")
        self.command = t.sign(
            register_command([PROBE_TOPIC], "probe", "10.0.0.1:10911", compressed=False), "broker"
        )
        self.target = t
        self._halt = threading.Event()
        self.register()

    def register(self) -> None:
        cmd = self.command
        if self.target.acl:  # the upstream form carries no stamp: the same bytes sign again
            cmd = RemotingCommand.request(cmd.code, dict(cmd.ext_fields), cmd.body)
        resp = roundtrip(self.sock, cmd)[0]
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    def run(self) -> None:
        while not self._halt.wait(20):
            with suppress(OSError, ConnectionError, AssertionError):
                self.register()

    def close(self) -> None:
        self._halt.set()
        self.join()
        self.sock.close()


def broker_register(
    t: Target,
    name: str,
    cluster: str,
    topics: list[str],
    *,
    addr: str = "10.9.0.1:10911",
    heartbeat_ms: int | None = None,
) -> RemotingCommand:
    """A broker's register, each broker at an address of its own (with ACL on, an address
    belongs to the broker live at it)."""
    cmd = register_command(topics, name, addr, compressed=False)
    cmd.ext_fields["clusterName"] = cluster
    if heartbeat_ms is not None:
        cmd.ext_fields["heartbeatTimeoutMillis"] = str(heartbeat_ms)
    return t.sign(cmd, "broker")


def unknown_brokers_route(count: int) -> bytes:
    queues = [QueueData(f"{'b' * 50}{i}", 4, 4, 6, 0) for i in range(count)]
    return bodies.encode_route(
        TopicRouteData(queue_datas=queues, broker_datas=[]), standard_json=True
    )


# --- the rows -------------------------------------------------------------------------------


def row1_config_unknown_keys(t: Target) -> dict[str, Any]:
    before = t.ask(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG)).body
    out: dict[str, Any] = {}
    for label, body in (
        ("200k", b"".join(b"unknown.key.%d=1\n" % i for i in range(200_000))),
        ("900k", b"".join(b"k%d=1\n" % i for i in range(900_000))),
    ):
        answers: Counter[str] = Counter()
        longest = 0
        sock = connect(t.port, "127.0.0.4")
        sock.settimeout(60)
        for _ in range(10):
            resp = roundtrip(sock, t.sign(update_config(body), "nobody"))[0]
            answers[code_name(resp.code)] += 1
            longest = max(longest, len(resp.remark or ""))
        sock.close()
        out[f"{label}_body_mib"] = round(len(body) / MIB, 1)
        out[f"{label}_answers"] = dict(answers)
        out[f"{label}_longest_remark"] = longest
    after = t.ask(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG)).body
    out["state_changed"] = before != after
    return out


def kv_file(t: Target) -> Path:
    return t.home / "namesrv" / "kvConfig.json"


def row3_kv_tiny_entries(t: Target) -> dict[str, Any]:
    count = int(1_500_000 * t.extra.get("scale", 1.0))
    puts = (t.sign(put_kv("n", f"{i:x}", "v"), "nobody") for i in range(count))
    answers = pipeline(t.port, puts)
    listing = 0
    sock = connect(t.port, "127.0.0.5")
    sock.settimeout(60)
    for _ in range(20):
        _resp, raw = roundtrip(
            sock, RemotingCommand.request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "n"})
        )
        listing = len(raw)
    sock.close()
    time.sleep(2)  # the file's last write
    path = kv_file(t)
    return {
        "puts": count,
        "answers": dict(answers),
        "listing_mib": round(listing / MIB, 1),
        "kv_file_mib": round(path.stat().st_size / MIB, 1) if path.exists() else 0,
        "kv_bound_mib": round(KV_BOUND / MIB, 1),
        "state_changed": answers.get("SUCCESS", 0) > 0,
    }


def row4_kv_memory(t: Target) -> dict[str, Any]:
    value = "v" * 1_000
    count = KV_BOUND // 1_000 + 2_000
    puts = (t.sign(put_kv("big", f"k{i}", value), "nobody") for i in range(count))
    answers = pipeline(t.port, puts)
    stored = answers.get("SUCCESS", 0)
    return {
        "puts": count,
        "answers": dict(answers),
        "stored_text_mib": round(stored * 1_000 / MIB, 1),
        "kv_bound_mib": round(KV_BOUND / MIB, 1),
        "state_changed": stored > 0,
    }


def row5_order_toggle(t: Target) -> dict[str, Any]:
    topics = [f"T{i:06d}" for i in range(60_000)]
    broker = connect(t.port, "127.0.0.6")
    cmd = register_command(topics, "order-broker", "10.0.2.1:10911", compressed=True)
    resp = roundtrip(broker, t.sign(cmd, "broker"))[0]
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    setup = pipeline(
        t.port,
        (t.sign(put_kv("ORDER_TOPIC_CONFIG", topic, "order-broker:4"), "ops") for topic in topics),
        source="127.0.0.7",
    )
    t.extra["prober_reset"]()
    answers: Counter[str] = Counter()
    sock = connect(t.port, "127.0.0.4")
    for n in range(20):
        flag = b"true" if n % 2 == 0 else b"false"
        resp = roundtrip(sock, t.sign(update_config(b"orderMessageEnable=%s\n" % flag), "nobody"))[
            0
        ]
        answers[code_name(resp.code)] += 1
        time.sleep(0.5)
    sock.close()
    time.sleep(2)
    route = t.ask(
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topics[-1]})
    )
    conf = bodies.decode_route(route.body).order_topic_conf
    broker.close()
    return {
        "order_entries": setup.get("SUCCESS", 0),
        "toggles": dict(answers),
        "order_conf_in_route_after": conf is not None,
        "state_changed": answers.get("SUCCESS", 0) > 0,
    }


def row7_log_flood(t: Target) -> dict[str, Any]:
    body = unknown_brokers_route(7_747)
    answers: Counter[str] = Counter()
    sock = connect(t.port, "127.0.0.4")
    sock.settimeout(60)
    for i in range(200):
        cmd = RemotingCommand.request(
            RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": f"T{i}"}, body
        )
        answers[code_name(roundtrip(sock, t.sign(cmd, "nobody"))[0].code)] += 1
    sock.close()
    brokers = [connect(t.port, "127.0.0.5") for _ in range(20)]
    registers: Counter[str] = Counter()
    for _round in range(12):
        for n, conn in enumerate(brokers):
            cmd = broker_register(
                t, f"hb{n}", "c" * 30_000, [f"H{n}"], addr=f"10.9.1.{n}:10911", heartbeat_ms=10
            )
            registers[code_name(roundtrip(conn, cmd)[0].code)] += 1
        time.sleep(1)
    for conn in brokers:
        conn.close()
    return {
        "register_topic_answers": dict(answers),
        "route_body_kib": round(len(body) / 1024),
        "broker_registers": dict(registers),
    }


def row8_forged_lines(t: Target) -> dict[str, Any]:
    sock = connect(t.port, "127.0.0.4")
    wipe = RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": FORGED})
    answers = [code_name(roundtrip(sock, t.sign(wipe, "nobody"))[0].code)]
    route = bodies.encode_route(
        TopicRouteData(queue_datas=[QueueData(FORGED, 4, 4, 6, 0)], broker_datas=[]),
        standard_json=True,
    )
    cmd = RemotingCommand.request(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "T"}, route)
    answers.append(code_name(roundtrip(sock, t.sign(cmd, "nobody"))[0].code))
    broker = connect(t.port, "127.0.0.5")
    cmd = broker_register(t, FORGED, FORGED, ["F1"], heartbeat_ms=10)
    answers.append(code_name(roundtrip(broker, cmd)[0].code))
    sock.close()
    time.sleep(8)  # the 1 s floor, then the next 5 s scan expires it (its connection open)
    broker.close()
    lines = t.log.read_text(errors="replace").splitlines()
    journal_lines = [
        line for path in t.journal.rglob("*") if path.is_file() for line in read_lines(path)
    ]
    bad_journal = 0
    for line in journal_lines:
        try:
            json.loads(line)
        except ValueError:
            bad_journal += 1
    return {
        "answers": answers,
        "log_lines_naming_forged": sum("FORGED" in line for line in lines),
        "log_lines_starting_forged": sum(
            line.startswith("2026-01-01 00:00:00,000") for line in lines
        ),
        "expiry_logged": any("expired" in line and "FORGED" in line for line in lines),
        "journal_lines_not_json": bad_journal,
    }


def read_lines(path: Path) -> list[str]:
    if path.suffix == ".gz":
        import gzip

        return gzip.decompress(path.read_bytes()).decode(errors="replace").splitlines()
    return path.read_text(errors="replace").splitlines()


def row12_metrics_pipelined(t: Target) -> dict[str, Any]:
    assert t.metrics_port is not None
    hogs = []
    pipelined = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 3_000
    for _ in range(5):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", t.metrics_port))
        sock.setblocking(False)
        hogs.append(sock)
    offsets = [0] * 5
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for n, sock in enumerate(hogs):
            with suppress(BlockingIOError):
                offsets[n] += sock.send(pipelined[offsets[n] :])
        time.sleep(0.05)
    with urllib.request.urlopen(f"http://127.0.0.1:{t.metrics_port}/metrics", timeout=10) as page:
        scrape = page.status
    for sock in hogs:
        sock.close()
    return {
        "gets_sent_per_connection": [o // 35 for o in offsets],
        "gets_pipelined": 3_000,
        "scrape_during": scrape,
    }


def row13_admin_escapes(t: Target) -> dict[str, Any]:
    broker = connect(t.port, "127.0.0.5")
    cmd = register_command(["T"], EVIL_BROKER, "10.0.3.1:10911", compressed=False)
    cmd.ext_fields["clusterName"] = f"c\x1b[31m{TITLE}"
    assert roundtrip(broker, t.sign(cmd, "broker"))[0].code == ResponseCode.SUCCESS
    put = t.ask(put_kv("n", "k", f"v{TITLE}"))
    raw = 0
    printed = 0
    verbs = [["cluster-list"], ["topic-route", "T"], ["kv", "get", "n", "k"]]
    for verb in [*verbs, *(["--json", *v] for v in verbs)]:
        args = [sys.executable, "-m", "namesrv.admin", "--namesrv", f"127.0.0.1:{t.port}", *verb]
        done = subprocess.run(
            args, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60
        )
        out = done.stdout.decode(errors="replace")
        printed += len(out)
        raw += sum(out.count(c) for c in RAW_CONTROLS)
    broker.close()
    return {
        "kv_put": code_name(put.code),
        "admin_runs": len(verbs) * 2,
        "chars_printed": printed,
        "raw_control_chars_printed": raw,
    }


def row15_kv_persistence(t: Target) -> dict[str, Any]:
    value = "p" * 1_000
    fill = KV_BOUND // 1_300
    puts = itertools.chain(
        (t.sign(put_kv("p", f"k{i}", value), "ops") for i in range(fill)),
        (t.sign(put_kv("p", f"k{i % fill}", f"{i}{value}"), "ops") for i in range(20_000)),
    )
    answers = pipeline(t.port, puts)
    time.sleep(3)
    path = kv_file(t)
    table = json.loads(path.read_text())["configTable"].get("p", {})
    return {
        "puts": fill + 20_000,
        "answers": dict(answers),
        "kv_file_mib": round(path.stat().st_size / MIB, 1),
        "file_entries": len(table),
        "file_is_whole_json": True,
    }


def row15_sandbox_messages(t: Target) -> dict[str, Any]:
    control = free_port()
    sandbox = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "namesrv_sandbox",
            "--namesrv",
            f"127.0.0.1:{t.port}",
            "--control",
            f"127.0.0.1:{control}",
            "--broker",
            "broker-m",
            "--topic",
            "M:1",
        ],
        env=dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(t.home)),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(control)
        addr = broker_addr(t, "broker-m")
        host, port = addr.rsplit(":", 1)
        proc = psutil.Process(sandbox.pid)
        before = proc.memory_info().rss
        sampler = RssSampler(proc)
        sampler.start()
        sock = socket.create_connection((host, int(port)), timeout=60)
        answers: Counter[str] = Counter()
        for i in range(200):
            message = encode_message("M", os.urandom(MIB), uniq_key=f"u{i}", compress_over=MIB + 1)
            header = send_header(
                message, producer_group="g", queue_id=0, broker_name="broker-m", born_timestamp_ms=1
            )
            cmd = RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2, header.to_wire(), message.body
            )
            answers[code_name(roundtrip(sock, cmd)[0].code)] += 1
        sock.close()
        sampler.stop()
        return {
            "messages_mib": 200,
            "answers": dict(answers),
            "sandbox_rss_peak_growth_mib": round((sampler.peak - before) / MIB, 1),
            "sandbox_rss_after_growth_mib": round((proc.memory_info().rss - before) / MIB, 1),
            "keep_message_bytes_mib": 16,
        }
    finally:
        sandbox.terminate()
        sandbox.wait(timeout=30)


def broker_addr(t: Target, name: str) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        resp = t.ask(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        table = bodies.decode_cluster_info(resp.body).broker_addr_table
        if name in table:
            return next(iter(table[name].broker_addrs.values()))
        time.sleep(0.2)
    raise RuntimeError(f"{name} never registered")


# --- row 9: a restart between capture and replay --------------------------------------------


def row9_replay_restart(acl_text: str, record: str) -> dict[str, Any]:
    """Captured before a restart, replayed after: ``record`` is the replay record setting."""
    home = Path(tempfile.mkdtemp(prefix="routepush-r2-home-"))
    config = home / "namesrv.toml"
    extra = "" if record == "default" else f'replay_record_path = "{record}"\n'
    config.write_text(acl_text.replace("[acl]\n", f"[acl]\n{extra}", 1))
    with serving(config, home, acl=True) as t:
        captured = [
            t.sign(put_kv("NS", "k", "old"), "ops", ahead_ms=60_000),
            t.sign(
                RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b"}),
                "ops",
                ahead_ms=60_000,
            ),
        ]
        first = [code_name(t.ask(cmd, None).code) for cmd in captured]
        newer = code_name(
            t.ask(t.sign(put_kv("NS", "k", "new"), "ops", ahead_ms=60_001), None).code
        )
    with serving(config, home, acl=True) as t, measured(t) as figures:
        again: Counter[str] = Counter()
        remark = ""
        for _ in range(500):  # the captured bytes, sent again and again
            for cmd in captured:
                resp = t.ask(cmd, None)
                again[code_name(resp.code)] += 1
                remark = remark or (resp.remark or "")
        figures.update(
            {
                "record": record,
                "first_run": [*first, newer],
                "replayed_after_restart": dict(again),
                "remark": remark[:160],
                "kv_after": t.kv("NS", "k"),
                "state_changed": t.kv("NS", "k") != "new",
            }
        )
    return figures


# --- running a row --------------------------------------------------------------------------


@contextmanager
def serving(
    config: Path, home: Path, *, acl: bool, metrics_port: int | None = None
) -> Iterator[Target]:
    port = free_port()
    log = home / "namesrv.log"
    journal = home / "journal"
    proc = start_namesrv(port, config, log=log, log_level="INFO", home=home)
    try:
        yield Target(port, proc, home, acl, config, log, journal, metrics_port)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


@contextmanager
def measured(t: Target) -> Iterator[dict[str, Any]]:
    """Figures of what runs inside: the bystander's lookups, RSS, log and journal bytes."""
    figures: dict[str, Any] = {}
    probe = ProbeBroker(t)
    probe.start()
    server = psutil.Process(t.proc.pid)
    rss_before = server.memory_info().rss
    log_before = t.log.stat().st_size
    journal_before = directory_bytes(t.journal)
    sampler = RssSampler(server)
    sampler.peak = rss_before
    prober = [Prober(t.port)]

    def reset() -> None:
        """Setup done: the figures start again here."""
        nonlocal rss_before, log_before, journal_before, start
        prober[0].stop()
        prober[0] = Prober(t.port)
        prober[0].start()
        rss_before = server.memory_info().rss
        sampler.peak = rss_before
        log_before = t.log.stat().st_size
        journal_before = directory_bytes(t.journal)
        start = time.perf_counter()

    t.extra["prober_reset"] = reset
    sampler.start()
    prober[0].start()
    start = time.perf_counter()
    try:
        yield figures
    finally:
        honest = prober[0].stop()
        sampler.stop()
        seconds = time.perf_counter() - start
        figures.update(
            {
                **honest,
                "seconds": round(seconds, 1),
                "rss_before_mib": round(rss_before / MIB, 1),
                "rss_peak_growth_mib": round((sampler.peak - rss_before) / MIB, 1),
                "rss_after_growth_mib": round((server.memory_info().rss - rss_before) / MIB, 1),
                "log_bps": round((t.log.stat().st_size - log_before) / seconds),
                "journal_bps": round((directory_bytes(t.journal) - journal_before) / seconds),
                "server_alive": t.proc.poll() is None,
            }
        )
        probe.close()


Attack = Callable[[Target], dict[str, Any]]
ROWS: dict[str, tuple[Attack, str, bool]] = {
    # name: (attack, extra config, whether ACL applies)
    "1-config-unknown-keys": (row1_config_unknown_keys, "", True),
    "3-kv-tiny-entries": (row3_kv_tiny_entries, "", True),
    "4-kv-memory": (row4_kv_memory, "", True),
    "5-order-toggle": (row5_order_toggle, "", True),
    "7-log-flood": (row7_log_flood, "", True),
    "8-forged-lines": (row8_forged_lines, "", True),
    "12-metrics-pipelined": (row12_metrics_pipelined, "", False),
    "13-admin-escapes": (row13_admin_escapes, "", False),
    "15-kv-persistence": (row15_kv_persistence, "", False),
    "15-sandbox-messages": (row15_sandbox_messages, "", False),
}


def run_row(name: str, attack: Attack, acl: bool, scale: float) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="routepush-r2-home-"))
    config = home / "namesrv.toml"
    text = f'[journal]\ndirectory = "{home / "journal"}"\n'
    metrics_port = None
    if name.startswith("12-"):
        metrics_port = free_port()
        text += f'[metrics]\nlisten = "127.0.0.1:{metrics_port}"\n'
    if acl:
        text += ACL_TEXT
    config.write_text(text)
    with serving(config, home, acl=acl, metrics_port=metrics_port) as t:
        t.extra["scale"] = scale
        with measured(t) as figures:
            figures.update(attack(t))
    return {"row": name, "acl": "on" if acl else "off", **figures}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--row", action="append", help="only rows whose name starts so (e.g. 9)")
    parser.add_argument("--acl", choices=["off", "on", "both"], default="both")
    parser.add_argument("--scale", type=float, default=1.0, help="row 3's 1.5 M puts times this")
    args = parser.parse_args()

    def wanted(name: str) -> bool:
        return not args.row or any(name.split("-")[0] == r for r in args.row)

    acls = {"off": [False], "on": [True], "both": [False, True]}[args.acl]
    for name, (attack, _extra, acl_applies) in ROWS.items():
        if not wanted(name):
            continue
        for acl in acls if acl_applies else [False]:
            print(json.dumps(run_row(name, attack, acl, args.scale)), flush=True)
    if wanted("9-"):
        for record in ("default", ":memory:"):
            print(
                json.dumps(
                    {
                        "row": "9-replay-restart",
                        "acl": "on",
                        **row9_replay_restart(ACL_TEXT, record),
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
