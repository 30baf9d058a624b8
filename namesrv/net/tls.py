"""TLS for the name-server port, in upstream's three modes (``tls.server.mode``).

``disabled`` leaves the port plaintext. ``permissive`` serves TLS and plaintext on one port,
told apart by the first byte a client sends (0x16 opens a TLS handshake record; a remoting
frame starts with its length, whose first byte is 0 for any frame under 16 MiB), as upstream's
permissive mode does. ``enforcing`` refuses a connection whose first byte is not a handshake.
No client certificate is asked for, as upstream's default (``tls.server.need.client.auth``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet import ssl
from twisted.internet.protocol import Factory, Protocol
from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol
from twisted.python.failure import Failure

log = logging.getLogger(__name__)

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
    """Waits for the first byte, then runs the connection as TLS or plaintext.

    The name-server protocol is built when the connection is accepted, as without TLS, so a
    factory that refuses connections (returns None) refuses them here too.
    """

    def __init__(self, factory: TlsRoutingFactory, addr: Any) -> None:
        self._routing = factory
        self._addr = addr
        self._conn: Any = None
        self._inner: Any = None

    def connectionMade(self) -> None:
        routing = self._routing
        if routing.on_transport is not None:
            routing.on_transport(self.transport)
        self._conn = routing.plain_factory.buildProtocol(self._addr)
        if self._conn is None:
            self._any_transport.loseConnection()

    def dataReceived(self, data: bytes) -> None:
        inner = self._inner
        if inner is None:
            if not data or self._conn is None:
                return
            routing = self._routing
            if data[0] == TLS_HANDSHAKE_RECORD:
                inner = TLSMemoryBIOProtocol(routing.tls_factory, self._conn)
                routing.counters["tls.handshake"] += 1
            elif routing.mode == "enforcing":
                routing.counters["rejected.tls_plaintext"] += 1
                log.warning(
                    "closing plaintext connection from %s: server.tls is enforcing", self._addr
                )
                self._conn = None
                self._any_transport.abortConnection()
                return
            else:
                inner = self._conn
                routing.counters["tls.plaintext"] += 1
            self._inner = inner
            inner.makeConnection(self.transport)
        inner.dataReceived(data)

    @property
    def _any_transport(self) -> Any:
        return self.transport

    def connectionLost(self, reason: Failure | None = None) -> None:
        if self._inner is not None:
            inner: Any = self._inner
            inner.connectionLost(reason)


class TlsRoutingFactory(Factory):
    """Wraps the name-server factory for ``permissive`` or ``enforcing`` mode."""

    def __init__(
        self,
        plain_factory: Factory,
        options: Any,
        mode: str,
        counters: Any,
        on_transport: Callable[[Any], None] | None = None,
    ) -> None:
        self.plain_factory = plain_factory
        wrapped: Any = plain_factory
        self.tls_factory = TLSMemoryBIOFactory(options, False, wrapped)
        self.mode = mode
        self.counters = counters
        self.on_transport = on_transport

    def buildProtocol(self, addr: Any) -> _FirstByteRouter:
        return _FirstByteRouter(self, addr)
