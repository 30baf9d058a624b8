"""Memory per (topic, broker) entry of a running name server's route tables.

In one process: a ``NameServer`` (no socket, a fake clock driving its slices) is fed
REGISTER_BROKER requests through its connection handling, as brokers send them (compressed
bodies, as 5.x brokers do for large tables, or with ``--plain`` JSON bodies, which also fill
the register chunk cache); the RSS grown after a full garbage collection,
divided by the (topic, broker) entries held, is the figure, before and after the server's heap
trim (``registry.heap_trim_after_ms`` after the last sliced table). The request bodies are built
before the baseline RSS is taken (the heap trimmed of what building them freed), so they do not
count.

    python bench/registry_memory.py --topics 100000 --brokers 10
    python bench/registry_memory.py --topics 1000000 --brokers 1
    python bench/registry_memory.py --topics 1000000 --brokers 1 --plain
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import psutil
from twisted.internet import task
from twisted.internet.testing import StringTransport

from namesrv.config import from_mapping
from namesrv.ops.heap_trim import malloc_trim
from namesrv.server import NameServer
from protocol import register_body
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand, encode_command
from protocol.headers import RegisterBrokerRequestHeader
from protocol.route_model import DataVersion, TopicConfig


def register_frame(broker: int, topics: int, plain: bool = False) -> bytes:
    configs = {f"topic-{i:07d}": TopicConfig(f"topic-{i:07d}", 8, 8, 6) for i in range(topics)}
    wrapper = register_body.TopicConfigSerializeWrapper(configs, DataVersion(0, 1, 1))
    body = register_body.RegisterBrokerBody(wrapper, []).to_wire(compressed=not plain)
    header = RegisterBrokerRequestHeader(
        broker_name=f"broker-{broker}",
        broker_addr=f"10.0.{broker // 250}.{broker % 250}:10911",
        cluster_name="DefaultCluster",
        ha_server_addr=f"10.0.{broker // 250}.{broker % 250}:10912",
        broker_id=0,
        heartbeat_timeout_millis=None,
        compressed=not plain,
        body_crc32=register_body.crc32(body),
    )
    return encode_command(
        RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_wire(), body)
    )


def rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=10)
    parser.add_argument("--plain", action="store_true", help="plain JSON bodies")
    args = parser.parse_args()

    frames = [register_frame(b, args.topics, args.plain) for b in range(args.brokers)]
    clock = task.Clock()
    config = from_mapping(
        {
            "server": {
                "listen": "127.0.0.1:0",
                "max_frame_size": 256 << 20,
                "max_buffered_input_bytes": 512 << 20,
            },
            "pressure": {"enabled": False},
        }
    )
    server = NameServer(config, clock=clock, epoch="bench")
    malloc_trim()  # building the bodies left free heap pages: not the server's
    base = rss()
    for i, frame in enumerate(frames):
        transport = StringTransport()
        from namesrv.net.connection import NamesrvConnection

        conn = NamesrvConnection(server.hub, i + 1, server.config.server)
        conn.makeConnection(transport)
        conn.dataReceived(frame)
        while getattr(server, "pending_registers", 0):
            clock.advance(0)
        assert b'"code":0' in transport.value(), transport.value()[:300]
    server.tick()
    while server.detector.dirty_count:
        clock.advance(0)
    untrimmed = rss() - base
    clock.advance(server.config.registry.heap_trim_after_ms / 1000)  # the server's heap trim
    grown = rss() - base
    entries = args.topics * args.brokers
    form = "plain" if args.plain else "compressed"
    tables = server.registry.tables.tables
    distinct = len({id(table) for table in tables.values()})
    print(
        f"{args.topics:,} topics x {args.brokers} brokers ({form} bodies): "
        f"{server.registry.topic_count:,} topics held ({server.counters['heap_trims']} heap "
        f"trim); RSS grew {grown / 2**20:.1f} MiB = {grown / entries:.0f} B per (topic, broker)"
        f" ({untrimmed / entries:.0f} B before the trim); {len(tables)} brokers hold {distinct}"
        " table objects"
    )


if __name__ == "__main__":
    main()
