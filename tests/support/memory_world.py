"""A deterministic world for behaviour tests: the real name server, the real route clients and
producers and broker stand-ins, all on one virtual clock and one network in memory.

The rules:

- **One clock.** Every part runs on the world's ``MemoryReactor``: the name server
  (``NameServer(reactor=..., clock=...)``), the clients and producers (the Twisted runtime of
  ``client_push`` over that reactor: its futures, tasks, timers and connects), the broker
  stand-ins and the test's own wire connections. Time moves only by ``advance`` and
  ``run_until``; nothing reads the wall clock or the real reactor.
- **Only the socket is faked.** Servers listen and clients connect through the reactor's TCP
  in memory (``support.memory_network``): bytes in order, reads that pause, send buffers that
  fill, closes and aborts. Everything above the socket is the code under test.
- **Quiescence, not waiting.** ``settle`` runs what is due now, then hands bytes on, until
  nothing is left (within ``MAX_STEPS``, else it fails and says what is still going on). After
  it, every frame written has been read and answered as far as the code answers without time
  moving: a test proves that something did *not* happen by asserting after ``settle``.
- **Time in steps.** ``advance(s)`` moves the clock to each armed timer in turn (settling
  after each) up to ``s``; ``run_until(predicate, within=s)`` does the same until the predicate
  holds and fails loudly when it does not within ``s``.

- **Awaiting never waits.** A Deferred the world hands out (``WorldDeferred``: a coroutine
  started with ``start``, a request on a ``WorldWire``) settles the world when awaited and
  fails if it has not fired then; ``until(condition)`` settles the running test's worlds and
  asserts. So an ``async`` test written for loopback runs here unchanged in shape, and never
  hands control to the real reactor while it waits.

A test is then a function of its inputs: the same calls give the same order of events on a
busy machine and an idle one. A few real-loopback smoke tests per event loop check what this
world cannot (the adapters' own sockets, TLS).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Coroutine, Generator, Iterator
from typing import Any, TypeVar

import pytest
from twisted.internet import defer, protocol
from twisted.python.failure import Failure
from twisted.web.client import HTTP11ClientProtocol, Request, ResponseDone
from twisted.web.http_headers import Headers

from client_push.config import ClientConfig
from client_push.producer.config import ProducerConfig
from client_push.producer.producer import Producer
from client_push.routes.client import RouteClient
from namesrv.config import NamesrvConfig
from namesrv.server import NameServer
from namesrv_sandbox.standin import BrokerStandIn
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.route_model import DataVersion
from support.fake_broker import register_request, topic_configs
from support.memory_network import MemoryReactor, NotSettledError
from support.server_fixtures import FakeSampler, Running, plain_server_config, world_config
from support.wire_client import WireClient

T = TypeVar("T")

MAX_STEPS = 200_000
"""Timer calls and reads one ``settle`` may take: more means the parts never go quiet."""

DEFAULT_WITHIN_S = 60.0
"""How far ``run_until`` and ``wait`` may move the clock unless told."""


WorldNotSettled = NotSettledError


LIVE: list[MemoryWorld] = []
"""The worlds of the running test (``until`` settles them); fixtures add and remove theirs."""


async def until(condition: Callable[[], bool], timeout: float = 0.0) -> None:
    """Settle the running test's worlds, then assert ``condition``: what has not happened
    once the worlds are quiet will not happen without the clock moving. (``timeout`` keeps
    the face of ``support.loopback_wait.until`` and means nothing here: nothing waits.)"""
    for world in LIVE:
        world.settle()
    if not condition():
        raise WorldNotSettled("condition does not hold once the world is quiet")


class WorldDeferred(defer.Deferred[T]):
    """A Deferred of the world that, awaited, settles the world first and fails when it has
    not fired then (awaiting it can never wait for the real reactor)."""

    def __init__(self, world: MemoryWorld, source: defer.Deferred[T]) -> None:
        super().__init__()
        self._world = world
        source.chainDeferred(self)

    def __await__(self) -> Generator[Any, None, T]:
        self._world.settle()
        if not self.called:
            raise WorldNotSettled(f"not ended once the world is quiet: {self._world.describe()}")
        return (yield from super().__await__())


class MemoryWorld:
    """The parts of one test on one ``MemoryReactor``; ``close`` stops them all."""

    def __init__(self, max_steps: int = MAX_STEPS) -> None:
        self.reactor = MemoryReactor()
        self.max_steps = max_steps
        self.servers: list[NameServer] = []
        self.clients: list[RouteClient] = []
        self.producers: list[Producer] = []
        self.brokers: list[BrokerStandIn] = []
        self.wires: list[WireClient] = []
        self._epochs = itertools.count(1)
        self._data_version = 1

    # -- time --------------------------------------------------------------------------------

    def now(self) -> float:
        return float(self.reactor.seconds())

    def now_ms(self) -> int:
        """The clock in whole milliseconds, read as the parts read it."""
        return int(self.reactor.seconds() * 1000)

    def start_at(self, seconds: float) -> None:
        """Set the clock to ``seconds`` (since the epoch, for parts that compare stamps with a
        wall clock) before any part starts: it never goes back once one has."""
        if self.servers or self.clients or self.brokers or self.wires or self.reactor.calls:
            raise RuntimeError("the clock is set before any part of the world starts")
        self.reactor.move_to(seconds)

    def settle(self) -> None:
        """Run what is due now and deliver bytes until nothing is left."""
        self.reactor.settle(self.max_steps)

    def advance(self, seconds: float) -> None:
        """Move the clock by ``seconds``, running each timer at its time, settled after each."""
        self.reactor.advance(seconds, self.max_steps)

    def run_until(self, predicate: Callable[[], bool], within: float = DEFAULT_WITHIN_S) -> float:
        """Settle, then move from timer to timer until ``predicate`` holds; the seconds that
        took. Fails when it does not hold within ``within`` seconds of the clock."""
        start = self.now()
        deadline = start + within
        self.settle()
        while not predicate():
            due = self.reactor.next_due()
            if due is None or due > deadline:
                raise WorldNotSettled(
                    f"condition not reached within {within} s: {self.reactor.describe()}"
                )
            self.reactor.move_to(max(due, self.now()))
            self.settle()
        return self.now() - start

    def wait(self, d: defer.Deferred[T], within: float = DEFAULT_WITHIN_S) -> T:
        """The result of ``d`` (its error raised), moving the clock as its timers need."""
        outcome: list[Any] = []
        d.addBoth(outcome.append)
        self.run_until(lambda: bool(outcome), within)
        result = outcome[0]
        if isinstance(result, Failure):
            result.raiseException()
        return result  # type: ignore[no-any-return]

    def run(self, coro: Coroutine[Any, Any, T], within: float = DEFAULT_WITHIN_S) -> T:
        """Run ``coro`` on the world (a client's ``get_route``, a producer's send) to its end."""
        return self.wait(defer.Deferred.fromCoroutine(coro), within)

    def start(self, coro: Coroutine[Any, Any, T]) -> WorldDeferred[T]:
        """Start ``coro`` without waiting: a Deferred of its result, for ``wait`` later (or
        ``await`` once the clock has moved far enough)."""
        return WorldDeferred(self, defer.Deferred.fromCoroutine(coro))

    def describe(self) -> str:
        return self.reactor.describe()

    # -- parts -------------------------------------------------------------------------------

    def serve(
        self, config: NamesrvConfig, sampler: FakeSampler | None = None, epoch: str | None = None
    ) -> tuple[NameServer, int]:
        """A name server of ``config``, listening (``sampler``: the load it reads), and its
        port."""
        server = NameServer(
            config,
            self.reactor,
            clock=self.reactor,
            sampler=sampler or FakeSampler(),
            epoch=epoch or f"e{next(self._epochs)}",
            timer=lambda: 0.0,
        )
        port = server.listen().getHost().port  # type: ignore[attr-defined]
        self.servers.append(server)
        return server, port

    def server(
        self, port: int = 0, *, sampler: FakeSampler | None = None, **overrides: Any
    ) -> tuple[NameServer, str]:
        """A name server listening (``overrides``: config sections; ``sampler``: the load it
        reads), and its ``HOST:PORT``. The start-up window is off and brokers never expire
        unless a test says so."""
        server, bound = self.serve(world_config(f"127.0.0.1:{port}", overrides), sampler)
        return server, f"127.0.0.1:{bound}"

    def client(self, *addrs: str, seed: int = 11, **overrides: Any) -> RouteClient:
        """A route client of ``addrs``, started (``overrides``: ``ClientConfig`` fields)."""
        config = ClientConfig(namesrv_addrs=addrs, **overrides)
        client = RouteClient(config, self.reactor, random.Random(seed), clock=self.reactor)
        client.start()
        self.clients.append(client)
        return client

    def producer(
        self,
        client: RouteClient,
        config: ProducerConfig | None = None,
        *,
        group: str = "pg",
        seed: int = 3,
    ) -> Producer:
        """A producer on ``client`` (its timers and broker connections the client's), started."""
        producer = Producer(client, group, config, rng=random.Random(seed))
        producer.start()
        self.producers.append(producer)
        return producer

    def broker(self, name: str, topics: dict[str, int], *addrs: str, **kw: Any) -> BrokerStandIn:
        """A broker stand-in registered with the name servers at ``addrs`` (``kw``: the
        stand-in's own settings)."""
        broker = BrokerStandIn(name, topics, list(addrs), reactor=self.reactor, **kw)
        self.wait(broker.start())
        self.brokers.append(broker)
        return broker

    def connect(self, addr: str, source: str | None = None) -> WorldWire:
        """A raw remoting connection to ``addr`` (a test's broker or hostile peer);
        ``source`` poses as another host."""
        host, _, port = addr.rpartition(":")
        wire = WorldWire(self)
        factory = _OneProtocol(wire)
        self.reactor.connectTCP(
            host, int(port), factory, bindAddress=(source, 0) if source else None
        )
        self.settle()
        if wire.transport is None:
            raise ConnectionRefusedError(f"nobody listens on {addr}")
        self.wires.append(wire)
        return wire

    def call(self, wire: WireClient, code: int, ext: dict[str, str] | None = None) -> Any:
        """One request on ``wire``, answered."""
        return self.wait(wire.call(code, ext or {}))

    def broker_wire(
        self, addr: str, *topics: str, broker_name: str = "broker-a", **kw: Any
    ) -> WireClient:
        """A test's broker: a raw connection to ``addr`` that has registered ``topics``."""
        wire = self.connect(addr)
        self.register(wire, *topics, broker_name=broker_name, **kw)
        return wire

    def register(
        self, wire: WireClient, *topics: str, broker_name: str = "broker-a", **kw: Any
    ) -> None:
        """REGISTER_BROKER of ``topics`` on ``wire``, each with a data version above the last
        (``kw``: ``register_request``'s own, ``broker_addr`` say)."""
        self._data_version += 1
        version = DataVersion(
            state_version=0, timestamp=self._data_version, counter=self._data_version
        )
        request = register_request(
            topic_configs(*topics), broker_name=broker_name, data_version=version, **kw
        )
        resp = self.wait(wire.request(request))
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    def wipe(self, wire: WireClient, broker_name: str = "broker-a") -> None:
        """WIPE_WRITE_PERM_OF_BROKER of ``broker_name``, answered with success."""
        resp = self.call(wire, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    # -- the end -----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every part (producers, clients, brokers, servers); a client that counted an
        internal error fails the test here."""
        errors = {id(c): c.counters["internal_errors"] for c in self.clients}
        for producer in self.producers:
            self.wait(producer.stop())
        for client in self.clients:
            self.wait(client.stop())
        for wire in self.wires:
            if wire.connected and wire.transport is not None:
                wire.transport.loseConnection()
        for broker in self.brokers:
            self.wait(broker.kill())
        for server in self.servers:
            self.wait(server.stop(grace_ms=0))
        self.settle()
        assert all(count == 0 for count in errors.values()), f"internal errors: {errors}"


class WorldWire(WireClient):
    """A test's raw connection in the world: its answers are the world's Deferreds (awaited,
    they settle the world first and fail if not answered then)."""

    def __init__(self, world: MemoryWorld) -> None:
        super().__init__()
        self.world = world

    def request(self, cmd: RemotingCommand) -> WorldDeferred[RemotingCommand]:  # type: ignore[override]
        return WorldDeferred(self.world, super().request(cmd))

    def ascii_json_request(  # type: ignore[override]
        self, code: int, ext: dict[str, str], body: bytes = b""
    ) -> WorldDeferred[RemotingCommand]:
        return WorldDeferred(self.world, super().ascii_json_request(code, ext, body))

    def wait_pushed(self, count: int = 1, timeout: float = 5.0) -> WorldDeferred[Any]:
        """Fires once ``count`` server-initiated frames have arrived (``timeout``: seconds of
        the world's clock)."""
        d: defer.Deferred[Any] = defer.Deferred()
        if len(self.pushed) >= count:
            d.callback(list(self.pushed))
        else:
            self._push_waiters.append((count, d))
            d.addTimeout(timeout, self.world.reactor)
        return WorldDeferred(self.world, d)


def the_world() -> MemoryWorld:
    """The one world of the running test."""
    assert len(LIVE) == 1, f"{len(LIVE)} worlds in this test; name the one to use"
    return LIVE[0]


async def connect(port: int, source: str | None = None) -> WorldWire:
    """A raw connection to 127.0.0.1:``port`` in the running test's world (the face of
    ``support.wire_client.connect``); ``source`` poses as another host."""
    return the_world().connect(f"127.0.0.1:{port}", source)


@pytest.fixture
def make_world_server(memory_world: MemoryWorld) -> Callable[..., Running]:
    """``make_server``'s face in the world: start test servers (config overrides) from inside
    a test; they run on the world's one clock and are stopped with it."""

    def make(overrides: dict[str, Any] | None = None) -> Running:
        sampler = FakeSampler()
        server, port = memory_world.serve(plain_server_config(overrides), sampler, epoch="e1")
        return Running(server, port, memory_world.reactor, sampler)  # type: ignore[arg-type]

    return make


WALL_START_S = 1_700_000_000.0
"""Where ``make_wall_server``'s world starts its clock: a wall-clock time (seconds since the
epoch), for servers that judge stamps their peers took from a wall clock."""


@pytest.fixture
def make_wall_server(
    memory_world: MemoryWorld, make_world_server: Callable[..., Running]
) -> Callable[..., Running]:
    """``make_world_server`` in a world whose clock starts at ``WALL_START_S``."""
    memory_world.start_at(WALL_START_S)
    return make_world_server


def now_ms() -> int:
    """The running test's world clock in whole milliseconds, as its servers read it."""
    return the_world().now_ms()


class _OneProtocol(protocol.ClientFactory):
    """Connects one given protocol instance."""

    def __init__(self, proto: protocol.Protocol) -> None:
        self.proto = proto

    def buildProtocol(self, addr: Any) -> protocol.Protocol:
        return self.proto


@pytest.fixture
def memory_world() -> Iterator[MemoryWorld]:
    """A ``MemoryWorld``, its parts stopped after the test."""
    world = MemoryWorld()
    LIVE.append(world)
    try:
        yield world
    finally:
        LIVE.remove(world)
        world.close()


def http_get(
    world: MemoryWorld, addr: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, Headers, bytes]:
    """GET ``path`` (with ``headers`` besides ``Host``) from the HTTP server at ``addr`` in
    ``world`` with Twisted's HTTP/1.1 client: the status, the headers and the body, the
    connection closed after."""
    host, _, port = addr.rpartition(":")
    client = HTTP11ClientProtocol()
    world.reactor.connectTCP(host, int(port), _OneProtocol(client))
    world.settle()
    if client.transport is None:
        raise ConnectionRefusedError(f"nobody listens on {addr}")
    sent = Headers({b"Host": [addr.encode("ascii")]})
    for name, value in (headers or {}).items():
        sent.addRawHeader(name.encode("ascii"), value.encode("latin-1"))
    response = world.wait(client.request(Request(b"GET", path.encode("ascii"), sent, None)))
    body = _Body()
    response.deliverBody(body)
    world.wait(body.done)
    client.transport.loseConnection()
    world.settle()
    return response.code, response.headers, bytes(body.data)


class _Body(protocol.Protocol):
    """A response's body, whole once ``done`` fires (a cut body fails it)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.done: defer.Deferred[None] = defer.Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.data += data

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        if reason.check(ResponseDone):
            self.done.callback(None)
        else:
            self.done.errback(reason)


IN_USE_EVERY_S = 30.0
"""How often ``kept_in_use`` makes a request: well inside the server's idle timeout."""


async def kept_in_use(seconds: float, *wires: WireClient) -> None:
    """Move the running test's world ``seconds`` on while each of ``wires`` makes a request
    (a KV lookup, which is no heartbeat) every ``IN_USE_EVERY_S``: a broker that registers
    nothing meanwhile expires, instead of leaving because its connection closed as idle."""
    world = the_world()
    left = seconds
    while left > 0:
        world.advance(min(IN_USE_EVERY_S, left))
        left -= IN_USE_EVERY_S
        for wire in wires:
            resp = await wire.call(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"})
            assert resp.code == ResponseCode.QUERY_NOT_FOUND, resp.remark
