"""TLS for the name-server port, in upstream's three modes (``tls.server.mode``).

``disabled`` leaves the port plaintext. ``permissive`` serves TLS and plaintext on one port,
told apart by the first byte a client sends (0x16 opens a TLS handshake record; a remoting
frame starts with its length, whose first byte is 0 for any frame under 16 MiB), as upstream's
permissive mode does. ``enforcing`` refuses a connection whose first byte is not a handshake,
answering its first request with a frame that says TLS is required, then closing.
No client certificate is asked for, as upstream's default (``tls.server.need.client.auth``).

A TLS connection is under every bound a plaintext one is, from the moment TCP accepts it: the
connection bounds, the idle and frame timeouts; and its handshake must finish within
``server.tls_handshake_timeout_ms`` (``tls_handshake_timeouts`` counts those that did not).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from twisted.internet import ssl
from twisted.internet.protocol import Factory, Protocol
from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol
from twisted.python.failure import Failure

from namesrv.ops.clock import Clock, DelayedCall
from protocol.paced_log import PacedLog
from protocol.tls_refusal import tls_required_frame

TLS_HANDSHAKE_RECORD = 0x16


class TlsConfigError(ValueError):
    """The certificate or key file cannot be used."""


def server_options(cert_file: str, key_file: str) -> Any:
    """Twisted context options from PEM files (the key may sit in the certificate file)."""
    try:
        with open(cert_file, "rb") as fh:
            cert_pem = fh.read()
        with open(key_file, "rb") as fh:
            key_pem = fh.read()
    except OSError as exc:
        raise TlsConfigError(f"cannot read TLS file {exc.filename}: {exc.strerror}") from exc
    try:
        certificate = ssl.PrivateCertificate.loadPEM(cert_pem + b"\n" + key_pem)
        chain = [
            ssl.Certificate.loadPEM(block).original.to_cryptography()
            for block in _pem_blocks(cert_pem)[1:]
        ]
        # cryptography objects: pyOpenSSL deprecates being handed its own wrappers.
        return ssl.CertificateOptions(
            privateKey=certificate.privateKey.original.to_cryptography_key(),
            certificate=certificate.original.to_cryptography(),
            extraCertChain=chain or None,
        )
    except Exception as exc:  # pyOpenSSL raises its own error types for bad PEM
        raise TlsConfigError(
            f"server.tls_cert_file {cert_file} / server.tls_key_file {key_file}: {exc}"
        ) from exc


def _pem_blocks(pem: bytes) -> list[bytes]:
    marker = b"-----BEGIN CERTIFICATE-----"
    return [marker + part for part in pem.split(marker)[1:]]


class _FirstByteRouter(Protocol):
    """Admits the connection when TCP accepts it, then runs it as TLS or plaintext by its
    first byte.

    The name-server connection is made on the socket at accept, as without TLS, so the
    connection bounds refuse it there, and the idle and frame timeouts hold it from then on;
    a handshake byte puts a TLS layer between the socket and it
    (:meth:`~namesrv.net.connection.NamesrvConnection.start_tls`). The handshake must then
    finish within ``server.tls_handshake_timeout_ms``: counted from accept when enforcing (the
    connection can be nothing else), from its first byte when permissive (a silent connection
    may yet be plaintext, and is under the idle timeout like any other).
    """

    def __init__(self, factory: TlsRoutingFactory, addr: Any) -> None:
        self._routing = factory
        self._addr = addr
        self._conn: Any = None
        self._inner: Any = None
        """What the socket's bytes go to once the first has come: the TLS layer, or the
        connection itself."""
        self._deadline: DelayedCall | None = None
        """The pending handshake timeout, while a handshake is awaited or under way."""

    def connectionMade(self) -> None:
        routing = self._routing
        conn: Any = routing.plain_factory.buildProtocol(self._addr)
        self._conn = conn
        if conn is None:
            self._any_transport.abortConnection()
            return
        conn.makeConnection(self._any_transport)
        if routing.mode == "enforcing" and not conn.closing:
            self._await_handshake()

    def dataReceived(self, data: bytes) -> None:
        inner = self._inner
        if inner is None:
            conn = self._conn
            if not data or conn is None or conn.closing:
                return
            inner = self._route(data)
            if inner is None:
                return
        inner.dataReceived(data)
        if self._deadline is not None:
            self._check_handshake()

    def _route(self, data: bytes) -> Any:
        """Where this connection's bytes go, by its first; None: refused (enforcing), with a
        response frame naming the reason before the close."""
        routing = self._routing
        conn = self._conn
        if data[0] == TLS_HANDSHAKE_RECORD:
            tls = TLSMemoryBIOProtocol(routing.tls_factory, conn, _connectWrapped=False)
            tls.makeConnection(self.transport)
            conn.start_tls(tls)
            routing.counters["tls.handshake"] += 1
            if self._deadline is None:
                self._await_handshake()
            self._inner = tls
            return tls
        self._stop_deadline()
        if routing.mode == "enforcing":
            routing.counters["rejected.tls_plaintext"] += 1
            routing.peer_log.warning(
                "tls_plaintext",
                "closing plaintext connection %s from %s: server.tls is enforcing",
                conn.conn_id,
                conn.peer,
            )
            conn.send(tls_required_frame(data))
            conn.close(abort=False)
            return None
        routing.counters["tls.plaintext"] += 1
        self._inner = conn
        return conn

    def _await_handshake(self) -> None:
        routing = self._routing
        self._deadline = routing.clock.callLater(
            routing.handshake_timeout_ms / 1000.0, self._handshake_timed_out
        )

    def _check_handshake(self) -> None:
        """Stop the handshake timeout once the handshake is done: the client's Finished, the
        last handshake message a server receives in every TLS version, has been read."""
        handle = self._inner.getHandle()
        if handle is not None and handle.get_peer_finished() is not None:
            self._stop_deadline()

    def _stop_deadline(self) -> None:
        deadline, self._deadline = self._deadline, None
        if deadline is not None and deadline.active():
            deadline.cancel()

    def _handshake_timed_out(self) -> None:
        self._deadline = None
        conn = self._conn
        if conn.closing or conn.closed:
            return
        routing = self._routing
        routing.counters["tls_handshake_timeouts"] += 1
        routing.peer_log.warning(
            "tls_handshake_timeout",
            "closing connection %s from %s: its TLS handshake did not finish within "
            "server.tls_handshake_timeout_ms=%d",
            conn.conn_id,
            conn.peer,
            routing.handshake_timeout_ms,
        )
        conn.close(abort=True)

    @property
    def _any_transport(self) -> Any:
        return self.transport

    def connectionLost(self, reason: Failure | None = None) -> None:
        self._stop_deadline()
        receiver: Any = self._inner if self._inner is not None else self._conn
        if receiver is not None:
            receiver.connectionLost(reason)


class TlsRoutingFactory(Factory):
    """Wraps the name-server factory for ``permissive`` or ``enforcing`` mode.

    ``clock`` runs the handshake timeouts; ``peer_log`` paces the lines a peer can provoke.
    """

    def __init__(
        self,
        plain_factory: Factory,
        options: Any,
        mode: str,
        counters: Counter[str],
        *,
        clock: Clock,
        handshake_timeout_ms: int,
        peer_log: PacedLog,
    ) -> None:
        self.plain_factory = plain_factory
        wrapped: Any = plain_factory
        self.tls_factory = TLSMemoryBIOFactory(options, False, wrapped)
        self.mode = mode
        self.counters = counters
        self.clock = clock
        self.handshake_timeout_ms = handshake_timeout_ms
        self.peer_log = peer_log

    def buildProtocol(self, addr: Any) -> _FirstByteRouter:
        return _FirstByteRouter(self, addr)
