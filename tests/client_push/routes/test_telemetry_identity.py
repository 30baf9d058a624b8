"""Every telemetry line names the client that wrote it (``client_id``, ``host``), so a reader
of many files (the pipeline's report) can call each client what its operator calls it: the
Twisted client and the asyncio one (plain and uvloop) alike."""

from __future__ import annotations

import json
import socket

import pytest
import pytest_twisted
from support.fake_namesrv import FakeNamesrv, make_route
from support.loopback_wait import until
from support.route_drivers import DRIVER_KINDS, driver_factory

from client_push.routes.telemetry import JsonLinesTelemetry, RefetchRecord


def test_each_line_carries_the_identity_the_sink_was_given(tmp_path):
    path = tmp_path / "t.jsonl"
    sink = JsonLinesTelemetry(str(path), identity={"client_id": "orders-7", "host": "app-3"})
    for version in (1, 2):
        sink.record(RefetchRecord("A", version, True, "poll", None, 1, 2, "127.0.0.1:9876"))
    sink.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["client_id"], r["host"], r["version"]) for r in lines] == [
        ("orders-7", "app-3", 1),
        ("orders-7", "app-3", 2),
    ]


@pytest.mark.parametrize("kind", DRIVER_KINDS)
@pytest_twisted.ensureDeferred
async def test_the_route_client_writes_its_configured_id_and_its_host(tmp_path, kind):
    ns = FakeNamesrv()
    ns.listen()
    path = tmp_path / "telemetry.jsonl"
    make, cleanup = driver_factory(kind)
    driver = make([ns.addr], telemetry_path=str(path), client_id="svc-1")
    await driver.start()
    try:
        ns.set_route("T", make_route())
        await driver.get("T")
        await until(lambda: path.exists() and path.read_text().count("\n") == 1)
    finally:
        await driver.stop()
        await ns.close()
        cleanup()
    [line] = [json.loads(text) for text in path.read_text().splitlines()]
    assert (line["client_id"], line["host"]) == ("svc-1", socket.gethostname())
