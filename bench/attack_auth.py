"""Replay the signature and metrics-port attacks against live name servers, from outside.

Each row starts fresh ``python -m namesrv`` processes on loopback, with access control on from a
config file, and attacks them as a peer on the network would:

- ``replay_elsewhere``: an admin's strong-signed PUT_KV_CONFIG to name server A is captured and
  sent to name server B, which has the same accounts. Reported: A's and B's answers and whether
  B's KV config changed.
- ``lockout_rightless`` / ``lockout_reader``: a key with no rights (then a key with read rights)
  sends 10,500 pipelined lookups stamped 28 s ahead of the clock, past the replay cache's bound;
  then the admin sends fresh PUT_KV_CONFIGs once a second. Reported: the flood's answers and how
  long the admin was refused (stale) before one was accepted.
- ``metrics_body``: an unauthenticated peer sends ``POST /metrics`` announcing a 1 GiB body and
  streams it (up to ``--body-mib``), with the bearer token on and off. Reported: the bytes the
  server took before closing, the most bytes of temporary files it held (its open files, read
  from /proc), and whether a scrape is still served.

``--root`` runs another checkout's server (an older commit: pass ``--strong-form v1`` for a
server whose strong form names no destination, and whose config has no ``server_identity``).

    python bench/attack_auth.py
    python bench/attack_auth.py --root ../base-checkout --strong-form v1
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import itertools
import json
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from local_processes import ROOT, free_port, roundtrip, start_namesrv, wait_port

from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command

SECRETS = {"ops": "ops-secret", "nobody": "nobody-secret", "reader": "reader-secret"}
OPS_AND_NOBODY = """
[[acl.accounts]]
access_key = "ops"
secret_key = "ops-secret"
admin = true
signature = "strong"
[[acl.accounts]]
access_key = "nobody"
secret_key = "nobody-secret"
read = false
signature = "strong"
"""
"""The admin and the account that may read nothing, both signing strongly (attack_round2 too)."""
ACCOUNTS = f"""{OPS_AND_NOBODY}[[acl.accounts]]
access_key = "reader"
secret_key = "reader-secret"
signature = "strong"
"""
FLOOD = 10_500
AHEAD_MS = 28_000
CACHE_ENTRIES = 10_000
"""The replay cache's total bound in these runs: the flood passes it."""

_nonces = itertools.count()


def strong_sign(
    code: int, ext: dict[str, str], key: str, form: str, server: str, ahead_ms: int = 0
) -> dict[str, str]:
    """The strong form as docs/config.md states it (``v1``: no destination; ``v2``: with
    ``SignServer``), written here so one script attacks servers of either form."""
    fields = dict(ext)
    fields.update(
        AccessKey=key,
        SignatureForm=f"strong-{form}",
        SignTimestamp=str(time.time_ns() // 1_000_000 + ahead_ms),
        SignNonce=f"bench-nonce-{os.getpid()}-{next(_nonces):09d}",
    )
    if form == "v2":
        fields["SignServer"] = server
    secret = SECRETS[key].encode()
    derived = hmac.new(
        secret, b"rocketmq-namesrv strong request signature key v1", hashlib.sha256
    ).digest()

    def netstring(data: bytes) -> bytes:
        return b"%d:%s," % (len(data), data)

    content = b"rocketmq-namesrv-strong-%s\n%d\n" % (form.encode(), code)
    for name in sorted(fields):
        content += netstring(name.encode()) + netstring(fields[name].encode())
    content += netstring(b"")
    mac = hmac.new(derived, content, hashlib.sha256).digest()
    fields["Signature"] = base64.b64encode(mac).decode()
    return fields


def config_file(tmp: Path, name: str, form: str, identity: str, extra: str = "") -> Path:
    path = tmp / f"{name}.toml"
    acl = f"[acl]\nenabled = true\nreplay_cache_max_entries = {CACHE_ENTRIES}\n"
    if form == "v2":
        acl += f'server_identity = "{identity}"\n'
    path.write_text(extra + acl + ACCOUNTS)
    return path


class Server:
    def __init__(self, root: Path, tmp: Path, name: str, form: str, extra: str = "") -> None:
        self.port = free_port()
        self.identity = f"{name}.bench"
        # The file sets a built-in limit (the replay cache) besides settings: --tuning.
        self.proc = start_namesrv(
            self.port, root=root, tuning=config_file(tmp, name, form, self.identity, extra)
        )

    def ask(self, code: int, ext: dict[str, str]) -> RemotingCommand:
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            return roundtrip(sock, RemotingCommand.request(code, ext))[0]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def put_kv(value: str) -> dict[str, str]:
    return {"namespace": "NS", "key": "k", "value": value}


def answer(resp: RemotingCommand) -> str:
    try:
        name = ResponseCode(resp.code).name
    except ValueError:
        name = str(resp.code)
    return name if resp.code == ResponseCode.SUCCESS else f"{name}: {resp.remark}"


def kv_value(server: Server, form: str) -> str | None:
    ext = strong_sign(
        RequestCode.GET_KV_CONFIG, {"namespace": "NS", "key": "k"}, "ops", form, server.identity
    )
    resp = server.ask(RequestCode.GET_KV_CONFIG, ext)
    return resp.ext_fields.get("value") if resp.code == ResponseCode.SUCCESS else None


def replay_elsewhere(root: Path, tmp: Path, form: str) -> dict[str, Any]:
    a = Server(root, tmp, "ns-a", form)
    b = Server(root, tmp, "ns-b", form)
    try:
        captured = strong_sign(
            RequestCode.PUT_KV_CONFIG, put_kv("written-via-a"), "ops", form, a.identity
        )
        at_a = a.ask(RequestCode.PUT_KV_CONFIG, captured)
        at_b = b.ask(RequestCode.PUT_KV_CONFIG, captured)
        return {
            "row": "replay_elsewhere",
            "admin_at_a": answer(at_a),
            "captured_at_b": answer(at_b),
            "b_kv_after": kv_value(b, form),
        }
    finally:
        a.stop()
        b.stop()


def flood(port: int, key: str, identity: str, form: str) -> dict[str, int]:
    """``FLOOD`` pipelined lookups signed by ``key``, stamped ``AHEAD_MS`` ahead; answers by
    code."""
    frames = b"".join(
        encode_command(
            RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC,
                strong_sign(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC,
                    {"topic": "T"},
                    key,
                    form,
                    identity,
                    ahead_ms=AHEAD_MS,
                ),
                opaque=i + 1,
            )
        )
        for i in range(FLOOD)
    )
    counts: dict[str, int] = {}
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sender = threading.Thread(target=sock.sendall, args=(frames,))
        sender.start()
        decoder = FrameDecoder()
        seen = 0
        while seen < FLOOD:
            data = sock.recv(1 << 20)
            if not data:
                break
            for resp in decoder.feed(data):
                seen += 1
                name = ResponseCode(resp.code).name
                counts[name] = counts.get(name, 0) + 1
        sender.join()
    return counts


def lockout(root: Path, tmp: Path, form: str, key: str) -> dict[str, Any]:
    ns = Server(root, tmp, "ns-a", form)
    try:
        answers = flood(ns.port, key, ns.identity, form)
        flooded = time.monotonic()
        refusals: list[str] = []
        accepted_after = None
        while time.monotonic() - flooded < AHEAD_MS / 1000 + 5:
            ext = strong_sign(
                RequestCode.PUT_KV_CONFIG,
                put_kv(f"fresh-{len(refusals)}"),
                "ops",
                form,
                ns.identity,
            )
            resp = ns.ask(RequestCode.PUT_KV_CONFIG, ext)
            if resp.code == ResponseCode.SUCCESS:
                accepted_after = round(time.monotonic() - flooded, 1)
                break
            refusals.append(answer(resp))
            time.sleep(1.0)
        return {
            "row": f"lockout_{'rightless' if key == 'nobody' else key}",
            "flood_answers": answers,
            "admin_refused": len(refusals),
            "admin_first_refusal": refusals[0] if refusals else None,
            "admin_accepted_after_s": accepted_after,
        }
    finally:
        ns.stop()


def spooled_bytes(pid: int) -> int:
    """Bytes of regular files the process holds open that are not on its code path: the
    temporary files a web server spools request bodies to (deleted or not)."""
    total = 0
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
            if target.startswith("/") and ("(deleted)" in target or target.startswith("/tmp")):
                total += os.stat(fd).st_size
        except OSError:
            continue
    return total


def metrics_body(root: Path, tmp: Path, form: str, token: str, body_mib: int) -> dict[str, Any]:
    port = free_port()
    extra = f'[metrics]\nlisten = "127.0.0.1:{port}"\nbearer_token = "{token}"\n'
    ns = Server(root, tmp, "ns-a", form, extra)
    try:
        wait_port(port)
        peak = 0
        done = threading.Event()

        def watch() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, spooled_bytes(ns.proc.pid))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        sent = 0
        closed_by_server = False
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            sock.sendall(
                b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (1 << 30)
            )
            chunk = b"x" * (1 << 20)
            while sent < body_mib << 20:
                sock.sendall(chunk)
                sent += len(chunk)
        except (ConnectionError, TimeoutError, OSError):
            closed_by_server = True
        time.sleep(0.5)
        peak = max(peak, spooled_bytes(ns.proc.pid))
        try:
            reply = sock.recv(200).split(b"\r\n", 1)[0].decode(errors="replace")
        except OSError as exc:
            reply = f"({exc.__class__.__name__})"
        sock.close()
        done.set()
        watcher.join()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics",
            headers={"Authorization": f"Bearer {token}"} if token else {},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                scrape = resp.status
        except urllib.error.HTTPError as err:
            scrape = err.code
        return {
            "row": f"metrics_body(token {'on' if token else 'off'})",
            "body_bytes_sent": sent,
            "closed_by_server": closed_by_server,
            "answer": reply,
            "peak_spooled_bytes": peak,
            "scrape_after": scrape,
        }
    finally:
        ns.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose server runs")
    parser.add_argument("--strong-form", choices=["v1", "v2"], default="v2")
    parser.add_argument("--body-mib", type=int, default=256, help="body bytes streamed at most")
    parser.add_argument(
        "--rows", default="replay,lockout,metrics", help="comma list: replay,lockout,metrics"
    )
    args = parser.parse_args()
    rows = set(args.rows.split(","))
    root, form = args.root.resolve(), args.strong_form
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        results: list[dict[str, Any]] = []
        if "replay" in rows:
            results.append(replay_elsewhere(root, tmp, form))
        if "lockout" in rows:
            results.append(lockout(root, tmp, form, "nobody"))
            results.append(lockout(root, tmp, form, "reader"))
        if "metrics" in rows:
            for token in ("s3cret-token", ""):
                results.append(metrics_body(root, tmp, form, token, args.body_mib))
        for result in results:
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
