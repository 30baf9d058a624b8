"""The listening port: TCP (optionally wrapped in TLS) whose reads keep their own size.

Connections are built by :class:`ConnectionFactory`, numbered from 1, each talking to the one
:class:`~namesrv.net.connection.ConnectionOwner` the factory was given.
"""

from __future__ import annotations

import errno
import itertools
from collections import Counter
from typing import Any, cast

from twisted.internet import main, tcp
from twisted.internet.interfaces import IListeningPort
from twisted.internet.posixbase import PosixReactorBase
from twisted.internet.protocol import Factory

from namesrv.config import ServerConfig, parse_listen
from namesrv.net.connection import ConnectionOwner, NamesrvConnection
from namesrv.ops.clock import Clock
from protocol.paced_log import PacedLog

READ_SIZE = 64 * 1024
"""Bytes asked of the kernel per read: Twisted's default, whatever the output bound is."""


class _BoundedReadTransport(tcp.Server):
    """A TCP connection whose reads stay at :data:`READ_SIZE` when ``bufferSize`` is raised.

    Twisted uses ``bufferSize`` both as the unsent-output mark past which it pauses the
    producer and as the size of every ``recv``. The server raises it to the output bound
    (``server.output_buffer_bytes``), which would make every read allocate, map and unmap a
    buffer of that size: most of a route lookup's CPU. Reads keep their own size here.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Twisted formats both descriptions of every connection up front; tens of thousands
        # of idle connections would hold them for nothing, so they are formatted when asked.
        self.logstr = self.repstr = ""

    def __repr__(self) -> str:
        port = getattr(self.server, "_realPortNumber", "?")
        return f"<NamesrvConnection #{self.sessionno} on {port}>"

    def logPrefix(self) -> str:
        return f"NamesrvConnection,{self.sessionno},{self.hostname}"

    def doRead(self) -> Any:
        try:
            data = self.socket.recv(READ_SIZE)
        except OSError as exc:
            if exc.errno == errno.EWOULDBLOCK:
                return None
            return main.CONNECTION_LOST
        if not data:  # the peer closed (``tcp.Connection._dataReceived``, without the call)
            return main.CONNECTION_DONE
        protocol: Any = self.protocol  # typed by a zope interface, whose methods lack self
        protocol.dataReceived(data)
        return None


class _Port(tcp.Port):
    transport = _BoundedReadTransport


class ConnectionFactory(Factory):
    """Builds the connections of one port, all owned by ``owner``."""

    def __init__(self, owner: ConnectionOwner, config: ServerConfig) -> None:
        self.owner = owner
        self.config = config
        self._ids = itertools.count(1)

    def buildProtocol(self, addr: Any) -> NamesrvConnection:
        return NamesrvConnection(self.owner, next(self._ids), self.config)


def listen(
    reactor: Any,
    config: ServerConfig,
    owner: ConnectionOwner,
    counters: Counter[str],
    *,
    clock: Clock,
    peer_log: PacedLog,
) -> IListeningPort:
    """Listen on ``server.listen`` (with ``server.tls``); TLS outcomes count in ``counters``,
    handshake timeouts run on ``clock`` and are logged through ``peer_log``."""
    host, port = parse_listen(config.listen)
    plain = ConnectionFactory(owner, config)
    factory: Factory = plain
    if config.tls != "disabled":
        from namesrv.net.tls import TlsRoutingFactory, server_options

        options = server_options(config.tls_cert_file, config.tls_key_file)
        factory = TlsRoutingFactory(
            plain,
            options,
            config.tls,
            counters,
            clock=clock,
            handshake_timeout_ms=config.tls_handshake_timeout_ms,
            peer_log=peer_log,
        )
    if isinstance(reactor, PosixReactorBase):
        bounded = _Port(port, cast(Any, factory), 1024, host, reactor)
        bounded.startListening()
        return cast(IListeningPort, bounded)
    listening: IListeningPort = reactor.listenTCP(port, factory, backlog=1024, interface=host)
    return listening  # a test reactor
