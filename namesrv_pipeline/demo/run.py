"""``namesrv-pipeline demo --out DIR [--seconds 60]``: the system on loopback, then its report.

In this process, on the Twisted reactor: a name server (journal on, a low CPU mark so the
pressure window below degrades push), broker stand-ins registering over the wire, route
clients holding routes with telemetry on, and a subscriber that stops reading for a while.
Over ``--seconds`` the brokers change routes; a slow window makes the subscriber fall behind;
a pressure window (a storm of route lookups) pushes the process past the CPU mark. Then the
pipeline analyses what was recorded and says where the report is.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twisted.internet import defer, task

from client_push.config import ClientConfig
from client_push.routes.client import RouteClient
from namesrv.config import NamesrvConfig, from_mapping
from namesrv.config_file import load
from namesrv.config_text import config_toml
from namesrv.server import NameServer
from namesrv_pipeline.analysis import analyse
from namesrv_pipeline.demo.registrant import Broker, RouteChanges
from namesrv_pipeline.demo.wire import Peer, connect
from namesrv_pipeline.request import AnalysisRequest
from namesrv_pipeline.sources import JournalSource
from protocol.codes import RequestCode, ResponseCode
from protocol.command_line import DefaultsHelpFormatter, add_version
from protocol.frame import RemotingCommand, encode_command
from protocol.push_codec import encode_subscribe

TOPICS_PER_BROKER = 8
CLIENTS = 4
CHANGE_EVERY_S = 0.3
STORM_IN_FLIGHT = 200
SLOW_FLOOD = 40_000
"""Lookups the slow subscriber sends without reading: their answers fill its buffers."""

log = logging.getLogger("namesrv_pipeline.demo")


@dataclass(frozen=True, slots=True)
class Recording:
    namesrv: str
    journal: Path
    telemetry: Path
    config: Path


def demo_config(work: Path) -> NamesrvConfig:
    """The name server's config for the demo: a 200 ms tick, the journal on, pressure sampled
    every 500 ms with a low CPU mark (25 % of a core) the lookup storm crosses, and a small
    output buffer so a subscriber that stops reading is soon skipped."""
    return from_mapping(
        {
            "server": {
                "listen": "127.0.0.1:0",
                "shutdown_grace_ms": 0,
                "output_buffer_bytes": 64 * 1024,
            },
            "push": {"tick_interval_ms": 200, "recovery_notifications_per_second": 20},
            "pressure": {
                "enabled": True,
                "sample_interval_ms": 500,
                "cpu_high_percent": 25.0,
                "cpu_low_percent": 10.0,
                "memory_high_percent": 99.0,
                "memory_low_percent": 98.0,
            },
            "journal": {"directory": str(work / "journal")},
            # The demo's KV config is thrown away with it, never the home directory's file.
            "registry": {"kv_config_path": ":memory:"},
        }
    )


def _sleep(reactor: Any, seconds: float) -> defer.Deferred[None]:
    return task.deferLater(reactor, max(0.0, seconds), lambda: None)


class Storm:
    """Route lookups kept ``in_flight`` deep on one connection: CPU load on the name server."""

    def __init__(self, peer: Peer, topics: list[str]) -> None:
        self._peer = peer
        self._topics = topics
        self._n = 0
        self.running = False

    def start(self) -> None:
        self.running = True
        for _ in range(STORM_IN_FLIGHT):
            self._one()

    def _one(self, _: object = None) -> None:
        if not self.running or not self._peer.connected:
            return
        self._n += 1
        topic = self._topics[self._n % len(self._topics)]
        d = self._peer.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        d.addCallbacks(self._one, lambda _failure: None)


async def _drive(
    reactor: Any,
    seconds: float,
    changes: RouteChanges,
    slow: Peer,
    storm: Storm,
    topics: list[str],
    say: Any,
) -> int:
    """Route changes every ``CHANGE_EVERY_S`` for ``seconds``, the slow subscriber and the
    pressure windows opened and closed on the way; the changes made."""
    start = reactor.seconds()
    windows = {
        "slow": (0.15 * seconds, 0.4 * seconds),
        "pressure": (0.55 * seconds, 0.75 * seconds),
    }
    state = {"slow": False, "pressure": False}
    made = 0
    while (elapsed := reactor.seconds() - start) < seconds:
        for name, (begin, end) in windows.items():
            inside = begin <= elapsed < end
            if inside == state[name]:
                continue
            state[name] = inside
            if name == "slow" and inside:
                say("demo: a subscriber stops reading")
                slow.pause_reading()
                # One frame written many times: the answers pile up unread, at little
                # cost to this process (whose CPU is the name server's).
                lookup = RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topics[0]}, opaque=1 << 30
                )
                slow.write_raw(encode_command(lookup) * SLOW_FLOOD)
            elif name == "slow":
                say("demo: the subscriber reads again")
                slow.resume_reading()
            elif inside:
                say("demo: pressure window: a storm of route lookups")
                storm.start()
            else:
                say("demo: pressure window over")
                storm.running = False
        await changes.next()
        made += 1
        await _sleep(reactor, CHANGE_EVERY_S)
    return made


def _prepare(work: Path) -> Path:
    """``work`` emptied of an earlier recording, with the demo's config written; its path."""
    work.mkdir(parents=True, exist_ok=True)
    for old in ("journal", "telemetry"):
        shutil.rmtree(work / old, ignore_errors=True)
    (work / "telemetry").mkdir()
    config_path = work / "namesrv.toml"
    config_path.write_text(
        config_toml(demo_config(work), {}, "name server config of namesrv-pipeline demo"),
        encoding="utf-8",
    )
    return config_path


async def _client(reactor: Any, namesrv: str, work: Path, i: int, topics: list[str]) -> RouteClient:
    """Route client ``i``, telemetry on, holding ``topics``."""
    client = RouteClient(
        ClientConfig(
            namesrv_addrs=(namesrv,),
            telemetry_path=str(work / "telemetry" / f"client-{i}.jsonl"),
            client_id=f"demo-client-{i}",
        ),
        reactor,
        random.Random(i),
    )
    client.start()
    for topic in topics:
        await client.get_route(topic)
    return client


async def record(reactor: Any, work: Path, seconds: float, say: Any = print) -> Recording:
    """Run the system for ``seconds`` and record its journal and telemetry under ``work``."""
    config_path = _prepare(work)
    server = NameServer(load(config_path), reactor)
    listening: Any = server.listen()
    port = listening.getHost().port
    namesrv = f"127.0.0.1:{port}"
    say(f"demo: name server on {namesrv}, journal in {work / 'journal'}")
    rng = random.Random(13)
    brokers = [
        Broker(
            f"broker-{name}",
            f"127.0.0.1:{10911 + 100 * i}",
            {f"Demo{name.upper()}-{t:02d}": 4 for t in range(TOPICS_PER_BROKER)},
        )
        for i, name in enumerate("abc")
    ]
    topics = sorted(t for b in brokers for t in b.topics)
    clients: list[RouteClient] = []
    peers: list[Peer] = []
    try:
        for broker in brokers:
            await broker.connect(reactor, port)
            await broker.register()
        for i in range(CLIENTS):
            clients.append(await _client(reactor, namesrv, work, i, topics[i % 3 :: 2]))
        slow = await connect(reactor, port)
        peers.append(slow)
        ack = await slow.call(
            RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(topics, "demo-slow")
        )
        if ack.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"the slow subscriber's SUBSCRIBE was refused: {ack.remark}")
        storm_peer = await connect(reactor, port)
        peers.append(storm_peer)
        storm = Storm(storm_peer, topics)
        say(f"demo: {len(brokers)} brokers, {len(topics)} topics, {CLIENTS} route clients")

        changes = RouteChanges(brokers, rng)
        made = await _drive(reactor, seconds, changes, slow, storm, topics, say)
        say(
            f"demo: {made} broker operations made (each wipes or restores a broker's write "
            "permission, resizes or creates a topic, or has a broker leave and come back: one "
            "or more topics' routes change; the report counts a change per topic and version); "
            "settling"
        )
        log.debug("name server counters: %s", dict(server.counters))
        await _sleep(reactor, 2.0)
    finally:
        for client in clients:
            await client.stop()
        for peer in peers:
            peer.close()
        for broker in brokers:
            broker.close()
        await server.stop(grace_ms=0)
    return Recording(namesrv, work / "journal", work / "telemetry", config_path)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="namesrv-pipeline demo",
        description="Run a name server, broker stand-ins and route clients on loopback, record "
        "the journal and telemetry, and write the pipeline's report of them.",
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument(
        "--out",
        help="directory for the recording and the report [default: a new directory under the "
        "system temp, said on stdout]",
    )
    p.add_argument("--seconds", type=float, default=60.0, help="how long the system runs")
    p.add_argument("--master", help="Spark master URL [default: local[*]]")
    add_version(p, "namesrv-pipeline")
    return p


def analysis(rec: Recording, out: Path, master: str | None = None) -> AnalysisRequest:
    """The analysis of ``rec``: its journal tied to its name server's address, its telemetry,
    and the config the name server ran with as the current values."""
    return AnalysisRequest(
        journals=(JournalSource(str(rec.journal), rec.namesrv),),
        out=str(out),
        telemetry=(str(rec.telemetry),),
        config=str(rec.config),
        master=master,
    )


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.seconds < 5:
        print("namesrv-pipeline demo: --seconds must be at least 5", file=sys.stderr)
        return 2
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        print(
            "namesrv-pipeline demo: Java 17 or newer must be on PATH or in JAVA_HOME (Spark "
            "runs on it)",
            file=sys.stderr,
        )
        return 3
    out = Path(args.out or tempfile.mkdtemp(prefix="namesrv-pipeline-demo-"))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"namesrv-pipeline demo: cannot create {out}: {exc}", file=sys.stderr)
        return 2
    # The name server and clients log every connection; the demo says what happens itself.
    for name in ("namesrv", "client_push", "namesrv_pipeline"):
        logging.getLogger(name).setLevel(logging.WARNING)

    from twisted.internet import reactor as default_reactor

    reactor: Any = default_reactor
    outcome: dict[str, Any] = {}

    async def go() -> None:
        try:
            outcome["rec"] = await record(reactor, out / "recording", args.seconds)
        except Exception as exc:
            outcome["error"] = exc
        finally:
            reactor.stop()

    reactor.callWhenRunning(lambda: defer.ensureDeferred(go()))
    reactor.run()
    if "error" in outcome:
        print(f"namesrv-pipeline demo: the run failed: {outcome['error']}", file=sys.stderr)
        return 1
    if "rec" not in outcome:
        print("namesrv-pipeline demo: interrupted", file=sys.stderr)
        return 1
    print("demo: analysing the recording with Spark", flush=True)
    code = analyse(analysis(outcome["rec"], out, args.master))
    if code == 0:
        print(f"demo: report: {(out / 'report.html').resolve()}")
        print(f"demo: tuned config: {(out / 'namesrv-tuned.toml').resolve()}")
    return code
