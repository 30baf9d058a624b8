"""The connection to the chosen name server: connect, reconnect with backoff, move on GoAway.

The rules (which connection serves, when a left one closes) are the pure ``link_state``'s;
this module owns the sockets and timers. The route logic above sees three events (connected,
disconnected, switching away) and one call (``request``), which waits for a connection when
there is none and retries once on a new connection when a server answers GO_AWAY (1500), as
upstream's ``enableReconnectForGoAway``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

from twisted.internet import defer
from twisted.internet.endpoints import (
    connectProtocol,
)
from twisted.python.failure import Failure

from client_push.config import ClientConfig, split_addr
from client_push.errors import ClientStoppedError, RequestTimeoutError
from client_push.wire.backoff import Backoff
from client_push.wire.link_state import LinkOwner, LinkState
from client_push.wire.nameserver_selector import NameServerSelector
from client_push.wire.remoting import RemotingProtocol, RequestHandler, describe, endpoint_for
from client_push.wire.request_signing import request_signer, signed
from protocol.codes import ResponseCode
from protocol.frame import RemotingCommand

log = logging.getLogger(__name__)


class NameServerLink:
    """The Twisted side of ``LinkState``: sockets, the reconnect timer, waiting requests."""

    def __init__(
        self,
        config: ClientConfig,
        reactor: Any,
        clock: Any,
        rng: random.Random,
        on_request: RequestHandler,
        listener: LinkOwner[RemotingProtocol],
    ) -> None:
        self._config = config
        self._reactor = reactor
        self._clock = clock
        self._on_request = on_request
        self._listener = listener
        self.selector = NameServerSelector(config.namesrv_addrs, rng)
        self._state: LinkState[RemotingProtocol] = LinkState(
            self.selector, Backoff(config.reconnect_initial_ms, config.reconnect_max_ms, rng)
        )
        self._signer = request_signer(config)
        self._connecting: str | None = None
        self._retry: Any | None = None
        self._waiters: list[defer.Deferred[RemotingProtocol]] = []
        self._started = False

    # -- state -----------------------------------------------------------------------------

    @property
    def current(self) -> RemotingProtocol | None:
        return self._state.current

    @property
    def addr(self) -> str:
        """The name server requests go to (or will, once connected)."""
        return self._state.target

    @property
    def connects(self) -> int:
        return self._state.connects

    @property
    def connect_failures(self) -> int:
        return self._state.connect_failures

    def is_current(self, proto: RemotingProtocol) -> bool:
        return proto is self._state.current

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._connect()

    def stop(self) -> defer.Deferred[None]:
        """Close every connection; pending requests fail with ``ConnectionLostError``."""
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            w.errback(ClientStoppedError("route client stopped"))
        protos = self._state.stop()
        losses = [p.lost for p in protos]
        for p in protos:
            p.close()
        return defer.DeferredList(losses, consumeErrors=True).addCallback(lambda _: None)

    def update_addrs(self, addrs: Sequence[str]) -> None:
        """A new name-server list; a changed list moves the client (#3870 3.1.1.1)."""
        for addr in addrs:
            split_addr(addr)
        if self.selector.update(addrs):
            self._move(going_away=False)

    # -- requests ----------------------------------------------------------------------------

    def request(
        self, cmd: RemotingCommand, timeout_ms: int | None = None, *, go_away_retry: bool = True
    ) -> defer.Deferred[RemotingCommand]:
        """Send on the current connection, waiting up to the timeout for one to come up."""
        timeout = timeout_ms or self._config.request_timeout_ms
        d = self._usable(timeout)

        def send(proto: RemotingProtocol) -> defer.Deferred[RemotingCommand]:
            sent = proto.request(signed(self._signer, cmd), timeout)
            sent.addCallback(answered, proto)
            sent.addBoth(self._maybe_close_drained, proto)
            return sent

        def answered(response: RemotingCommand, proto: RemotingProtocol) -> Any:
            if response.code != ResponseCode.GO_AWAY or not go_away_retry:
                return response
            log.info(
                "%s answered GO_AWAY; retrying request code %d elsewhere", proto.label, cmd.code
            )
            self.go_away(proto, (), still_serving=False)
            return self.request(cmd, timeout_ms, go_away_retry=False)

        return d.addCallback(send)

    def _usable(self, timeout_ms: int) -> defer.Deferred[RemotingProtocol]:
        if self._state.stopped:
            return defer.fail(ClientStoppedError("route client stopped"))
        proto = self._state.usable()
        if proto is not None:
            return defer.succeed(proto)
        waiter: defer.Deferred[RemotingProtocol] = defer.Deferred()
        self._waiters.append(waiter)

        def expire() -> None:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                waiter.errback(
                    RequestTimeoutError(f"no connection to {self.addr} within {timeout_ms} ms")
                )

        timer = self._clock.callLater(timeout_ms / 1000.0, expire)

        def cancel_timer(result: Any) -> Any:
            if timer.active():
                timer.cancel()
            return result

        return waiter.addBoth(cancel_timer)

    # -- GoAway and switching --------------------------------------------------------------

    def go_away(
        self, proto: RemotingProtocol, alternatives: Sequence[str], *, still_serving: bool = True
    ) -> None:
        """The server behind ``proto`` is stopping: move new requests elsewhere.

        A oneway GO_AWAY promises service for a grace period, so until another connection is
        up the old one still takes requests (``still_serving``); a GO_AWAY *answer* (1500)
        refuses them, so that connection only finishes what it has in flight.
        """
        if self._state.go_away(proto, alternatives):
            self._move(going_away=True, fallback=still_serving)

    def _move(self, *, going_away: bool, fallback: bool = False) -> None:
        old = self._state.leave(fallback=fallback)
        if old is not None:
            self._listener.on_switching(old, old.label, going_away=going_away)
            self._maybe_close_drained(None, old)
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._connect()

    def _maybe_close_drained(self, result: Any, proto: RemotingProtocol) -> Any:
        """A connection switched away from closes once its in-flight requests are done."""
        if self._state.drained(proto):
            proto.close()
        return result

    def send_on(
        self, proto: RemotingProtocol, cmd: RemotingCommand, timeout_ms: int | None = None
    ) -> defer.Deferred[RemotingCommand]:
        """Send on one given connection (say, a last UNSUBSCRIBE on the one being left)."""
        sent = proto.request(
            signed(self._signer, cmd), timeout_ms or self._config.request_timeout_ms
        )
        return sent.addBoth(self._maybe_close_drained, proto)

    # -- connecting ----------------------------------------------------------------------------

    def _connect(self) -> None:
        if self._state.stopped or self._connecting == self.selector.current:
            return
        addr = self._state.connecting()
        self._connecting = addr
        endpoint = self._endpoint(addr)
        proto = RemotingProtocol(
            self._clock, self._config.max_frame_size, self._on_request, label=addr
        )
        d = connectProtocol(endpoint, proto)
        d.addCallbacks(
            self._connected, self._connect_failed, callbackArgs=(addr,), errbackArgs=(addr,)
        )

    def _endpoint(self, addr: str) -> Any:
        cfg = self._config
        tls = cfg.tls_ca_file if cfg.tls else None
        return endpoint_for(self._reactor, addr, cfg.request_timeout_ms / 1000.0, tls)

    def _connected(self, proto: RemotingProtocol, addr: str) -> None:
        if self._connecting == addr:
            self._connecting = None
        if not self._state.accept(proto, addr):
            proto.close()
            return
        proto.lost.addCallback(lambda _: self._lost(proto))
        log.info("connected to name server %s", addr)
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            w.callback(proto)
        self._listener.on_connected(proto, addr)

    def _connect_failed(self, failure: Failure, addr: str) -> None:
        if self._connecting == addr:
            self._connecting = None
        if self._state.stopped:
            return
        log.warning("cannot connect to name server %s: %s", addr, describe(failure))
        self._state.connect_failed(addr)
        self._schedule_reconnect()

    def _lost(self, proto: RemotingProtocol) -> None:
        if not self._state.lost(proto):
            return
        log.warning("connection to name server %s lost", proto.label)
        self._listener.on_disconnected(proto.label)
        if self._state.stopped:
            return
        self.selector.on_failure(proto.label)
        self._schedule_reconnect()

    def _schedule_reconnect(self) -> None:
        if self._state.stopped or (self._retry is not None and self._retry.active()):
            return
        delay = self._state.reconnect_delay_ms()
        log.info("reconnecting to %s in %d ms", self.selector.current, delay)
        self._retry = self._clock.callLater(delay / 1000.0, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        self._connect()
