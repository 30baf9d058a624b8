"""A producer's connections to brokers: one long connection per broker address, reused.

Twisted glue. Concurrent sends to a broker without a connection share one connect. A broker's
GoAway (7004, oneway) retires its connection: new requests open a fresh one, the requests in
flight on the old one finish there (it closes once they have), and the owner is told so it can
keep new sends off that broker for the grace period.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from twisted.internet import defer
from twisted.internet.endpoints import connectProtocol
from twisted.python.failure import Failure

from client_push.errors import ConnectionLostError, RequestTimeoutError
from client_push.producer.broker_wire import GoAwayHandler, go_away_grace, is_go_away
from client_push.wire.remoting import RemotingProtocol, describe, endpoint_for
from protocol.frame import RemotingCommand

log = logging.getLogger(__name__)


class BrokerConnections:
    def __init__(
        self,
        reactor: Any,
        clock: Any,
        on_go_away: GoAwayHandler,
        *,
        max_frame_size: int = 16 * 1024 * 1024,
        honour_go_away: bool = True,
    ) -> None:
        self._reactor = reactor
        self._clock = clock
        self._on_go_away = on_go_away
        self._max_frame_size = max_frame_size
        self._honour_go_away = honour_go_away
        self._conns: dict[str, RemotingProtocol] = {}
        self._connecting: dict[str, list[defer.Deferred[RemotingProtocol]]] = {}
        self._retired: set[RemotingProtocol] = set()
        self._stopped = False
        self.counters: Counter[str] = Counter()

    @property
    def connections(self) -> int:
        return len(self._conns)

    def request(
        self, addr: str, cmd: RemotingCommand, timeout_ms: int
    ) -> defer.Deferred[RemotingCommand]:
        """Send on the broker's connection (opened within ``timeout_ms`` if needed); errbacks
        with ``ConnectionLostError`` (no connection) or ``RequestTimeoutError``."""
        started = self._clock.seconds()
        d = self._connection(addr, timeout_ms)

        def send(proto: RemotingProtocol) -> defer.Deferred[RemotingCommand]:
            left = timeout_ms - int((self._clock.seconds() - started) * 1000)
            if left <= 0:
                raise RequestTimeoutError(f"connecting to {addr} took the whole {timeout_ms} ms")
            return proto.request(cmd, left)

        return d.addCallback(send)

    def oneway(self, addr: str, cmd: RemotingCommand, timeout_ms: int) -> defer.Deferred[None]:
        """Fires once the request is written (connecting first if needed)."""

        def send(proto: RemotingProtocol) -> None:
            if not proto.connected:
                raise ConnectionLostError(f"connection to {addr} closed before the oneway send")
            proto.oneway(cmd)

        return self._connection(addr, timeout_ms).addCallback(send)

    def retain(self, addrs: set[str]) -> None:
        """Close the connections of brokers no longer in any held route."""
        for addr in [a for a in self._conns if a not in addrs]:
            self._retire(addr, self._conns.pop(addr))
            self.counters["connections_dropped"] += 1

    def stop(self) -> None:
        self._stopped = True
        for proto in [*self._conns.values(), *self._retired]:
            proto.close()
        self._conns.clear()
        self._retired.clear()

    # -- connections ------------------------------------------------------------------------

    def _connection(self, addr: str, timeout_ms: int) -> defer.Deferred[RemotingProtocol]:
        if self._stopped:
            return defer.fail(ConnectionLostError("producer stopped"))
        proto = self._conns.get(addr)
        if proto is not None and proto.connected:
            return defer.succeed(proto)
        waiter: defer.Deferred[RemotingProtocol] = defer.Deferred()
        waiters = self._connecting.get(addr)
        if waiters is not None:
            waiters.append(waiter)
            return waiter
        self._connecting[addr] = [waiter]
        proto = RemotingProtocol(self._clock, self._max_frame_size, self._on_request, label=addr)
        endpoint = endpoint_for(self._reactor, addr, max(timeout_ms / 1000.0, 0.001))
        connecting = connectProtocol(endpoint, proto)
        timer = self._clock.callLater(timeout_ms / 1000.0, connecting.cancel)
        connecting.addCallbacks(
            self._connected,
            self._connect_failed,
            callbackArgs=(addr, timer),
            errbackArgs=(addr, timer),
        )
        return waiter

    def _connected(self, proto: RemotingProtocol, addr: str, timer: Any) -> None:
        if timer.active():
            timer.cancel()
        self.counters["connections_opened"] += 1
        waiters = self._connecting.pop(addr, [])
        if self._stopped:
            proto.close()
            error = ConnectionLostError("producer stopped")
            for w in waiters:
                w.errback(error)
            return
        self._conns[addr] = proto
        proto.lost.addCallback(lambda _: self._lost(addr, proto))
        for w in waiters:
            w.callback(proto)

    def _connect_failed(self, failure: Failure, addr: str, timer: Any) -> None:
        if timer.active():
            timer.cancel()
        self.counters["connect_failures"] += 1
        error = ConnectionLostError(f"cannot connect to broker {addr}: {describe(failure)}")
        for w in self._connecting.pop(addr, []):
            w.errback(error)

    def _lost(self, addr: str, proto: RemotingProtocol) -> None:
        self._retired.discard(proto)
        if self._conns.get(addr) is proto:
            del self._conns[addr]

    def _retire(self, addr: str, proto: RemotingProtocol) -> None:
        """No new requests go to ``proto``; it closes once those in flight are answered."""
        self._retired.add(proto)
        proto.when_drained().addCallback(lambda _: self._close_retired(proto))

    def _close_retired(self, proto: RemotingProtocol) -> None:
        self._retired.discard(proto)
        proto.close()

    # -- GoAway -----------------------------------------------------------------------------

    def _on_request(self, proto: RemotingProtocol, cmd: RemotingCommand) -> RemotingCommand | None:
        if not is_go_away(cmd):
            return None
        self.counters["go_away_received"] += 1
        if not self._honour_go_away:
            return None
        grace = go_away_grace(cmd, proto.label, self.counters)
        addr = proto.label
        if self._conns.get(addr) is proto:
            del self._conns[addr]
            self._retire(addr, proto)
        log.info("broker %s is going away (grace %d ms)", addr, grace)
        self._on_go_away(addr, grace)
        return None
