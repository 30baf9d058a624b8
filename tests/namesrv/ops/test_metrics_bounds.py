"""The metrics listener under attack: held-open connections, trickled requests, no credentials.

The server, the attackers and the scrapers share the deterministic world
(``support.memory_world``): one virtual clock, TCP in memory. Closing at the idle timeout is
asserted by moving the clock, and "nothing more happens" once the world is quiet.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
import pytest_twisted
from prometheus_client.parser import text_string_to_metric_families
from support.memory_world import WorldDeferred, connect, http_get, the_world, until
from twisted.internet import defer, protocol
from twisted.web import http as http_module

from namesrv.config import ConfigError, MetricsConfig, from_mapping

DEFAULTS = MetricsConfig()
IDLE_S = DEFAULTS.idle_timeout_ms / 1000.0
BATCH = 25


class RawClient(protocol.Protocol):
    """A peer that says only what the test makes it say, and notes when it is cut."""

    def __init__(self) -> None:
        self.received = b""
        self.lost: defer.Deferred[None] = defer.Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Any) -> None:
        self.lost.callback(None)

    def whole_answers(self) -> int:
        """HTTP answers received completely (each carries a Content-Length)."""
        count, rest = 0, self.received
        while b"\r\n\r\n" in rest:
            head, _, rest = rest.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            if len(rest) < length:
                break
            count, rest = count + 1, rest[length:]
        return count


class _Connects(protocol.ClientFactory):
    """Makes the peers of one kind, noting each."""

    def __init__(self, kind: type[RawClient]) -> None:
        self.kind = kind
        self.made: list[RawClient] = []

    def buildProtocol(self, addr: Any) -> RawClient:
        peer = self.kind()
        self.made.append(peer)
        return peer


def open_clients(port: int, n: int, kind: type[RawClient] = RawClient) -> list[RawClient]:
    """``n`` peers of ``kind`` connected to 127.0.0.1:``port`` in the running test's world."""
    world = the_world()
    connects = _Connects(kind)
    for _ in range(n):
        world.reactor.connectTCP("127.0.0.1", port, connects)
    world.settle()
    assert len(connects.made) == n, f"{len(connects.made)} of {n} connected"
    return connects.made


def metrics_port(ns: Any) -> int:
    return ns.server.metrics_port.getHost().port


def open_metrics_connections(ns: Any) -> int:
    return len(ns.server.metrics_port.factory.protocols)


def accepted(ns: Any) -> int:
    """Metrics connections the server has accepted so far (only the cap has closed any)."""
    return open_metrics_connections(ns) + ns.server.stats().get("metrics_connections_evicted", 0)


class AnswerHeaders:
    """An answer's headers, looked up by name."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def get_all(self, name: str) -> list[str]:
        return [v.decode("latin-1") for v in self.raw.getRawHeaders(name.encode(), [])]


def get(ns: Any, headers: dict[str, str] | None = None) -> tuple[int, AnswerHeaders, str]:
    """One scrape with Twisted's HTTP client: status, headers, text."""
    addr = f"127.0.0.1:{metrics_port(ns)}"
    status, answer_headers, body = http_get(the_world(), addr, "/metrics", headers)
    return status, AnswerHeaders(answer_headers), body.decode()


def sample(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return s.value
    raise AssertionError(f"{name}{labels} not in the page")


@pytest_twisted.ensureDeferred
async def test_200_idle_connections_stay_under_the_cap_and_close_at_the_idle_timeout(
    make_world_server,
):
    ns = make_world_server({"metrics": {"listen": "127.0.0.1:0"}})
    cap = DEFAULTS.max_connections
    attackers: list[RawClient] = []
    gone: list[RawClient] = []
    while len(attackers) < 200:
        # In batches, each one accepted and counted before the next connects.
        batch = open_clients(metrics_port(ns), BATCH)
        for client in batch:
            client.lost.addCallback(lambda _, c=client: gone.append(c))
        attackers += batch
        opened = len(attackers)
        await until(lambda n=opened: accepted(ns) == n)
        assert open_metrics_connections(ns) == min(len(attackers), cap)
    # Each accept past the cap closed the connection served longest ago: never more are open.
    await until(lambda: len(gone) == 200 - cap)
    assert open_metrics_connections(ns) == cap
    assert ns.server.stats()["metrics_connections_evicted"] == 200 - cap

    # A scrape during the attack is admitted (one more held-open connection goes) and served.
    status, _, text = get(ns)
    assert status == 200
    evicted = 200 - cap + 1
    assert sample(text, "rocketmq_namesrv_metrics_connections_evicted_total") == evicted
    assert (
        sample(text, "rocketmq_namesrv_bounds_reached_total", bound="metrics.max_connections")
        == evicted
    )
    await until(lambda: len(gone) == evicted)

    the_world().advance(IDLE_S - 0.125)
    assert open_metrics_connections(ns) == cap - 1  # the scrape's own connection has closed
    the_world().advance(0.125)
    assert open_metrics_connections(ns) == 0
    await until(lambda: all(c.lost.called for c in attackers))
    assert ns.server.stats()["metrics_idle_closes"] == cap - 1

    status, _, text = get(ns)
    assert status == 200
    assert sample(text, "rocketmq_namesrv_metrics_idle_closes_total") == cap - 1
    assert (
        sample(text, "rocketmq_namesrv_bounds_reached_total", bound="metrics.idle_timeout_ms")
        == cap - 1
    )


@pytest_twisted.ensureDeferred
async def test_a_request_trickled_byte_by_byte_is_cut_at_the_idle_timeout(make_world_server):
    ns = make_world_server({"metrics": {"listen": "127.0.0.1:0", "idle_timeout_ms": 1_000}})
    [slow] = open_clients(metrics_port(ns), 1)
    await until(lambda: open_metrics_connections(ns) == 1)
    [server_side] = ns.server.metrics_port.factory.protocols
    read = bytearray()  # what the server's side has read, noted as the transport hands it on
    deliver = server_side.dataReceived

    def note_read(data: bytes) -> None:
        read.extend(data)
        deliver(data)

    server_side.dataReceived = note_read
    for sent, byte in enumerate(b"GET /me", 1):
        slow.transport.write(bytes([byte]))
        await until(lambda n=sent: len(read) == n)  # read, yet unanswered
        the_world().advance(0.125)
    assert not slow.lost.called
    the_world().advance(0.125)
    await WorldDeferred(the_world(), slow.lost)
    assert ns.server.stats()["metrics_idle_closes"] == 1


@pytest_twisted.ensureDeferred
async def test_a_keep_alive_scraper_is_timed_from_its_last_answer(make_world_server):
    ns = make_world_server({"metrics": {"listen": "127.0.0.1:0", "idle_timeout_ms": 1_000}})
    [scraper] = open_clients(metrics_port(ns), 1)
    for answers in (1, 2, 3):
        the_world().advance(0.75)
        scraper.transport.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        await until(lambda n=answers: scraper.whole_answers() == n)
    the_world().advance(0.875)
    assert not scraper.lost.called
    the_world().advance(0.125)
    await WorldDeferred(the_world(), scraper.lost)
    assert ns.server.stats()["metrics_idle_closes"] == 1


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest_twisted.ensureDeferred
async def test_scrapes_without_the_right_credentials_get_401_and_are_counted(make_world_server):
    ns = make_world_server(
        {
            "metrics": {
                "listen": "127.0.0.1:0",
                "bearer_token": "t0ken-123",
                "basic_auth_user": "prom",
                "basic_auth_password": "pa55",
            }
        }
    )
    refused = [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Bearer t0ken-12"},
        {"Authorization": basic("prom", "wrong")},
        {"Authorization": "t0ken-123"},
    ]
    for headers in refused:
        status, answer_headers, text = get(ns, headers)
        assert status == 401, headers
        assert answer_headers.get_all("WWW-Authenticate") == [
            'Bearer realm="metrics"',
            'Basic realm="metrics"',
        ]
        assert "rocketmq_namesrv" not in text
    for headers in (
        {"Authorization": "Bearer t0ken-123"},
        {"Authorization": basic("prom", "pa55")},
    ):
        status, _, text = get(ns, headers)
        assert status == 200
        assert sample(text, "rocketmq_namesrv_metrics_auth_failures_total") == len(refused)


@pytest_twisted.ensureDeferred
async def test_a_bearer_token_alone_is_enough_and_no_credentials_get_401(make_world_server):
    ns = make_world_server({"metrics": {"listen": "127.0.0.1:0", "bearer_token": "abc"}})
    status, headers, _ = get(ns)
    assert status == 401
    assert headers.get_all("WWW-Authenticate") == ['Bearer realm="metrics"']
    status, _, _ = get(ns, {"Authorization": "Bearer abc"})
    assert status == 200


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({"max_connections": 0}, "metrics.max_connections must be between"),
        ({"idle_timeout_ms": 5}, "metrics.idle_timeout_ms must be between"),
        ({"basic_auth_user": "prom"}, "go together"),
        ({"basic_auth_password": "x"}, "go together"),
        ({"basic_auth_user": "a:b", "basic_auth_password": "x"}, "must not contain ':'"),
        ({"bearer_token": "two words"}, "printable ASCII without spaces"),
        ({"listen": "nowhere"}, "HOST:PORT"),
    ],
)
def test_metrics_config_out_of_bounds_is_refused_by_key(metrics, message):
    with pytest.raises(ConfigError, match=message):
        from_mapping({"metrics": metrics})


@pytest.fixture
def spooled(monkeypatch):
    """Every temporary file the HTTP layer opens for a request body (none may be)."""
    opened: list[Any] = []
    real = http_module.tempfile.TemporaryFile

    def counting(*args: Any, **kwargs: Any) -> Any:
        opened.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(http_module.tempfile, "TemporaryFile", counting)
    return opened


def refused_unread(ns: Any, head: bytes, body_bytes: int = 0) -> Any:
    """Sends ``head`` (and ``body_bytes`` of body after it, as an attacker streams one); the
    status line the server answered with once it closed the connection."""
    [peer] = open_clients(metrics_port(ns), 1)
    peer.transport.write(head)
    if body_bytes:
        peer.transport.write(b"x" * body_bytes)
    the_world().wait(peer.lost, within=10)  # a server reading the body never closes it
    return peer.received.split(b"\r\n", 1)[0]


BIG = b"Content-Length: 1073741824\r\n"
CHUNKED = b"Transfer-Encoding: chunked\r\n"


@pytest.mark.parametrize("token", ["", "s3cret"])
@pytest_twisted.ensureDeferred
async def test_bodies_and_other_methods_are_refused_on_their_head_and_never_spooled(
    make_world_server, spooled, token
):
    # The attack: an unauthenticated peer announcing a 1 GiB body and streaming it, with the
    # bearer token on and off. Refused on the head; not a byte spooled to a temporary file.
    ns = make_world_server({"metrics": {"listen": "127.0.0.1:0", "bearer_token": token}})
    attacks = [
        (b"POST /metrics HTTP/1.1\r\nHost: x\r\n" + BIG + b"\r\n", b"405"),
        (b"PUT /metrics HTTP/1.1\r\nHost: x\r\n" + CHUNKED + b"\r\n", b"405"),
        (b"DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"405"),
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + BIG + b"\r\n", b"413"),
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + CHUNKED + b"\r\n", b"413"),
        (b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n", b"413"),
    ]
    for head, status in attacks:
        line = refused_unread(ns, head, body_bytes=256 * 1024)
        assert line.startswith(b"HTTP/1.1 " + status), (head, line)
    assert spooled == []
    stats = ns.server.stats()
    assert stats["metrics_refused_method"] == 3 and stats["metrics_refused_body"] == 3
    assert "metrics_auth_failures" not in stats  # refused before credentials were looked at
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, _, text = get(ns, headers)  # the scraper is served all along
    assert status == 200
    assert sample(text, "rocketmq_namesrv_metrics_refused_body_total") == 3


@pytest_twisted.ensureDeferred
async def test_an_unauthenticated_get_is_refused_on_its_head_and_head_requests_are_served(
    make_world_server,
):
    ns = make_world_server({"metrics": {"listen": "127.0.0.1:0", "bearer_token": "abc"}})
    line = refused_unread(ns, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert line == b"HTTP/1.1 401 Unauthorized"
    [scraper] = open_clients(metrics_port(ns), 1)
    scraper.transport.write(
        b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc\r\n\r\n"
    )
    await until(lambda: b"\r\n\r\n" in scraper.received)
    head, _, body = scraper.received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and body == b""
    assert ns.server.stats()["metrics_auth_failures"] == 1


class NeverReads(RawClient):
    """A peer that pipelines requests and never reads an answer: reading is paused at once,
    so what the server sends stays in the connection, unread."""

    def connectionMade(self) -> None:
        self.transport.pauseProducing()


HEAD_BYTES = 1_024
"""More than an answer's status line and headers."""


def unsent_bytes(conn: Any) -> int:
    """What the server's side of a metrics connection holds, written but not yet read."""
    return len(conn.transport.outgoing)


@pytest_twisted.ensureDeferred
async def test_five_connections_pipelining_thousands_of_gets_never_reading_hold_one_page_each(
    make_world_server, monkeypatch
):
    from namesrv.net.metrics_http import MetricsResource

    ns = make_world_server({"metrics": {"listen": "127.0.0.1:0"}})
    renders: list[int] = []
    real_render = MetricsResource.render_GET

    def counting_render(self: Any, request: Any) -> bytes:
        page = real_render(self, request)
        renders.append(len(page))
        return page

    monkeypatch.setattr(MetricsResource, "render_GET", counting_render)
    attackers = open_clients(metrics_port(ns), 5, NeverReads)
    sent_per_connection = 3_000
    pipeline = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * sent_per_connection
    for attacker in attackers:
        attacker.transport.write(pipeline)
    # Served until what was written waits to be read, then nothing more: the renders stop.
    the_world().settle()
    page = max(renders)
    served = ns.server.metrics_port.factory.protocols
    assert len(served) == 5
    for conn in served:
        # One answer (its page and head) at most, never a queue of them.
        assert unsent_bytes(conn) <= page + HEAD_BYTES
    print(f"renders {len(renders)} of {5 * sent_per_connection} GETs, page {page} bytes")
    assert len(renders) < 5 * sent_per_connection // 4  # most GETs never read, never rendered
    # The name server and a fresh scraper are served throughout.
    from protocol.codes import RequestCode, ResponseCode

    peer = await connect(ns.port)
    resp = await peer.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert resp.code == ResponseCode.SUCCESS
    status, _, _ = get(ns)
    assert status == 200
    for attacker in attackers:
        attacker.transport.abortConnection()


@pytest_twisted.ensureDeferred
async def test_pipelined_gets_of_a_reading_scraper_are_all_answered_in_order(make_world_server):
    ns = make_world_server({"metrics": {"listen": "127.0.0.1:0"}})
    [scraper] = open_clients(metrics_port(ns), 1)
    scraper.transport.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 20)
    await until(lambda: scraper.whole_answers() == 20)
