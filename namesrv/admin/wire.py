"""A blocking remoting client for one command-line request: connect, sign, send, wait.

Requests are signed in the credentials' form (``protocol.signing``): the strong form by default,
upstream's for name servers that predate it.

A short-lived tool has no event loop to share, so plain sockets keep it simple; the frames are
the same ``protocol`` codec the server uses.
"""

from __future__ import annotations

import itertools
import secrets
import socket
import ssl
import time
from dataclasses import dataclass

from protocol.address import AddressError, split_host_port
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, encode_command
from protocol.signing import Credentials, RequestSigner
from protocol.tls_refusal import TLS_REQUIRED_REMARK, is_tls_refusal

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest response frame accepted (a topic list of a big cluster fits many times over)."""


class AdminConnectionError(Exception):
    """The name server could not be reached, or the connection broke before the answer."""


@dataclass(frozen=True, slots=True)
class Target:
    host: str
    port: int
    tls: bool = False
    tls_ca_file: str = ""
    timeout_s: float = 5.0
    credentials: Credentials | None = None


def split_hostport(text: str) -> tuple[str, int]:
    try:
        return split_host_port(text)
    except AddressError:
        raise ValueError(f"name-server address must be HOST:PORT, got {text!r}") from None


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _nonce() -> str:
    return secrets.token_urlsafe(24)


def _tls_context(ca_file: str) -> ssl.SSLContext:
    if ca_file:
        return ssl.create_default_context(cafile=ca_file)
    # As upstream clients in their default tls.test.mode: encrypted, certificate not checked.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class AdminClient:
    """One connection; :meth:`call` sends a request and returns its response."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._opaques = itertools.count(1)
        try:
            raw = socket.create_connection((target.host, target.port), timeout=target.timeout_s)
        except OSError as exc:
            raise AdminConnectionError(
                f"cannot connect to {target.host}:{target.port}: {exc.strerror or exc}"
            ) from exc
        try:
            if target.tls:
                raw = _tls_context(target.tls_ca_file).wrap_socket(raw, server_hostname=target.host)
        except (OSError, ssl.SSLError) as exc:
            raw.close()
            raise AdminConnectionError(
                f"TLS handshake with {target.host}:{target.port} failed: {exc}"
            ) from exc
        self._sock = raw
        self._decoder = FrameDecoder(MAX_RESPONSE_BYTES)
        creds = target.credentials
        self._signer = None if creds is None else RequestSigner(creds, _wall_ms, _nonce)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        fields = dict(ext or {})
        if self._signer is not None:
            fields = self._signer.sign(code, fields, body)
        request = RemotingCommand.request(code, fields, body, opaque=next(self._opaques))
        where = f"{self.target.host}:{self.target.port}"
        try:
            self._sock.sendall(encode_command(request))
            while True:
                data = self._sock.recv(65536)
                if not data:
                    raise AdminConnectionError(f"{where} closed the connection before answering")
                for cmd in self._decoder.feed(data):
                    if is_tls_refusal(cmd):
                        raise AdminConnectionError(f"{TLS_REQUIRED_REMARK}: use --tls")
                    if cmd.is_response and cmd.opaque == request.opaque:
                        return cmd
        except TimeoutError as exc:
            raise AdminConnectionError(
                f"{where} did not answer within {self.target.timeout_s:g} s"
            ) from exc
        except FrameError as exc:
            raise AdminConnectionError(f"{where} sent an undecodable frame: {exc.remark}") from exc
        except OSError as exc:
            raise AdminConnectionError(f"connection to {where} failed: {exc}") from exc
