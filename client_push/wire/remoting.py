"""One remoting connection from the client's side: requests matched to responses by opaque.

Twisted glue only: opaques and the answer to a server's request are the pure
``request_table``'s. What the client does with a server-initiated request (NOTIFY, GO_AWAY) is
the handler's business; this module guarantees that every request Deferred fires exactly once:
with the response, a ``RequestTimeoutError``, or a ``ConnectionLostError``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from twisted.internet import defer, ssl
from twisted.internet.abstract import isIPAddress, isIPv6Address
from twisted.internet.endpoints import (
    HostnameEndpoint,
    TCP4ClientEndpoint,
    TCP6ClientEndpoint,
    wrapClientTLS,
)
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure

from client_push.config import ClientConfigError, split_addr
from client_push.errors import ConnectionLostError, RequestTimeoutError
from client_push.wire.request_table import RequestTable, answer_server_request
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, encode_command

log = logging.getLogger(__name__)

RequestHandler = Callable[["RemotingProtocol", RemotingCommand], "RemotingCommand | None"]
"""Handles a request the server initiated; returns the response to send (ignored for oneway)."""


class RemotingProtocol(Protocol):
    def __init__(
        self,
        clock: Any,
        max_frame_size: int,
        on_request: RequestHandler | None = None,
        *,
        label: str = "?",
    ) -> None:
        self._clock = clock
        self._decoder = FrameDecoder(max_frame_size)
        self._on_request = on_request
        self._pending: RequestTable[tuple[defer.Deferred[RemotingCommand], Any]] = RequestTable()
        self.label = label
        self.connected = False
        self.lost: defer.Deferred[None] = defer.Deferred()
        """Fires (with None) when the connection closes, for whatever reason."""
        self._drain_waiters: list[defer.Deferred[None]] = []
        self.counters: Counter[str] = Counter()

    @property
    def pending(self) -> int:
        """Requests sent and not yet answered, timed out or failed."""
        return len(self._pending)

    def connectionMade(self) -> None:
        self.connected = True

    def when_drained(self) -> defer.Deferred[None]:
        """Fires once no request is pending (at once when none is)."""
        if not self._pending:
            return defer.succeed(None)
        d: defer.Deferred[None] = defer.Deferred()
        self._drain_waiters.append(d)
        return d

    def _check_drained(self) -> None:
        if not self._pending and self._drain_waiters:
            waiters, self._drain_waiters = self._drain_waiters, []
            for d in waiters:
                d.callback(None)

    def request(self, cmd: RemotingCommand, timeout_ms: int) -> defer.Deferred[RemotingCommand]:
        """Send ``cmd`` (its opaque is assigned here) and fire with the matching response."""
        if not self.connected:
            return defer.fail(ConnectionLostError(f"not connected to {self.label}"))
        opaque = self._pending.allocate()
        cmd.opaque = opaque
        d: defer.Deferred[RemotingCommand] = defer.Deferred()
        timer = self._clock.callLater(timeout_ms / 1000.0, self._timed_out, opaque, cmd, timeout_ms)
        self._pending.put(opaque, (d, timer))
        self._write(encode_command(cmd))
        self.counters["requests_sent"] += 1
        return d

    def oneway(self, cmd: RemotingCommand) -> None:
        if self.connected:
            self._write(encode_command(cmd))
            self.counters["oneway_sent"] += 1

    def close(self) -> None:
        transport: Any = self.transport
        if self.connected and transport is not None:
            transport.loseConnection()

    def abort(self) -> None:
        transport: Any = self.transport
        if transport is not None:
            transport.abortConnection()

    def _write(self, data: bytes) -> None:
        transport: Any = self.transport
        transport.write(data)

    def _timed_out(self, opaque: int, cmd: RemotingCommand, timeout_ms: int) -> None:
        entry = self._pending.pop(opaque)
        if entry is None:
            return
        self.counters["requests_timed_out"] += 1
        entry[0].errback(
            RequestTimeoutError(
                f"request code {cmd.code} to {self.label} got no response in {timeout_ms} ms"
            )
        )
        self._check_drained()

    def dataReceived(self, data: bytes) -> None:
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            self.counters["frames_refused"] += 1
            log.warning("closing connection to %s: %s", self.label, exc.remark)
            self.abort()
            return
        for cmd in commands:
            if cmd.is_response:
                self._response(cmd)
            else:
                self._request(cmd)

    def _response(self, cmd: RemotingCommand) -> None:
        entry = self._pending.pop(cmd.opaque)
        if entry is None:
            # Its request timed out already; the caller has its answer.
            self.counters["late_responses"] += 1
            log.debug("response with unknown opaque %d from %s dropped", cmd.opaque, self.label)
            return
        d, timer = entry
        if timer.active():
            timer.cancel()
        d.callback(cmd)
        self._check_drained()

    def _request(self, cmd: RemotingCommand) -> None:
        self.counters["requests_received"] += 1
        on_request = self._on_request
        handle = None if on_request is None else partial(on_request, self)
        response = answer_server_request(handle, cmd, self.label)
        if response is not None and self.connected:
            self._write(encode_command(response))

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.connected = False
        why = reason.getErrorMessage() if reason is not None else "closed"
        for d, timer in self._pending.drain():
            if timer.active():
                timer.cancel()
            d.errback(ConnectionLostError(f"connection to {self.label} lost: {why}"))
        self._check_drained()
        if not self.lost.called:
            self.lost.callback(None)

    def __repr__(self) -> str:
        state = "connected" if self.connected else "closed"
        return f"<RemotingProtocol {self.label} {state} pending={self.pending}>"


def endpoint_for(reactor: Any, addr: str, timeout_s: float, tls_ca_file: str | None = None) -> Any:
    """A client endpoint for ``HOST:PORT``: IP literals connect directly, names are resolved.

    ``tls_ca_file`` not None wraps it in TLS: verified against that CA file when it names one,
    encrypted without verification when it is empty (upstream's ``tls.test.mode.enable``).
    """
    host, port = split_addr(addr)
    endpoint: Any
    if isIPAddress(host):
        endpoint = TCP4ClientEndpoint(reactor, host, port, timeout=timeout_s)
    elif isIPv6Address(host):
        endpoint = TCP6ClientEndpoint(reactor, host, port, timeout=timeout_s)
    else:
        endpoint = HostnameEndpoint(reactor, host, port, timeout=timeout_s)
    if tls_ca_file is None:
        return endpoint
    return wrapClientTLS(client_tls_options(tls_ca_file, host), endpoint)


def client_tls_options(ca_file: str, hostname: str) -> Any:
    if not ca_file:
        return ssl.CertificateOptions(verify=False)
    try:
        with open(ca_file, "rb") as fh:
            root = ssl.Certificate.loadPEM(fh.read())
    except OSError as exc:
        raise ClientConfigError(f"cannot read tls_ca_file {ca_file}: {exc.strerror}") from exc
    return ssl.optionsForClientTLS(hostname, trustRoot=root)


def describe(value: Any) -> str:
    """A failure or exception as one line, for logs."""
    if isinstance(value, Failure):
        return f"{value.type.__name__}: {value.getErrorMessage()}"  # type: ignore[union-attr]
    return f"{type(value).__name__}: {value}"
