"""Cost of one change-detection tick: idle, and with k topics changed.

Builds a real ``NameServer`` (no socket: ticks are called directly) holding 100,000 topics on
100 brokers and 10,000 subscriptions across 1,000 connections, then times ``tick()``:

* with nothing changed (the target: under 1 ms);
* with k topics changed for k in 1, 10, 100, 1000 (cost should grow with k, not with the
  number of topics or subscribers), notifications built and written to in-memory connections.

    python bench/tick_cost.py [--topics 100000] [--connections 1000] [--subscriptions 10000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from twisted.internet import task  # noqa: E402

from namesrv.config import from_mapping  # noqa: E402
from namesrv.push.pressure import Sample  # noqa: E402
from namesrv.routes.register_request import RegisterRequest  # noqa: E402
from namesrv.server import NameServer  # noqa: E402
from protocol.codes import SerializeType  # noqa: E402
from protocol.route_model import DataVersion, TopicConfig  # noqa: E402


class MemoryConnection:
    """Stands in for a socket connection: takes frames, never blocks."""

    def __init__(self, conn_id: int) -> None:
        self.conn_id = conn_id
        self.peer = f"mem:{conn_id}"
        self.output_blocked = False
        self.closed = False
        self.serialize_type = SerializeType.JSON
        self.received = 0

    def send(self, data: bytes) -> None:
        self.received += len(data)


def build(args: argparse.Namespace) -> tuple[NameServer, task.Clock, list[str], list[str]]:
    clock = task.Clock()
    clock.advance(1_700_000_000)
    server = NameServer(
        from_mapping({"registry": {"broker_expiry_ms": 2**31 - 1}}),
        reactor=clock,
        clock=clock,
        sampler=lambda: Sample(cpu_percent=1.0, memory_percent=1.0),
        epoch="bench",
    )
    per_broker = args.topics // args.brokers
    topics = [f"topic-{i:06d}" for i in range(args.topics)]
    brokers = [f"broker-{b:03d}" for b in range(args.brokers)]
    for b, name in enumerate(brokers):
        mine = topics[b * per_broker : (b + 1) * per_broker]
        server.registry.register_broker(
            RegisterRequest(
                cluster_name="bench",
                broker_addr=f"10.0.{b // 250}.{b % 250}:10911",
                broker_name=name,
                broker_id=0,
                ha_server_addr="",
                topic_configs={t: TopicConfig(topic_name=t) for t in mine},
                data_version=DataVersion(0, 1, 1),
                filter_server_list=[],
                heartbeat_timeout_ms=None,
                enable_acting_master=False,
                channel=None,
                topic_queue_mapping_info={},
            )
        )
    server.tick()  # settle start-up registrations
    rng = random.Random(7)
    conns = [MemoryConnection(i) for i in range(args.connections)]
    per_conn = args.subscriptions // args.connections
    for conn in conns:
        server.subscriptions.subscribe(conn, rng.sample(topics, per_conn))
    server.tick()
    subscribed = sorted(server.subscriptions._by_topic)  # type: ignore[attr-defined]
    return server, clock, topics, subscribed


def time_ticks(server: NameServer, clock: task.Clock, rounds: int, before=None) -> list[float]:
    samples = []
    for _ in range(rounds):
        if before is not None:
            before()
        clock.advance(1.0)
        start = time.perf_counter()
        server.tick()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--connections", type=int, default=1_000)
    parser.add_argument("--subscriptions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()

    t0 = time.perf_counter()
    server, clock, _, subscribed = build(args)
    print(
        f"setup: {args.topics:,} topics on {args.brokers} brokers, "
        f"{server.subscriptions.total:,} subscriptions on {args.connections:,} connections "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    idle = time_ticks(server, clock, args.rounds)
    print(
        f"idle tick: median {statistics.median(idle):.4f} ms, "
        f"p99 {sorted(idle)[int(len(idle) * 0.99) - 1]:.4f} ms, max {max(idle):.4f} ms"
    )

    rng = random.Random(11)
    flip = [False]
    for k in (1, 10, 100, 1000):

        def change(k: int = k) -> None:
            # Alter the queue counts of k subscribed topics through the registry's own path.
            flip[0] = not flip[0]
            for topic in rng.sample(subscribed, k):
                route = server.registry.get_route(topic)
                assert route is not None
                qd = route.queue_datas[0]
                server.registry.register_topic(
                    topic,
                    [
                        type(qd)(
                            broker_name=qd.broker_name,
                            read_queue_nums=8 if flip[0] else 16,
                            write_queue_nums=8 if flip[0] else 16,
                            perm=qd.perm,
                        )
                    ],
                )

        samples = time_ticks(server, clock, max(20, args.rounds // 10), before=change)
        med = statistics.median(samples)
        print(
            f"tick with {k:>4} changed topics: median {med:.3f} ms "
            f"({med / k * 1000:.1f} us per changed topic), notifications so far "
            f"{server.counters['notifications_sent']:,}"
        )


if __name__ == "__main__":
    main()
