"""Telemetry written by asyncio route clients, with the journal of the changes they learned:
the pipeline ties their fetches to the journal and names each client in its summary by the
``client_id`` and ``host`` its telemetry lines carry."""

from __future__ import annotations

import json
import random
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

pytest.importorskip("pyspark")

from support.aio_loop import LoopThread
from support.fake_namesrv import FakeNamesrv, make_route
from support.loopback_wait import until
from support.pipeline_records import changed, journal_file

from client_push import aio
from client_push.config import ClientConfig
from namesrv_pipeline.request import AnalysisRequest
from namesrv_pipeline.sources import JournalSource
from namesrv_pipeline.spark.job import run
from protocol.push_codec import ChangeKind

TOPICS = ("Orders", "Payments", "Refunds")
CLIENTS = 2
ROUNDS = 4


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def reach(stream: aio.RouteChanges, versions: dict[str, int]) -> None:
    """Read ``stream`` until it has yielded each topic at its version in ``versions`` (with
    ``next``: leaving an ``async for`` would close the stream and release its topics)."""
    held: dict[str, int] = {}
    while any(held.get(topic) != version for topic, version in versions.items()):
        change = await stream.next()
        held[change.topic] = change.version


async def record(tmp_path: Path) -> tuple[str, Path, Path]:
    """Asyncio clients learn ``ROUNDS`` changes of each topic from a name server that pushes
    them; what they wrote and the journal a name server would have kept of the changes."""
    ns = FakeNamesrv()
    ns.listen()
    loop = LoopThread("asyncio")
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    journal: list[dict[str, Any]] = []
    versions: dict[str, int] = {}
    for topic in TOPICS:
        journal.append(changed(now_ms(), topic, 1, kind="CREATED"))
        versions[topic] = ns.set_route(topic, make_route())
    clients: list[aio.RouteClient] = []
    try:
        for i in range(CLIENTS):
            config = ClientConfig(
                namesrv_addrs=(ns.addr,),
                telemetry_path=str(telemetry / f"app-{i}.jsonl"),
                client_id=f"orders-aio-{i}",
                version_check_interval_ms=3_600_000,  # only notifications drive the refetches
            )
            client = aio.RouteClient(config, rng=random.Random(i))
            await loop.run(client.__aenter__())
            clients.append(client)
        streams = [await loop.call(c.changes, list(TOPICS)) for c in clients]
        for stream in streams:
            await loop.run(reach(stream, versions))
        await until(
            lambda: len(ns.conns) == CLIENTS and all(set(TOPICS) <= c.topics for c in ns.conns)
        )
        for queues in range(2, 2 + ROUNDS):
            for topic in TOPICS:
                at = now_ms()
                versions[topic] = ns.set_route(topic, make_route(queues=queues))
                journal.append(changed(at, topic, versions[topic]))
                ns.notify([(topic, versions[topic], ChangeKind.UPDATED)], emitted_at_ms=at)
            for stream in streams:
                await loop.run(reach(stream, versions))
    finally:
        for client in clients:
            await loop.run(client.close())
        loop.stop()
        await ns.close()
    journal_file(tmp_path / "journal", journal)
    return ns.addr, tmp_path / "journal", telemetry


@pytest_twisted.ensureDeferred
async def test_a_run_on_asyncio_clients_telemetry_names_them_by_id_and_host(spark, tmp_path):
    namesrv, journal, telemetry = await record(tmp_path)
    host = socket.gethostname()
    for i in range(CLIENTS):
        lines = [json.loads(x) for x in (telemetry / f"app-{i}.jsonl").read_text().splitlines()]
        assert {(x["client_id"], x["host"]) for x in lines} == {(f"orders-aio-{i}", host)}
        assert sum(x["cause"] == "notify" for x in lines) == ROUNDS * len(TOPICS)

    outputs = run(
        spark,
        AnalysisRequest(
            journals=(JournalSource(str(journal), namesrv),),
            out=str(tmp_path / "out"),
            telemetry=(str(telemetry),),
        ),
    )
    summary = json.loads(outputs.summary.read_text())["summary"]
    learned = ROUNDS * len(TOPICS)
    assert summary["fetches_by_cause"] == {
        "first": CLIENTS * len(TOPICS),
        "notify": CLIENTS * learned,
    }
    assert summary["learned_changes"] == CLIENTS * learned and summary["unmatched_fetches"] == 0
    shown = sorted((name, n) for name, n, _mean, _worst in summary["charts"]["top_clients"])
    assert shown == [(f"orders-aio-{i} ({host})", learned) for i in range(CLIENTS)]
