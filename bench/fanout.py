"""Fan-out of one route change to N subscribed connections, against a bare Twisted baseline.

For each tick interval and each N, in one run:

* the name server runs as its own process (push tick as given, pressure monitor off so a
  busy bench machine does not degrade it); a receiver process opens N connections and
  subscribes each to topic ``T``; a broker connection flips T's write perm once per round at a
  random phase of the tick. Reported: time from the change (the wipe/add request sent) to each
  connection receiving its NOTIFY, p50/p99 over all connections and rounds, and the fan-out
  time per round (last NOTIFY received minus the tick's ``emitted_at_ms``).
* the baseline: ``bare_fanout.py`` holds the same N connections and writes the very NOTIFY
  frame the name server sent, to each of them, when told to; fan-out time is last receipt
  minus the moment it was told.

The ratio is the fan-out rate (connections per second) of the name server over the baseline's.
With ``--inline`` every connection asks for inline routes, so each NOTIFY carries T's route
(and the baseline writes that larger frame).

    python bench/fanout.py [--conns 1000,10000] [--ticks 1000,10] [--rounds 15] [--inline]
"""

from __future__ import annotations

import argparse
import json
import random
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE), str(ROOT / "tests")]

from local_processes import free_port, percentile, roundtrip, start_namesrv, wait_port  # noqa: E402
from support.fake_broker import register_request, topic_configs  # noqa: E402

from protocol.codes import RequestCode  # noqa: E402
from protocol.frame import RemotingCommand, decode_frame, encode_command  # noqa: E402
from protocol.push_codec import decode_notification, encode_subscribe  # noqa: E402

TOPIC = "T"


# -- receiver role (its own process) -------------------------------------------------------


def receiver(
    port: int, conns: int, rounds: int, frame_out: str, ack_out: str, inline: bool = False
) -> None:
    """Hold ``conns`` subscribed connections; report per-round receive times on stdout."""
    subscribe = encode_command(
        RemotingCommand.request(
            RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
            body=encode_subscribe([TOPIC], "fanout-bench", inline),
            opaque=1,
        )
    )
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    for i in range(conns):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        socks.append(s)
        s.send(subscribe)
    buffers = [bytearray() for _ in range(conns)]
    frames = [0] * conns
    times = [[0.0] * conns for _ in range(rounds)]
    emitted: list[float] = [0.0] * rounds
    done_rounds = [0] * (rounds + 1)
    ready_count = 0
    finished = 0
    print("SUBSCRIBING", flush=True)
    deadline = time.time() + 600
    while finished < conns and time.time() < deadline:
        for key, _ in sel.select(timeout=1.0):
            now = time.time()
            i = key.data
            data = key.fileobj.recv(262144)  # type: ignore[union-attr]
            if not data:
                raise SystemExit(f"connection {i} closed by the server")
            buf = buffers[i]
            buf += data
            pos = 0
            while len(buf) - pos >= 4:
                length = struct.unpack_from(">I", buf, pos)[0]
                if len(buf) - pos < 4 + length:
                    break
                raw = bytes(buf[pos : pos + 4 + length])
                pos += 4 + length
                k = frames[i]
                frames[i] += 1
                if k == 0:
                    if i == 0:
                        Path(ack_out).write_bytes(raw)
                    ready_count += 1
                    if ready_count == conns:
                        print("READY", flush=True)
                    continue
                r = k - 1
                if r >= rounds:
                    continue
                times[r][i] = now
                if i == 0:
                    if r == 0:
                        Path(frame_out).write_bytes(raw)
                    try:
                        cmd = decode_frame(raw[4:])
                        emitted[r] = decode_notification(cmd.body).emitted_at_ms / 1e3
                    except Exception:
                        emitted[r] = 0.0
                done_rounds[r] += 1
                if done_rounds[r] == conns:
                    print(f"DONE {r}", flush=True)
                if r == rounds - 1:
                    finished += 1
            del buf[:pos]
    print(json.dumps({"times": times, "emitted": emitted}), flush=True)


# -- driver ----------------------------------------------------------------------------------


def call(sock: socket.socket, cmd: RemotingCommand) -> RemotingCommand:
    return roundtrip(sock, cmd)[0]


def start_receiver(
    port: int, conns: int, rounds: int, frame: str, ack: str, inline: bool = False
) -> subprocess.Popen:
    args = ["--role", "receiver", "--port", str(port), "--n", str(conns), "--rounds", str(rounds)]
    if inline:
        args.append("--inline")
    proc = subprocess.Popen(
        [sys.executable, __file__, *args, "--frame-out", frame, "--ack-out", ack],
        stdout=subprocess.PIPE,
        text=True,
    )
    expect(proc, "SUBSCRIBING")
    expect(proc, "READY")
    return proc


def expect(proc: subprocess.Popen, word: str) -> str:
    line = proc.stdout.readline().strip()  # type: ignore[union-attr]
    if not line.startswith(word):
        raise RuntimeError(f"receiver said {line!r}, expected {word}")
    return line


def run_namesrv(conns: int, tick_ms: int, rounds: int, workdir: str, inline: bool) -> dict:
    port = free_port()
    config = Path(workdir) / f"fanout-{tick_ms}.toml"
    config.write_text(
        "[server]\nmax_connections = 20000\nmax_connections_per_host = 20000\n"
        f"[push]\ntick_interval_ms = {tick_ms}\n[pressure]\nenabled = false\n"
    )
    server = start_namesrv(port, config)
    frame, ack = Path(workdir) / "notify.bin", Path(workdir) / "ack.bin"
    try:
        broker = socket.create_connection(("127.0.0.1", port))
        assert call(broker, register_request(topic_configs(TOPIC))).code == 0
        time.sleep(tick_ms / 1000 * 2)
        recv = start_receiver(port, conns, rounds, str(frame), str(ack), inline)
        rng = random.Random(5)
        t0: list[float] = []
        for r in range(rounds):
            time.sleep(rng.uniform(0, tick_ms / 1000))
            code = (
                RequestCode.WIPE_WRITE_PERM_OF_BROKER
                if r % 2 == 0
                else RequestCode.ADD_WRITE_PERM_OF_BROKER
            )
            t0.append(time.time())
            assert call(broker, RemotingCommand.request(code, {"brokerName": "broker-a"})).code == 0
            expect(recv, f"DONE {r}")
        result = json.loads(recv.stdout.readline())  # type: ignore[union-attr]
        recv.wait()
        broker.close()
    finally:
        server.terminate()
        server.wait()
    latencies = [(t - t0[r]) * 1000 for r, row in enumerate(result["times"]) for t in row if t > 0]
    fanout = [
        (max(row) - result["emitted"][r]) * 1000
        for r, row in enumerate(result["times"])
        if result["emitted"][r] > 0
    ]
    return {"latencies": latencies, "fanout": fanout, "frame": str(frame), "ack": str(ack)}


def run_bare(conns: int, rounds: int, frame: str, ack: str, workdir: str) -> list[float]:
    port, control_port = free_port(), free_port()
    server = subprocess.Popen(
        [sys.executable, str(HERE / "bare_fanout.py"), str(port), str(control_port), frame, ack]
    )
    try:
        wait_port(port)
        wait_port(control_port)
        # The first data connection above was a probe; the receiver's connections follow.
        recv = start_receiver(
            port, conns, rounds, str(Path(workdir) / "x"), str(Path(workdir) / "y")
        )
        control = socket.create_connection(("127.0.0.1", control_port))
        t0: list[float] = []
        for r in range(rounds):
            time.sleep(0.05)
            t0.append(time.time())
            control.sendall(b"go")
            control.recv(1)
            expect(recv, f"DONE {r}")
        result = json.loads(recv.stdout.readline())  # type: ignore[union-attr]
        recv.wait()
        control.close()
    finally:
        server.terminate()
        server.wait()
    return [(max(row) - t0[r]) * 1000 for r, row in enumerate(result["times"])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", default="driver", choices=["driver", "receiver"])
    parser.add_argument("--conns", default="1000,10000")
    parser.add_argument("--ticks", default="1000,10")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--port", type=int)
    parser.add_argument("--n", type=int)
    parser.add_argument("--frame-out")
    parser.add_argument("--ack-out")
    parser.add_argument("--inline", action="store_true", help="connections ask for inline routes")
    args = parser.parse_args()
    if args.role == "receiver":
        receiver(args.port, args.n, args.rounds, args.frame_out, args.ack_out, args.inline)
        return

    with tempfile.TemporaryDirectory() as workdir:
        for conns in (int(x) for x in args.conns.split(",")):
            bare: list[float] | None = None
            for tick in (int(x) for x in args.ticks.split(",")):
                ours = run_namesrv(conns, tick, args.rounds, workdir, args.inline)
                if bare is None:
                    bare = run_bare(conns, args.rounds, ours["frame"], ours["ack"], workdir)
                lat, fan = ours["latencies"], ours["fanout"]
                ratio = statistics.median(bare) / statistics.median(fan)
                p = percentile
                print(
                    f"N={conns:>6} tick={tick:>5} ms | change->receipt p50 {p(lat, 0.5):7.1f} ms"
                    f" p99 {p(lat, 0.99):7.1f} ms (target p99 <= {tick + 200} ms)"
                    f" | fan-out p50 {statistics.median(fan):6.1f} ms p99 {p(fan, 0.99):6.1f} ms"
                    f" | bare twisted fan-out p50 {statistics.median(bare):6.1f} ms"
                    f" p99 {p(bare, 0.99):6.1f} ms | rate ratio {ratio:.2f} (target >= 0.8)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
