"""Instructions per request, per load case: a cost figure that does not move with the machine's
load, so two trees can be compared on a busy machine.

    python bench/instructions.py                                # every case, this tree
    python bench/instructions.py --cases lookup --tree ../base  # and another checkout, the ratio
    python bench/instructions.py --cases lookup --no-valgrind   # check the answers, measure nothing

For each case a child process builds the name server in-process as ``python -m namesrv`` does
(the lean reactor, the allocator and collector settings, a real loopback listener; timers on a
fake clock that stands still), connects one client socket, and then works off a plan of reads:
each read is sent whole, the server's reactor is turned by hand (its poll, the held output
written after it, the register turns due) until the server holds nothing more, and the
answers are read off the client socket. The plan's frames are built once by this process
(with ``bench/vs_upstream.py``'s builders) and handed to every child, so both trees get the
same bytes. The child writes every answer out; this process counts them and fails unless
each request got exactly one SUCCESS answer, so a refused request can never be measured.

The child runs under ``valgrind --tool=callgrind`` twice, measuring ``N`` and then ``2N``
requests after the same set-up and warm-up: ``(Ir(2N) - Ir(N)) / N`` is what one request costs
in instructions, start-up, set-up and warm-up cancelled. It includes the client's own send
and receive per read and the hand-turned reactor (the same for both trees), not the kernel.

Cases: ``lookup`` (GET_ROUTEINFO_BY_TOPIC of a topic 2 brokers route, 10 pipelined per read,
each with its own opaque), ``changed-plain`` / ``changed-compressed`` (1,000-topic
REGISTER_BROKER from 4 brokers in turn, each with a data version not sent before),
``heartbeat-plain`` / ``heartbeat-compressed`` (the very same register frame again),
``big-plain`` / ``big-compressed`` (a broker's first register of 100,000 topics).
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

LOOKUP_BATCH = 10
"""Lookups per read by default, as from a client with several requests in flight
(``--lookup-batch 1``: one per read, as ``vs_upstream.py``'s closed loop sends them)."""
DEFAULT_REQUESTS = {"lookup": 3000, "changed": 40, "heartbeat": 60, "big": 1}
"""``N`` per kind of case: enough that one request's cost stands well above the noise of a
run (a few hundred instructions), few enough that callgrind's runs stay within minutes."""
WARMUP_READS = 20
"""Reads of the case's own requests before anything is measured (one for the big case)."""
MAX_TURNS_PER_READ = 100_000
"""Hand turns of the reactor a read may take before the child gives up on the server."""
Read = tuple[bytes, int]
"""The bytes of one read and how many requests they hold."""


@dataclass
class Plan:
    """What a child sends: set-up reads, warm-up reads, then reads to measure, of which a
    run takes the first ``measured`` (``N`` or ``2N`` requests)."""

    setup: list[Read]
    warmup: list[Read]
    measured: list[Read]
    per_measured_read: int


# -- the plans (this process; the frames come from bench/vs_upstream.py) --------------------------


def builders() -> Any:
    """``bench/vs_upstream.py``, whose frame builders and response reader the plans use."""
    if str(HERE) not in sys.path:
        sys.path[:0] = [str(ROOT), str(HERE)]
    import vs_upstream

    return vs_upstream


def case_names() -> tuple[str, ...]:
    """The load cases, those of ``bench/profile_cases.py``."""
    builders()
    import profile_cases

    return tuple(profile_cases.CASES)


def build_plan(case: str, requests: int, lookup_batch: int = LOOKUP_BATCH) -> Plan:
    """The plan for ``case`` with room for ``2 * requests`` measured requests."""
    lookup_frame, register_frame = builders().lookup_frame, builders().register_frame

    names_1k = [f"BenchTopic{i:04d}" for i in range(1_000)]
    kind, _, form = case.partition("-")
    compressed = form == "compressed"
    if kind == "lookup":
        setup = [(register_frame(b, names_1k, 1, compressed=False), 1) for b in (100, 101)]
        opaques = iter(range(1, 1 << 31))

        def lookup_read() -> Read:
            frames = [lookup_frame("BenchTopic0000", next(opaques)) for _ in range(lookup_batch)]
            return b"".join(frames), lookup_batch

        if requests % lookup_batch:
            raise SystemExit(f"--requests for lookup must be a multiple of {lookup_batch}")
        warmup = [lookup_read() for _ in range(WARMUP_READS)]
        measured = [lookup_read() for _ in range(2 * requests // lookup_batch)]
        return Plan(setup, warmup, measured, lookup_batch)
    if kind in ("changed", "heartbeat"):
        brokers = range(20, 24)
        setup = [(register_frame(b, names_1k, 1, compressed=compressed), 1) for b in brokers]
        if kind == "heartbeat":
            again = [setup[i % 4][0] for i in range(WARMUP_READS + 2 * requests)]
        else:
            again = [
                register_frame(
                    brokers[i % 4], names_1k, 2 + i // 4, compressed=compressed, opaque=i + 2
                )
                for i in range(WARMUP_READS + 2 * requests)
            ]
        reads = [(frame, 1) for frame in again]
        return Plan(setup, reads[:WARMUP_READS], reads[WARMUP_READS:], 1)
    if kind == "big":
        names = [f"T{i:06d}" for i in range(100_000)]
        reads = [
            (register_frame(300 + b, names, 1, compressed=compressed), 1)
            for b in range(1 + 2 * requests)
        ]
        return Plan([], reads[:1], reads[1:], 1)
    raise SystemExit(f"unknown case {case}")


# -- the child: the server in-process, driven read by read ----------------------------------------


def child(plan_path: Path, measured_reads: int, out_path: Path) -> None:
    """Serve the plan's set-up, warm-up and first ``measured_reads`` reads; write every answer's
    bytes to ``out_path``. Imports the name server from the first tree on ``sys.path``."""
    import fcntl
    import gc
    import logging
    import socket
    import struct
    import termios

    from namesrv.net import lean_reactor

    lean_reactor.install()
    from twisted.internet import reactor as installed
    from twisted.internet import task

    from namesrv import cli
    from namesrv import config as config_module
    from namesrv.cli import tune_allocator
    from namesrv.server import NameServer

    with open(plan_path, "rb") as f:
        setup, warmup, measured = pickle.load(f)
    log_format = getattr(cli, "LOG_FORMAT", "%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.basicConfig(level=logging.INFO, format=log_format, stream=sys.stderr)
    in_memory = getattr(config_module, "IN_MEMORY", "")
    settings = {
        "server": {"listen": "127.0.0.1:0", "shutdown_grace_ms": 0, "wait_for_service_ms": 0},
        "registry": {"broker_expiry_ms": 100_000_000, "kv_config_path": in_memory},
        "acl": {"replay_record_path": in_memory},
        "pressure": {"enabled": False},
    }
    try:
        config = config_module.from_mapping(settings)
    except config_module.ConfigError:  # an older tree, without the settings that came later
        del settings["server"]["wait_for_service_ms"], settings["acl"]
        config = config_module.from_mapping(settings)
    reactor: Any = installed
    clock = task.Clock()
    server = NameServer(config, reactor, clock=clock, epoch="bench", timer=lambda: 0.0)
    port = server.listen().getHost().port
    gc.set_threshold(50_000, 20, 100)  # as the command line sets them
    tune_allocator()
    client = socket.create_connection(("127.0.0.1", port))
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.setblocking(False)
    while not server.connections:
        reactor.doIteration(0)
    (conn,) = server.connections.values()
    server_fd = conn.transport.socket.fileno()
    client_fd = client.fileno()
    timers = clock.getDelayedCalls()  # the fake clock's own list, kept in time order
    answers: list[bytes] = []

    def waiting(fd: int) -> int:
        """Bytes received on ``fd`` and not yet read (asked without raising EAGAIN)."""
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])

    def server_idle() -> bool:
        return not (
            waiting(server_fd)
            or server.pending_registers
            or conn.unsent_bytes
            or conn.kept_requests
            or (timers and timers[0].getTime() <= clock.seconds())
        )

    def exchange(data: bytes) -> None:
        """Send ``data``, turn the reactor until the server holds nothing, read the answers.
        (Its own cost counts for every tree alike; it is kept small.)"""
        view = memoryview(data)
        for _ in range(MAX_TURNS_PER_READ):
            if view:
                try:
                    sent = client.send(view)
                except BlockingIOError:  # the server reads first
                    sent = 0
                view = view[sent:]
            reactor.doIteration(0)
            reactor.runUntilCurrent()
            while timers and timers[0].getTime() <= clock.seconds():
                clock.advance(0)  # the register turns due now
            ready = waiting(client_fd)
            if ready:
                answers.append(client.recv(ready))
            if not view and server_idle():
                return
        raise RuntimeError("the server did not go idle after a read")

    for data, _count in setup + warmup + measured[:measured_reads]:
        exchange(data)
    out_path.write_bytes(b"".join(answers))


# -- running children and checking what they answered ---------------------------------------------


def run_child(
    tree: Path, plan_path: Path, reads: int, out: Path, callgrind_out: Path | None
) -> int | None:
    """Run the child for ``tree``; under callgrind when ``callgrind_out`` is given, then its
    total instructions."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(plan_path)]
    command += ["--child-reads", str(reads), "--child-out", str(out)]
    if callgrind_out is not None:
        vg = ["nice", "-n", "5", "valgrind", "--tool=callgrind", "--quiet"]
        command = [*vg, f"--callgrind-out-file={callgrind_out}", *command]
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    if callgrind_out is not None:  # the runs compared load the same bytecode, write none
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"the child for {tree} failed:\n{done.stderr[-4000:]}")
    if callgrind_out is None:
        return None
    for line in callgrind_out.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no instruction total in {callgrind_out}")


def check_answers(out: Path, plan: Plan, reads: int, label: str) -> None:
    """Every request of the plan's reads got one answer, each SUCCESS; else a loud failure."""
    response_code = builders().response_code
    data = out.read_bytes()
    expected = sum(count for _, count in plan.setup + plan.warmup + plan.measured[:reads])
    codes: dict[int, int] = {}
    pos = 0
    while pos + 4 <= len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        code = response_code(data[pos + 4 : pos + 4 + length])
        codes[code] = codes.get(code, 0) + 1
        pos += 4 + length
    answered = sum(codes.values())
    if pos != len(data) or answered != expected or set(codes) != {0}:
        raise RuntimeError(
            f"{label}: {expected} requests, {answered} answers, codes {codes} "
            f"({len(data) - pos} stray bytes): the case measures no successful requests"
        )


def measure(
    case: str,
    plan: Plan,
    trees: list[Path],
    requests: int,
    *,
    valgrind: bool,
    jobs: int,
    work: Path,
) -> list[float | None]:
    """Instructions per request of ``plan`` (``requests`` of its measured requests, then twice
    as many) for each tree; None without valgrind, when the answers are only checked."""
    plan_path = work / f"{case}.plan"
    with open(plan_path, "wb") as f:
        pickle.dump((plan.setup, plan.warmup, plan.measured), f, pickle.HIGHEST_PROTOCOL)
    n_reads = requests // plan.per_measured_read

    def one(run: tuple[int, Path, int, bool]) -> int | None:
        t, tree, reads, grind = run
        out = work / f"{case}-{t}-{reads}.answers"
        grind_out = work / f"{case}-{t}-{reads}.callgrind" if grind else None
        total = run_child(tree, plan_path, reads, out, grind_out)
        check_answers(out, plan, reads, f"{case} on {tree} ({reads} reads)")
        return total

    # A first run without valgrind checks the answers before minutes go into measuring them,
    # and leaves every module compiled: the measured runs load the same bytecode files.
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, [(t, tree, n_reads, False) for t, tree in enumerate(trees)]))
        if not valgrind:
            return [None for _ in trees]
        runs = [(t, tree, r, True) for t, tree in enumerate(trees) for r in (n_reads, 2 * n_reads)]
        totals = list(pool.map(one, runs))
    return [(totals[2 * t + 1] - totals[2 * t]) / requests for t in range(len(trees))]  # type: ignore[operator]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", help="[default: all] of those profile_cases.py runs")
    parser.add_argument("--requests", type=int, help="N for every case [default: per case]")
    parser.add_argument(
        "--lookup-batch", type=int, default=LOOKUP_BATCH, help="lookups per read [%(default)s]"
    )
    parser.add_argument("--tree", type=Path, help="another checkout to measure beside this one")
    parser.add_argument("--no-valgrind", action="store_true", help="check the answers only")
    parser.add_argument("--jobs", type=int, default=2, help="children at once [%(default)s]")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the callgrind files in this folder (CASE-TREE-READS.callgrind, tree 0 this "
        "one), for callgrind_annotate",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-reads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        sys.path.insert(0, os.getcwd())  # the tree measured, ahead of this script's folder
        child(args.child, args.child_reads, args.child_out)
        return
    cases = case_names()
    unknown = set(args.cases or ()) - set(cases)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}: choose from {', '.join(cases)}")
    trees = [ROOT] + ([args.tree.resolve()] if args.tree else [])
    valgrind = not args.no_valgrind

    def show(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f}"

    print(f"{'case':22} {'this tree':>14}" + (f" {'--tree':>14} {'ratio':>7}" if args.tree else ""))
    with tempfile.TemporaryDirectory(prefix="instructions-") as scratch:
        work = scratch if args.keep is None else str(args.keep)
        Path(work).mkdir(parents=True, exist_ok=True)
        for case in args.cases or cases:
            n = args.requests or DEFAULT_REQUESTS[case.partition("-")[0]]
            plan = build_plan(case, n, args.lookup_batch)
            figures = measure(
                case, plan, trees, n, valgrind=valgrind, jobs=args.jobs, work=Path(work)
            )
            line = f"{case:22} {show(figures[0]):>14}"
            if args.tree:
                ratio = figures[0] / figures[1] if figures[0] and figures[1] else None
                line += f" {show(figures[1]):>14} {'-' if ratio is None else f'{ratio:.3f}':>7}"
            print(line + ("  (answers checked, nothing measured)" if not valgrind else ""))


if __name__ == "__main__":
    main()
