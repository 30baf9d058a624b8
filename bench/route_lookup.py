"""GET_ROUTEINFO_BY_TOPIC throughput of the name server against a bare Twisted server.

Both servers run as their own process, one at a time, driven by the same closed-loop load
(100 connections, one request in flight each). Each round measures both, alternating which goes
first, and the figure to read is the median of the per-round ratios: on a shared machine
throughput drifts between rounds far more than it differs within one.
The bare server answers with the very bytes the name server returned for the same request.

    python bench/route_lookup.py [--connections 100] [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE), str(ROOT / "tests")]

from loadgen import run  # noqa: E402
from local_processes import free_port, roundtrip, start_namesrv, wait_port  # noqa: E402
from support.fake_broker import register_request, topic_configs  # noqa: E402

from protocol.codes import RequestCode  # noqa: E402
from protocol.frame import RemotingCommand, encode_command  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    request = encode_command(
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "BenchTopic"})
    )
    ns_port, bare_port = free_port(), free_port()
    namesrv = start_namesrv(ns_port)
    # The broker's connection is its channel: it stays open, or the broker would leave.
    sock = socket.create_connection(("127.0.0.1", ns_port))
    names = ["BenchTopic", *(f"Other{i}" for i in range(99))]
    for b in range(2):
        roundtrip(
            sock,
            register_request(
                topic_configs(*names, queues=8),
                broker_name=f"broker-{b}",
                broker_addr=f"10.0.0.{b + 1}:10911",
            ),
        )
    lookup = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "BenchTopic"}, opaque=0
    )
    resp, raw = roundtrip(sock, lookup)
    assert resp.code == 0, resp.remark
    with tempfile.NamedTemporaryFile(delete=False) as fh:
        fh.write(raw)
        answer_file = fh.name
    bare = subprocess.Popen(
        [sys.executable, str(HERE / "bare_server.py"), str(bare_port), answer_file],
        stdout=subprocess.DEVNULL,
    )
    wait_port(bare_port)
    ours: list[float] = []
    base: list[float] = []
    try:

        def measure(port: int) -> float:
            return run(
                "127.0.0.1", port, request, connections=args.connections, seconds=args.seconds
            )

        heartbeat = RemotingCommand.request(
            RequestCode.BROKER_HEARTBEAT,
            {"clusterName": "DefaultCluster", "brokerAddr": "10.0.0.1:10911"},
        )
        for r in range(args.rounds):
            # Brokers heartbeat, or they expire after 120 s and the route goes.
            for b in range(2):
                heartbeat.ext_fields["brokerAddr"] = f"10.0.0.{b + 1}:10911"
                roundtrip(sock, heartbeat)
            # Alternate who goes first, so drift within a round favours neither.
            if r % 2 == 0:
                ours.append(measure(ns_port))
                base.append(measure(bare_port))
            else:
                base.append(measure(bare_port))
                ours.append(measure(ns_port))
            print(
                f"round {r + 1}: namesrv {ours[-1]:,.0f} req/s, bare twisted {base[-1]:,.0f} "
                f"req/s, ratio {ours[-1] / base[-1]:.2f}"
            )
        after, _ = roundtrip(sock, lookup)
        assert (after.code, after.body) == (0, resp.body), "the route moved during the run"
    finally:
        sock.close()
        namesrv.terminate()
        bare.terminate()
        namesrv.wait()
        bare.wait()
        os.unlink(answer_file)
    o, b = statistics.median(ours), statistics.median(base)
    print(
        f"response size {len(raw)} bytes, {args.connections} connections, "
        f"{args.rounds} x {args.seconds:.0f} s per server"
    )
    print(f"namesrv median: {o:,.0f} req/s")
    print(f"bare twisted median: {b:,.0f} req/s")
    paired = statistics.median(x / y for x, y in zip(ours, base, strict=True))
    print(f"ratio of medians namesrv / bare: {o / b:.2f}")
    print(f"median of per-round ratios: {paired:.2f} (target >= 0.85)")


if __name__ == "__main__":
    main()
