"""The aiohttp example of the README (examples/aio_route_service.py) against the real name
server in this process: its endpoint answers with a topic's route, and a change made at the
name server shows in the next answers without restarting anything.

The app's route client runs on the loop thread; its state is read there (``loop_thread.call``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest_twisted
from aiohttp import test_utils
from support.examples import load_example
from support.loopback_wait import until, until_read

from client_push.config import ClientConfig
from protocol.codes import Perm

service = load_example("aio_route_service")


async def open_app(port: int, watch: list[str]) -> test_utils.TestClient:
    app = service.build_app(ClientConfig(namesrv_addrs=(f"127.0.0.1:{port}",)), watch)
    http = test_utils.TestClient(test_utils.TestServer(app))
    await http.start_server()
    return http


async def get_json(http: test_utils.TestClient, path: str) -> tuple[int, Any]:
    response = await http.get(path)
    return response.status, await response.json()


@pytest_twisted.ensureDeferred
async def test_the_endpoint_answers_with_the_route_and_shows_a_change_without_restart(
    cluster, loop_thread, caplog
):
    caplog.set_level(logging.INFO, logger="aio_route_service")
    server, port = cluster.start_server()
    broker = await cluster.broker(port, "TopicTest")
    cluster.tick()
    without_app = server.stats()["connections"]
    http = await loop_thread.run(open_app(port, ["TopicTest"]))
    try:
        status, body = await loop_thread.run(get_json(http, "/routes/TopicTest"))
        assert status == 200
        assert body["topic"] == "TopicTest" and body["writable_queues"] > 0
        assert all(q["perm"] & Perm.WRITE for q in body["queues"])
        route_client = http.app[service.ROUTE_CLIENT]
        await until_read(lambda: loop_thread.call(lambda: route_client.push_active))

        await cluster.wipe(broker)  # the change, made through the name server
        cluster.tick()
        await until_read(
            lambda: loop_thread.call(
                lambda: route_client.cached_route("TopicTest").version > body["version"]
            )
        )
        status, after = await loop_thread.run(get_json(http, "/routes/TopicTest"))
        assert status == 200
        assert after["version"] > body["version"]
        assert after["writable_queues"] == 0
        assert not any(q["perm"] & Perm.WRITE for q in after["queues"])
        # learned by push (the route inside the notification), not by a fetch or a poll
        counters = await loop_thread.call(route_client.counters.copy)
        assert counters["routes_inline"] == 1
        assert counters["fetch.notify"] == 0
        # The watcher logged it as it arrived (on the loop thread, where the log is read).
        await until_read(lambda: loop_thread.call(lambda: "(inline)" in caplog.text))

        status, missing = await loop_thread.run(get_json(http, "/routes/NoSuchTopic"))
        assert status == 404 and "does not exist" in missing["error"]
    finally:
        await loop_thread.run(http.close())
    # The server has read all the client sent once it has seen its connection close.
    await until(lambda: server.stats()["connections"] == without_app)
    # the first lookup and the absent topic's; the change itself cost no request
    assert server.stats()["handled.GET_ROUTEINFO_BY_TOPIC"] == 2


def test_the_example_listens_on_loopback_unless_told_otherwise():
    assert service.build_parser().parse_args([]).host == "127.0.0.1"
    assert service.build_parser().parse_args(["--host", "0.0.0.0"]).host == "0.0.0.0"
