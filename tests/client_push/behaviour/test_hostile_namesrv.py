"""The route client stays bounded whatever its name server does, in the deterministic world
(``support.memory_route_world``): each test here is the hostile peer.

A server that never reads: writing pauses, requests in flight stay within their count and byte
bounds (one past them fails at once, ``RequestsInFlightError``), and closing returns within
``close_timeout_ms``. A server that sends malformed frames or notifications: each is counted,
the warnings are paced. A route too large to decode on the loop is refused by size first.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from support.fake_namesrv import FakeNamesrv, make_route
from support.memory_route_world import MemoryDriver as RouteDriver
from support.memory_route_world import MemoryRouteWorld
from support.memory_world import until
from twisted.internet import defer, protocol

from client_push.errors import RouteClientError
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand, encode_command
from protocol.push_codec import encode_notification
from protocol.push_events import ChangeKind
from protocol.route_model import BrokerData, QueueData, TopicRouteData

MIB = 1024 * 1024


class Deaf(protocol.Protocol):
    """Accepts the connection and never reads from it."""

    def connectionMade(self) -> None:
        self.transport.pauseProducing()  # type: ignore[union-attr]


class Garbling(protocol.Protocol):
    """Answers every connection with a frame announcing 1 GiB: a malformed frame."""

    def connectionMade(self) -> None:
        self.transport.write(struct.pack(">I", 1 << 30) + b"\x00" * 8)  # type: ignore[union-attr]


class Hostile(protocol.Factory):
    def __init__(self, kind: type[protocol.Protocol], network: Any) -> None:
        self.kind = kind
        # In memory there is no kernel buffer: what the peer does not read stays in the
        # client's transport, whose buffer bound pauses its writing.
        self.port: Any = network.listenTCP(0, self, interface="127.0.0.1")
        self.addr = f"127.0.0.1:{self.port.getHost().port}"
        self.conns: list[protocol.Protocol] = []

    def buildProtocol(self, addr: object) -> protocol.Protocol:
        conn = self.kind()
        self.conns.append(conn)
        return conn


class Rig:
    """Hostile peers and fake name servers, and route clients of them, in one world."""

    def __init__(self, routes: MemoryRouteWorld) -> None:
        self.routes = routes
        self.ports: list[Any] = []

    def hostile(self, kind: type[protocol.Protocol]) -> Hostile:
        server = Hostile(kind, self.routes.world.reactor)
        self.ports.append(server.port)
        return server

    def fake(self) -> FakeNamesrv:
        return self.routes.server()

    async def client(self, addr: str, **overrides: Any) -> RouteDriver:
        return await self.routes.client_at(addr, **overrides)

    def close(self) -> None:
        for port in self.ports:
            for conn in port.factory.conns:
                if conn.transport is not None:
                    conn.transport.abortConnection()
            port.stopListening()


@pytest.fixture
def rig(memory_routes: MemoryRouteWorld) -> Iterator[Rig]:
    r = Rig(memory_routes)
    yield r
    r.close()


def long_topics(n: int, length: int, prefix: str = "") -> list[str]:
    return [f"{prefix}{i:06d}" + "x" * length for i in range(n)]


@pytest_twisted.ensureDeferred
async def test_a_name_server_that_never_reads_pauses_writing_and_bounds_the_bytes(rig):
    server = rig.hostile(Deaf)
    bound = 8 * MIB
    d = await rig.client(
        server.addr,
        max_request_bytes_in_flight=bound,
        max_requests_in_flight=100_000,
        write_buffer_bytes=64 * 1024,
        close_timeout_ms=100,
    )
    await until(lambda: d.client.connected)
    outcomes: list[str] = []
    asked = 0
    for round_ in range(3):  # the application keeps asking, round after round
        topics = long_topics(400, 16_000, prefix=f"r{round_}-")  # ~6.4 MB a round
        asked += len(topics)
        await d.ask(topics, outcomes)
        # At most ``fits`` requests of ~16 kB fit in the bound; every other lookup fails.
        fits = bound // 16_000

        def settled(asked: int = asked, fits: int = fits) -> bool:
            done = len(outcomes)
            return done + d.client.outstanding()["fetches"] == asked and done >= asked - fits

        await until(settled)
        assert d.client.outstanding()["request_bytes"] <= bound
    stats = d.client.stats()
    assert stats["wire.writes_paused"] >= 1
    assert stats["wire.requests_refused_in_flight"] >= 1
    assert outcomes and set(outcomes) == {"RequestsInFlightError"}
    assert d.client.outstanding()["request_bytes"] > bound // 2  # it was full, not idle
    assert d.client.outstanding()["held_back_writes"] > 0
    # Requests that time out while held back leave with their bytes: never written later.
    await d.advance(3.0)
    await until(lambda: d.client.outstanding()["request_bytes"] == 0)
    assert d.client.outstanding()["held_back_writes"] == 0


@pytest_twisted.ensureDeferred
async def test_closing_returns_within_its_bound_though_the_peer_never_reads(rig):
    server = rig.hostile(Deaf)
    # A transport allowed to buffer everything: what the kernel does not take stays in it,
    # and a graceful close would wait for the peer for ever.
    d = await rig.client(server.addr, write_buffer_bytes=64 * MIB, close_timeout_ms=100)
    await until(lambda: d.client.connected)
    outcomes: list[str] = []
    topics = long_topics(600, 16_000)  # ~9.6 MB, more than the kernel's buffers
    await d.ask(topics, outcomes)
    await until(lambda: d.client.outstanding()["fetches"] == len(topics))
    await d.stop()  # returns: the close is aborted once close_timeout_ms has passed
    assert d.client.stats()["wire.close_aborted"] == 1
    await until(lambda: len(outcomes) == len(topics))
    assert set(outcomes) == {"ClientStoppedError"}


@pytest_twisted.ensureDeferred
async def test_requests_past_the_count_bound_fail_at_once_with_a_clear_error(rig):
    server = rig.hostile(Deaf)
    d = await rig.client(server.addr, max_requests_in_flight=20)
    await until(lambda: d.client.connected)
    outcomes: list[str] = []
    await d.ask([f"T{i}" for i in range(50)], outcomes)

    def settled() -> bool:
        out = d.client.outstanding()
        # Every lookup either waits on one of the 20 requests or has failed at once.
        return (
            out["requests"] == 20
            and len(outcomes) + out["fetches"] == 50 <= out["fetches"] + 30 + out["push_requests"]
        )

    await until(settled)
    assert set(outcomes) == {"RequestsInFlightError"}
    await _refused(d, next(iter(d.client._link.connections)))


async def _refused(d: RouteDriver, conn: Any) -> None:
    """A request past the bound names the bound in its error."""
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"})
    refused = conn.request(cmd, 1000)
    with pytest.raises(RouteClientError, match="at most 20 requests"):
        await refused


@pytest_twisted.ensureDeferred
async def test_malformed_frames_are_each_counted_and_their_warnings_paced(rig, caplog):
    server = rig.hostile(Garbling)
    caplog.set_level(logging.WARNING, logger="client_push")
    d = await rig.client(server.addr, reconnect_initial_ms=100, reconnect_max_ms=100)

    def refused() -> int:
        return d.client.stats().get("wire.frames_refused", 0)

    for i in range(1, 6):
        await until(lambda i=i: refused() == i)
        await until(lambda: d.client._link.reconnect_pending)  # the reconnect is armed
        d.world.run_until(lambda i=i: refused() == i + 1, within=0.1)  # and runs in time
    closing = [r for r in caplog.records if "closing connection" in r.getMessage()]
    assert d.client.stats()["wire.frames_refused"] >= 5
    assert len(closing) == 1  # five frames refused within the pace interval: one line


@pytest_twisted.ensureDeferred
async def test_malformed_notifications_are_each_counted_and_their_warnings_paced(rig, caplog):
    ns = rig.fake()
    ns.set_route("T", make_route())
    caplog.set_level(logging.WARNING, logger="client_push")
    d = await rig.client(ns.addr)
    await d.get("T")
    await until(lambda: "T" in ns.subscribed() and d.client.push_active)
    for opaque in range(100, 105):
        notify = RemotingCommand.request(
            RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, body=b"\xff not a notification"
        )
        notify.opaque = opaque
        ns.conns[0].transport.write(encode_command(notify))
    await until(lambda: d.client.counters["notifications_unreadable"] == 5)
    lines = [r for r in caplog.records if "malformed NOTIFY" in r.getMessage()]
    assert len(lines) == 1


def big_route(brokers: int) -> TopicRouteData:
    names = [f"broker-{i:04d}" for i in range(brokers)]
    return TopicRouteData(
        queue_datas=[QueueData(name, 4, 4, 6) for name in names],
        broker_datas=[
            BrokerData("C", name, {0: f"10.0.{i // 250}.{i % 250}:10911"})
            for i, name in enumerate(names)
        ],
    )


@pytest_twisted.ensureDeferred
async def test_a_route_over_the_body_bound_is_refused_before_it_is_decoded(rig):
    ns = rig.fake()
    ns.set_route("Big", big_route(200))
    ns.set_route("Small", make_route())
    d = await rig.client(ns.addr, max_route_body_bytes=4096)
    with pytest.raises(RouteClientError, match="max_route_body_bytes"):
        await d.get("Big")
    assert d.client.counters["routes_refused"] >= 1
    await d.get("Small")  # the client goes on serving
    assert d.client.cached_route("Small") is not None and d.client.cached_route("Big") is None


@pytest_twisted.ensureDeferred
async def test_lookups_waiting_for_a_connection_are_bounded_too(rig):
    server = rig.hostile(Deaf)
    addr = server.addr
    await defer.maybeDeferred(server.port.stopListening)  # nobody listens there any more
    rig.ports.remove(server.port)
    d = await rig.client(addr, max_requests_in_flight=5)
    outcomes: list[str] = []
    await d.ask([f"T{i}" for i in range(12)], outcomes)
    await until(lambda: d.client.outstanding()["waiting_for_connection"] == 5)
    await until(lambda: len(outcomes) == 7)
    assert set(outcomes) == {"RequestsInFlightError"}


class Flooding(protocol.Protocol):
    """Writes ``FLOOD_FRAMES`` no-op NOTIFY frames (naming a topic nobody holds), each asking
    for an answer, as fast as the connection takes them, never reading the answers."""

    frames = 0

    def connectionMade(self) -> None:
        self.transport.pauseProducing()  # type: ignore[union-attr]
        body = encode_notification([("NobodyHoldsThis", 1, int(ChangeKind.UPDATED))], 1, 1, "e")
        cmd = RemotingCommand.request(RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, body=body)
        self.batch = encode_command(cmd) * 1_000
        self.transport.registerProducer(self, False)  # type: ignore[union-attr]

    def resumeProducing(self) -> None:
        if self.frames >= FLOOD_FRAMES:
            self.transport.unregisterProducer()  # type: ignore[union-attr]
            return
        self.frames += 1_000
        self.transport.write(self.batch)  # type: ignore[union-attr]

    def stopProducing(self) -> None:
        self.frames = FLOOD_FRAMES


FLOOD_FRAMES = 700_000


@pytest_twisted.ensureDeferred
async def test_a_name_server_flooding_notifications_is_read_only_as_fast_as_they_are_handled(rig):
    server = rig.hostile(Flooding)
    bound = 2 * MIB
    d = await rig.client(server.addr, max_unprocessed_input_bytes=bound, close_timeout_ms=500)
    await until(lambda: d.client.connected)
    await until(lambda: d.client.stats().get("wire.input_held_for_output", 0) >= 1, timeout=60)
    stats = d.client.stats()
    # The answers the flooder does not read stop the client reading it: they stay within the
    # bound and the answers to one read, as does what it received and has not handled.
    assert stats["wire.held_writes_max_bytes"] <= bound + 1 * MIB
    assert stats.get("wire.input_held_max_bytes", 0) <= bound + 256 * 1024
    assert stats["wire.input_paused"] >= 1
    assert stats.get("wire.writes_dropped", 0) == 0
    handled = stats["notify_received"]
    assert handled < FLOOD_FRAMES // 2
    await d.stop()  # within close_timeout_ms: the close is aborted, queued input dropped
    assert d.client.stats()["notify_received"] == handled
