"""The Prometheus endpoint's listener: ``/metrics`` over Twisted's HTTP, bounded.

The page is rendered on the reactor thread: the counters are never read mid-update.

The listener is bounded: at most ``metrics.max_connections`` are open at once (a new one past
it closes the connection served longest ago), and a connection that completes no request within
``metrics.idle_timeout_ms`` is cut, so idle or trickling peers cannot hold it.

Each request is judged on its head by ``namesrv.ops.metrics.MetricsGate`` before the head is
acted on, so no body is ever buffered or spooled to a temporary file and no unauthenticated
request costs a render.

A connection holds at most one answer's output: after an answer the channel reads and serves
nothing more of it until the transport has sent that answer whole, so a peer pipelining
thousands of GETs and never reading holds one page and one read's worth of requests, and
costs one render per page it actually takes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from twisted.internet.protocol import connectionDone
from twisted.protocols.policies import ProtocolWrapper, TimeoutMixin, WrappingFactory
from twisted.python.failure import Failure
from twisted.web.http import HTTPChannel
from twisted.web.resource import Resource
from twisted.web.server import Site

from namesrv.config import MetricsConfig, parse_listen
from namesrv.ops.clock import Clock
from namesrv.ops.metrics import MetricsGate, MetricsSource, NamesrvCollector

log = logging.getLogger(__name__)


class MetricsResource(Resource):
    """``/metrics`` rendered synchronously: the collector reads the server's own objects.

    Only requests :class:`MetricsGate` let through reach it: GET or HEAD, bodiless, with the
    credentials configured."""

    isLeaf = True

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__()
        self._registry = registry

    def render_GET(self, request: Any) -> bytes:
        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode("ascii"))
        return generate_latest(self._registry)


class _GatedChannel(HTTPChannel):
    """An HTTP channel that judges each request on its head (:class:`MetricsGate`) before the
    head is acted on: a refused request is answered and its connection closed before a byte of
    its body is read, so nothing is buffered, spooled to disk or rendered for it."""

    site: MetricsSite
    _refused = False
    _awaiting_drain = False
    """An answer is in the transport, not yet sent whole: pipelined requests wait for it."""

    def connectionMade(self) -> None:
        super().connectionMade()
        # A pull producer rather than the base's streaming one: the transport calls
        # ``resumeProducing`` each time it has sent everything written, which is when the
        # next pipelined request may be served.
        self._networkProducer.unregisterProducer()
        self._networkProducer.registerProducer(self, False)

    def requestDone(self, request: Any) -> None:
        # Set before the base replays the requests read after this one: they wait, unparsed
        # (LineReceiver stops at ``paused``), and the connection is not read meanwhile.
        network: Any = self._networkProducer
        self._awaiting_drain = True
        self.paused = True
        network.pauseProducing()
        super().requestDone(request)
        if self._awaiting_drain:  # the base resumed reading; the answer is not sent yet
            network.pauseProducing()

    def resumeProducing(self) -> None:
        super().resumeProducing()
        if self._awaiting_drain and not self._handlingRequest:
            self._awaiting_drain = False
            self.paused = False
            network: Any = self._networkProducer
            network.resumeProducing()
            self.dataReceived(b"")  # the next pipelined request, if one was read

    def allHeadersReceived(self) -> None:
        request = self.requests[-1]
        authorization = request.requestHeaders.getRawHeaders(b"Authorization", [b""])[0]
        refusal = self.site.gate.refusal(self._command, self.length, authorization)
        if not refusal:
            super().allHeadersReceived()
            return
        # Before the base class sees the head: it would open the body's file and may answer
        # "100 Continue", inviting the body.
        self._refused = True
        transport: Any = self.transport
        transport.write(refusal)
        self.loseConnection()  # stops reading: the body, if sent, stays in the socket

    def allContentReceived(self) -> None:
        if not self._refused:  # a refused head with no body must not go on to the page
            super().allContentReceived()

    def dataReceived(self, data: bytes) -> None:
        if not self._refused:
            super().dataReceived(data)


class MetricsSite(Site):
    """The metrics site, its requests judged on their heads by ``gate``."""

    # A plain HTTP/1.1 channel, not the base's HTTP/2-switching wrapper: this port has no TLS,
    # so no ALPN could choose HTTP/2, and the gate must see every head itself.
    protocol = _GatedChannel  # type: ignore[assignment]

    def __init__(self, resource: Resource, gate: MetricsGate) -> None:
        # The channel's own timer would run on the global reactor; the bounded factory's idle
        # timeout (on the server's clock) replaces it.
        super().__init__(resource, timeout=None)
        self.gate = gate


class _BoundedConnection(ProtocolWrapper, TimeoutMixin):
    """One metrics connection, cut when it completes no request within the idle timeout.

    The HTTP channel writes only to answer a whole request (a 100-continue too comes only
    after a whole header), so a write restarts the timer and bytes received never do: a peer
    trickling a header or a body forever is cut as one that sends nothing.
    """

    factory: BoundedMetricsFactory

    def callLater(self, period: float, func: Callable[[], object]) -> Any:
        return self.factory.clock.callLater(period, func)

    def makeConnection(self, transport: Any) -> None:
        self.setTimeout(self.factory.idle_timeout)
        super().makeConnection(transport)

    def write(self, data: bytes) -> None:
        self._served()
        super().write(data)

    def writeSequence(self, data: Any) -> None:
        self._served()
        super().writeSequence(data)

    def _served(self) -> None:
        self.resetTimeout()
        protocols = self.factory.protocols
        if protocols.pop(self, None) is not None:  # last in order: the latest served
            protocols[self] = 1

    def timeoutConnection(self) -> None:
        self.factory.counters["metrics_idle_closes"] += 1
        self.factory.drop(self)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.setTimeout(None)
        super().connectionLost(reason)


class BoundedMetricsFactory(WrappingFactory):
    """The metrics site under a connection cap and an idle timeout on the server's clock.

    ``protocols`` (insertion-ordered) is kept in the order connections were last served.
    """

    protocol = _BoundedConnection

    def __init__(
        self, site: Site, config: MetricsConfig, clock: Clock, counters: Counter[str]
    ) -> None:
        super().__init__(site)
        self.max_connections = config.max_connections
        self.idle_timeout = config.idle_timeout_ms / 1000.0
        self.clock = clock
        self.counters = counters

    def buildProtocol(self, addr: Any) -> Any:
        if len(self.protocols) >= self.max_connections:
            # The connection served longest ago (first in order) makes room, so connections
            # held open by a peer cannot lock the scraper out; the count never passes the cap.
            self.counters["metrics_connections_evicted"] += 1
            self.drop(next(iter(self.protocols)))
        return super().buildProtocol(addr)

    def drop(self, conn: _BoundedConnection) -> None:
        """Close ``conn`` now; it stops counting against the cap at once, not when its loss
        is reported (a turn later). An unread answer must not hold it open: aborted, not
        closed."""
        del self.protocols[conn]
        conn.setTimeout(None)
        transport: Any = conn.transport
        transport.abortConnection()

    def unregisterProtocol(self, p: Any) -> None:
        self.protocols.pop(p, None)  # a dropped connection has left already


def metrics_site(server: MetricsSource) -> MetricsSite:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NamesrvCollector(server))
    root = Resource()
    page: Any = MetricsResource(registry)
    root.putChild(b"metrics", page)
    return MetricsSite(root, MetricsGate(server.config.metrics, server.counters))


def listen_metrics(reactor: Any, listen: str, server: MetricsSource) -> Any:
    """Start serving ``/metrics`` on ``HOST:PORT`` under the ``[metrics]`` bounds; returns the
    listening port."""
    host, port = parse_listen(listen)
    factory = BoundedMetricsFactory(
        metrics_site(server), server.config.metrics, server.clock, server.counters
    )
    listening = reactor.listenTCP(port, factory, interface=host)
    bound = listening.getHost()
    log.info("metrics on http://%s:%s/metrics", bound.host, bound.port)
    return listening
