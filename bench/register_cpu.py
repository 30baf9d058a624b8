"""Server CPU per REGISTER_BROKER, two checkouts side by side: registers sent one at a time over
four broker connections (a round trip each), alternating which server goes first per rep.

    python bench/register_cpu.py BASE_TREE NEW_TREE --mode heartbeat-compressed --reps 15

Modes: ``heartbeat-*`` sends each broker's very body again (recognised by its digest, not read);
``changed-*`` a new data version each time. ``*-plain`` / ``*-compressed`` is the body form.
Prints the min and median of CPU microseconds per register (user + system, 1,000 registers per
rep, so the 10 ms CPU-time tick is 10 us) for each tree and their ratio: min-of-reps is the
figure least moved by other work on the machine.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
from local_processes import free_port, start_namesrv
from vs_upstream import register_frame

from protocol.frame import FrameDecoder

PER_REP = 1000
NAMES = [f"BenchTopic{i:04d}" for i in range(1000)]


def roundtrip(sock: socket.socket, frame: bytes) -> int:
    sock.sendall(frame)
    decoder = FrameDecoder()
    while True:
        out = decoder.feed(sock.recv(65536))
        if out:
            return out[0].code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument(
        "--mode",
        default="heartbeat-compressed",
        choices=[f"{k}-{f}" for k in ("heartbeat", "changed") for f in ("plain", "compressed")],
    )
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    compressed = args.mode.endswith("compressed")
    trees = {"base": args.base.resolve(), "new": args.new.resolve()}
    procs = {}
    for name, tree in trees.items():
        port = free_port()
        procs[name] = (port, start_namesrv(port, root=tree))
    socks = {
        n: [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        for n, (port, _) in procs.items()
    }
    cpu: dict[str, list[float]] = {n: [] for n in trees}
    version = 1
    try:
        for name in trees:
            for b in range(4):
                assert (
                    roundtrip(
                        socks[name][b], register_frame(30 + b, NAMES, 1, compressed=compressed)
                    )
                    == 0
                )
        for rep in range(args.reps):
            frames = []
            for _ in range(PER_REP // 4):
                if args.mode.startswith("changed"):
                    version += 1
                frames += [
                    register_frame(30 + b, NAMES, version, compressed=compressed, opaque=version)
                    for b in range(4)
                ]
            order = list(trees) if rep % 2 == 0 else list(trees)[::-1]
            for name in order:
                proc = psutil.Process(procs[name][1].pid)
                before = sum(proc.cpu_times()[:2])
                for i, frame in enumerate(frames):
                    assert roundtrip(socks[name][i % 4], frame) == 0
                cpu[name].append((sum(proc.cpu_times()[:2]) - before) / PER_REP * 1e6)
    finally:
        for _, proc in procs.values():
            proc.terminate()
    figures = {}
    for name, tree in trees.items():
        ordered = sorted(cpu[name])
        figures[name] = (ordered[0], ordered[len(ordered) // 2])
        low, mid = figures[name]
        print(f"{name} {tree.name}: {args.mode} CPU us/register min {low:.0f} median {mid:.0f}")
    ratio_min = figures["new"][0] / figures["base"][0]
    ratio_median = figures["new"][1] / figures["base"][1]
    print(f"new / base: min {ratio_min:.2f}, median {ratio_median:.2f}")


if __name__ == "__main__":
    main()
