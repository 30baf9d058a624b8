"""The pipeline on what the real name server and route clients wrote over loopback."""

from __future__ import annotations

import pytest_twisted
from support.loopback_wait import until
from twisted.internet import defer

from client_push.routes.client import RouteClient
from namesrv_pipeline.cli import parse
from namesrv_pipeline.spark.job import run
from protocol.codes import RequestCode, ResponseCode

CLIENTS = 3


def held(client: RouteClient, topic: str) -> int | None:
    entry = client.cached_route(topic)
    return None if entry is None else entry.version


@pytest_twisted.ensureDeferred
async def test_journal_and_telemetry_of_a_real_run_give_its_propagation(cluster, spark, tmp_path):
    journal = tmp_path / "journal"
    server, port = cluster.start_server(journal={"directory": str(journal)})
    broker = await cluster.broker(port, "T", "U")  # start-up: suppressed by default
    (tmp_path / "telemetry").mkdir()
    clients = [
        cluster.client(port, telemetry_path=str(tmp_path / "telemetry" / f"c{i}.jsonl"))
        for i in range(CLIENTS)
    ]
    for client in clients:
        await defer.ensureDeferred(client.get_route("T"))
    await until(lambda: all(c.push_active and c.stats()["subscribed"] == 1 for c in clients))

    for code in (RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER):
        resp = await broker.call(code, {"brokerName": "broker-a"})
        assert resp.code == ResponseCode.SUCCESS
        cluster.tick()
        version, _ = server.detector.version("T")
        await until(lambda v=version: all(held(c, "T") == v for c in clients))
    await cluster.close()

    args = parse(
        [
            "--journal",
            f"127.0.0.1:{port}={journal}",
            "--telemetry",
            str(tmp_path / "telemetry"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    outputs = run(spark, args)
    report = outputs.report.read_text()
    # T's start-up was settled by the clients' first lookups; U's only at the wipe's tick,
    # together with the wipe, so U's first change is notified
    assert "5 changes, 4 of them notified; 1 suppressed." in report
    assert "| broker_startup | 1 |" in report
    assert f"{CLIENTS} subscribed connections closed" in report
    assert f"{2 * CLIENTS} brought a client-version tied to a journal change; 0 brought" in report
    # the clients ask for inline routes (the default): every change came with its route
    assert f"| end to end, learned by inline | {2 * CLIENTS} |" in report
    assert "100.0% of them learned inline" in report
    assert f"| delivery: NOTIFY emitted to route applied | {2 * CLIENTS} |" in report
