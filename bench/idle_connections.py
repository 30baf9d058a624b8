"""Memory per idle connection: the name server's RSS growth per connection that was opened,
answered one request and then stayed silent.

    python bench/idle_connections.py [--connections 19500] [--rounds 3] [--baseline-tree DIR]

Each round starts a fresh ``python -m namesrv`` (of this checkout, then of ``--baseline-tree``
when given) with the connection bounds raised to hold them all, opens the connections from
two helper processes (a process may hold at most ``ulimit -n`` sockets), and has every
connection complete one route lookup, so that each is a served connection and not only an
accepted one. RSS is read twice, at half and at all the connections, and the figure is the
growth between the two divided by the connections between them: the fixed costs of the first
connections (the poller's tables, lazily built caches) stay out of it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import statistics
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.local_processes import ROOT, free_port, start_namesrv
from protocol.codes import RequestCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command

CONFIG = """\
[server]
max_connections = {n}
max_connections_per_host = {n}
"""


def lookup_frame() -> bytes:
    cmd = RemotingCommand(
        code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=1, ext_fields={"topic": "IdleBench"}
    )
    return encode_command(cmd)


def hold(port: int, count: int, pipe: Connection) -> None:
    """Open ``count`` connections, have each answered once, report, then hold them until told."""
    frame = lookup_frame()
    socks: list[socket.socket] = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(frame)
        socks.append(s)
    for s in socks:
        decoder = FrameDecoder()
        while not decoder.feed(s.recv(65536)):
            pass
    pipe.send(len(socks))
    pipe.recv()
    for s in socks:
        s.close()


def one_round(root: Path, connections: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "idle.toml"
        config.write_text(CONFIG.format(n=connections + 100))
        port = free_port()
        server = start_namesrv(port, config, root=root)
        try:
            proc = psutil.Process(server.pid)
            half = connections // 2
            readings = []
            holders = []
            for count in (half, connections - half):
                parent, child = mp.Pipe()
                holder = mp.Process(target=hold, args=(port, count, child))
                holder.start()
                if parent.recv() != count:
                    raise RuntimeError("a holder could not open its connections")
                holders.append((holder, parent))
                readings.append(proc.memory_info().rss)
            for holder, parent in holders:
                parent.send("done")
                holder.join()
            return (readings[1] - readings[0]) / (connections - half)
        finally:
            server.terminate()
            server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=19_500, help="default: %(default)s")
    parser.add_argument("--rounds", type=int, default=3, help="default: %(default)s")
    parser.add_argument("--baseline-tree", type=Path, help="another checkout, measured alike")
    args = parser.parse_args()
    trees = [("this tree", ROOT)]
    if args.baseline_tree is not None:
        trees.append(("baseline", args.baseline_tree.resolve()))
    figures: dict[str, list[float]] = {label: [] for label, _ in trees}
    for _ in range(args.rounds):
        for label, root in trees:
            figures[label].append(one_round(root, args.connections))
    for label, values in figures.items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        print(
            f"{label}: {statistics.median(values):,.0f} B per idle connection "
            f"(median of {shown}; {args.connections:,} connections)"
        )


if __name__ == "__main__":
    main()
