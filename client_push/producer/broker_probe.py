"""The active detector's wire side: probing brokers over long-lived connections.

Twisted glue. One connection per broker address, kept between rounds and reopened when lost
(upstream's detector reuses its channels the same way); at most one probe in flight per
address. A probe is a GET_MAX_OFFSET of queue 0 of a topic the broker serves, the request
upstream's detector sends: any answer within the timeout, error codes included, means the
broker is reachable. A GoAway from a broker (code 7004, or a response with code 1500) is passed
on and its connection closed; the next round opens a fresh one.
"""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer
from twisted.internet.endpoints import connectProtocol

from client_push.producer.broker_wire import (
    GoAwayHandler,
    ProberBook,
    probe_request,
    probe_says_going_away,
)
from client_push.wire.remoting import RemotingProtocol, describe, endpoint_for

log = logging.getLogger(__name__)


class BrokerProber(ProberBook[RemotingProtocol]):
    def __init__(
        self,
        reactor: Any,
        clock: Any,
        on_go_away: GoAwayHandler,
        *,
        max_frame_size: int = 16 * 1024 * 1024,
    ) -> None:
        super().__init__(on_go_away)
        self._reactor = reactor
        self._clock = clock
        self._max_frame_size = max_frame_size

    def probe(self, addr: str, topic: str, timeout_ms: int) -> defer.Deferred[bool]:
        """Fires True when the broker answered within ``timeout_ms`` (connecting included),
        False otherwise; never errbacks. A probe of an address already being probed is
        skipped (False)."""
        if not self._in_flight.begin(addr, self._conns.stopped):
            return defer.succeed(False)
        d = defer.ensureDeferred(self._probe(addr, topic, timeout_ms))
        return d.addCallback(lambda ok: self._in_flight.end(addr, ok))

    async def _probe(self, addr: str, topic: str, timeout_ms: int) -> bool:
        try:
            proto = await self._connection(addr, timeout_ms)
            response = await proto.request(probe_request(topic), timeout_ms)
        except Exception as exc:
            log.debug("probe of broker %s failed: %s", addr, describe(exc))
            return False
        if probe_says_going_away(response):
            self._go_away(proto, addr, 0)
            return False
        return True

    async def _connection(self, addr: str, timeout_ms: int) -> RemotingProtocol:
        proto = self._conns.get(addr)
        if proto is not None and proto.connected:
            return proto
        proto = RemotingProtocol(self._clock, self._max_frame_size, self._on_request, label=addr)
        await connectProtocol(self._endpoint(addr, timeout_ms), proto)
        self.counters["connections_opened"] += 1
        self._conns.keep(addr, proto)
        proto.lost.addCallback(lambda _: self._conns.forget(addr, proto))
        if self._conns.stopped:
            proto.close()
        return proto

    def _endpoint(self, addr: str, timeout_ms: int) -> Any:
        return endpoint_for(self._reactor, addr, max(timeout_ms / 1000.0, 0.001))
