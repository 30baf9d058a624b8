"""Request signatures: upstream's ``AclClientRPCHook`` form and the stronger form bound to a
request code, a destination name server, a timestamp and a nonce.

**Upstream form.** extFields ``AccessKey`` (and optionally ``SecurityToken``) and
``Signature`` = Base64(HMAC-SHA1(secret key, content)); the content is the UTF-8 values of every
extField other than ``Signature``, in key order, followed by the body bytes (upstream's
``AclUtils.combineRequestContent`` over a ``TreeMap``, so the order is Java's ``String`` order:
UTF-16 code units). The request code and header fields are not covered: a captured request's
fields verify under any code, and as often as they are sent.

**Strong form.** The request also carries ``SignatureForm`` (``strong-v2``), ``SignServer``
(the identity of the name server it is meant for: that server's ``acl.server_identity``, 1 to
128 characters of ``[A-Za-z0-9._:@/-]``), ``SignTimestamp`` (milliseconds since the epoch, the
signer's clock) and ``SignNonce`` (16 to 64 characters of ``[A-Za-z0-9_-]``, fresh per request).
``Signature`` = Base64(HMAC-SHA256(k, content)), where k = HMAC-SHA256(secret key,
``STRONG_KEY_LABEL``) and the content is::

    "rocketmq-namesrv-strong-v2\\n" <code in decimal> "\\n"
    then, for every extField but Signature in key order: netstring(key) netstring(value)
    then netstring(body)

with netstring(b) = ``<len(b) in decimal>:`` b ``,``. The code is in the content, so the
fields of one request do not verify under another code; every key and value is delimited, so
no value can be shifted into a neighbour; ``SignServer`` is a field like any other, so the
signature covers it and a request signed for one name server is refused by every other; the
timestamp and nonce let the server refuse stale and repeated requests. The derived key keeps
the two forms apart: a strong signature never verifies as an upstream one (nor the reverse), so
stripping or adding the form's fields does not turn one into the other.

Pure: no clock and no randomness here; a signer passes its time and nonce in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE_FORM = "SignatureForm"
SIGN_TIMESTAMP = "SignTimestamp"
SIGN_NONCE = "SignNonce"
SIGN_SERVER = "SignServer"

STRONG_V2 = "strong-v2"
"""The value of ``SignatureForm`` for the strong form described above."""
STRONG_V1 = "strong-v1"
"""The strong form without a destination: refused, for its requests are valid at every name
server that has the account."""
STRONG_KEY_LABEL = b"rocketmq-namesrv strong request signature key v1"
_STRONG_PREFIX = b"rocketmq-namesrv-strong-v2\n"

NONCE_MIN_CHARS = 16
NONCE_MAX_CHARS = 64
_NONCE = re.compile(f"[A-Za-z0-9_-]{{{NONCE_MIN_CHARS},{NONCE_MAX_CHARS}}}")
_TIMESTAMP = re.compile(r"[0-9]{1,15}")
SERVER_IDENTITY_MAX_CHARS = 128
SERVER_IDENTITY = re.compile(f"[A-Za-z0-9._:@/-]{{1,{SERVER_IDENTITY_MAX_CHARS}}}")
"""What a name server's identity (``acl.server_identity``, the strong form's ``SignServer``)
may hold."""


class SignatureForm(StrEnum):
    """Which signed forms an account accepts, and which one a signer writes."""

    UPSTREAM = "upstream"
    STRONG = "strong"
    EITHER = "either"


def _java_order(key: str) -> bytes:
    """Sort key giving Java's ``String.compareTo`` order (UTF-16 code units)."""
    return key.encode("utf-16-be", "surrogatepass")


def java_sorted(keys: Iterable[str]) -> list[str]:
    """``keys`` in Java's ``String`` order; for ASCII keys (the usual case) that is Python's."""
    ordered = sorted(keys)
    if not "".join(ordered).isascii():
        ordered.sort(key=_java_order)
    return ordered


def _upstream_values(ext_fields: Mapping[str, str]) -> bytes:
    return "".join([str(ext_fields[k]) for k in java_sorted(ext_fields) if k != SIGNATURE]).encode(
        "utf-8"
    )


def upstream_content(ext_fields: Mapping[str, str], body: bytes) -> bytes:
    """The bytes upstream's signature covers: sorted extField values but ``Signature``, body."""
    return _upstream_values(ext_fields) + (body or b"")


def upstream_signature(ext_fields: Mapping[str, str], body: bytes, secret_key: str) -> str:
    mac = hmac.new(secret_key.encode("utf-8"), _upstream_values(ext_fields), hashlib.sha1)
    if body:
        mac.update(body)  # no copy of a large register body into the content
    return base64.b64encode(mac.digest()).decode("ascii")


def strong_key(secret_key: str) -> bytes:
    """The key strong signatures are made with, derived from an account's secret."""
    return hmac.new(secret_key.encode("utf-8"), STRONG_KEY_LABEL, hashlib.sha256).digest()


def _netstring(data: bytes) -> bytes:
    return b"%d:%s," % (len(data), data)


def strong_head(code: int, ext_fields: Mapping[str, str], body: bytes) -> bytes:
    """The strong content up to the body's bytes: prefix, code, fields, the body's length and
    colon (the body and the closing comma follow; see the module doc)."""
    parts = [_STRONG_PREFIX, b"%d\n" % code]
    for key in java_sorted(ext_fields):
        if key != SIGNATURE:
            parts.append(_netstring(key.encode("utf-8")))
            parts.append(_netstring(str(ext_fields[key]).encode("utf-8")))
    parts.append(b"%d:" % len(body or b""))
    return b"".join(parts)


def strong_signature(code: int, ext_fields: Mapping[str, str], body: bytes, key: bytes) -> str:
    """Base64(HMAC-SHA256(``key``, content)); ``key`` is :func:`strong_key` of the secret."""
    mac = hmac.new(key, strong_head(code, ext_fields, body), hashlib.sha256)
    if body:
        mac.update(body)
    mac.update(b",")
    return base64.b64encode(mac.digest()).decode("ascii")


_STRONG_FIELDS = (SIGNATURE_FORM, SIGN_TIMESTAMP, SIGN_NONCE, SIGN_SERVER)


def is_strong(ext_fields: Mapping[str, str]) -> bool:
    """Whether a request claims the strong form (any form field present)."""
    return any(name in ext_fields for name in _STRONG_FIELDS)


class StrongFields:
    """The strong form's own fields of a request, checked for shape; ``error`` names what is
    wrong (empty when they are well formed)."""

    __slots__ = ("error", "nonce", "server", "timestamp_ms")

    def __init__(self, ext_fields: Mapping[str, str]) -> None:
        self.timestamp_ms = 0
        self.nonce = ""
        self.server = ""
        form = ext_fields.get(SIGNATURE_FORM)
        server = str(ext_fields.get(SIGN_SERVER, ""))
        stamp = str(ext_fields.get(SIGN_TIMESTAMP, ""))
        nonce = str(ext_fields.get(SIGN_NONCE, ""))
        if form == STRONG_V1:
            self.error = (
                f"{SIGNATURE_FORM} {STRONG_V1!r} names no destination name server, so it is "
                f"valid at every server with the account: sign in {STRONG_V2!r}, with "
                f"{SIGN_SERVER}"
            )
        elif form != STRONG_V2:
            self.error = f"{SIGNATURE_FORM} must be {STRONG_V2!r}, got {form!r}"
        elif not SERVER_IDENTITY.fullmatch(server):
            self.error = (
                f"{SIGN_SERVER} must name the destination name server's identity (1 to "
                f"{SERVER_IDENTITY_MAX_CHARS} characters of A-Z a-z 0-9 . _ : @ / -), "
                f"got {server[:SERVER_IDENTITY_MAX_CHARS]!r}"
            )
        elif not _TIMESTAMP.fullmatch(stamp):
            self.error = f"{SIGN_TIMESTAMP} must be milliseconds since the epoch, got {stamp!r}"
        elif not _NONCE.fullmatch(nonce):
            self.error = (
                f"{SIGN_NONCE} must be {NONCE_MIN_CHARS} to {NONCE_MAX_CHARS} characters of "
                "A-Z a-z 0-9 _ -"
            )
        else:
            self.error = ""
            self.timestamp_ms = int(stamp)
            self.nonce = nonce
            self.server = server


def sign_upstream(
    ext_fields: Mapping[str, str],
    body: bytes,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
) -> dict[str, str]:
    """``ext_fields`` plus ``AccessKey`` (and ``SecurityToken``) and their upstream
    ``Signature``, as ``AclClientRPCHook`` sends them."""
    out = dict(ext_fields)
    out[ACCESS_KEY] = access_key
    if security_token is not None:
        out[SECURITY_TOKEN] = security_token
    out[SIGNATURE] = upstream_signature(out, body, secret_key)
    return out


def sign_strong(
    code: int,
    ext_fields: Mapping[str, str],
    body: bytes,
    access_key: str,
    key: bytes,
    timestamp_ms: int,
    nonce: str,
    server: str,
    security_token: str | None = None,
) -> dict[str, str]:
    """``ext_fields`` plus the strong form's fields and its ``Signature`` for request ``code``
    to the name server whose identity is ``server``; ``key`` is :func:`strong_key` of the
    secret, ``nonce`` never reused with it."""
    if not _NONCE.fullmatch(nonce):
        raise ValueError(f"nonce must be {NONCE_MIN_CHARS}-{NONCE_MAX_CHARS} of [A-Za-z0-9_-]")
    check_server_identity(server)
    out = dict(ext_fields)
    out[ACCESS_KEY] = access_key
    if security_token is not None:
        out[SECURITY_TOKEN] = security_token
    out[SIGNATURE_FORM] = STRONG_V2
    out[SIGN_SERVER] = server
    out[SIGN_TIMESTAMP] = str(timestamp_ms)
    out[SIGN_NONCE] = nonce
    out[SIGNATURE] = strong_signature(code, out, body, key)
    return out


def check_server_identity(server: str) -> None:
    """Raises ValueError unless ``server`` is a well-formed name-server identity."""
    if not SERVER_IDENTITY.fullmatch(server):
        raise ValueError(
            "a name-server identity is 1 to "
            f"{SERVER_IDENTITY_MAX_CHARS} characters of [A-Za-z0-9._:@/-], got {server!r}"
        )


@dataclass(frozen=True, slots=True)
class Credentials:
    """An account's key and secret, the form its requests are signed in and, for the strong
    form, the identity of the name server(s) they are signed for (``acl.server_identity``)."""

    access_key: str
    secret_key: str
    security_token: str | None = None
    form: SignatureForm = SignatureForm.STRONG
    server_identity: str = ""


class RequestSigner:
    """Signs requests with one account's credentials, in the form they name.

    ``now_ms`` is the signer's wall clock (milliseconds since the epoch) and ``new_nonce`` a
    source of fresh nonces (such as ``secrets.token_urlsafe(24)``), both only for the strong
    form."""

    def __init__(
        self,
        credentials: Credentials,
        now_ms: Callable[[], int],
        new_nonce: Callable[[], str],
    ) -> None:
        if credentials.form is SignatureForm.EITHER:
            raise ValueError("a signer writes one form: 'upstream' or 'strong'")
        if credentials.form is SignatureForm.STRONG:
            if not credentials.server_identity:
                raise ValueError(
                    "the strong form names the name server it is for: give the server "
                    "identity (its acl.server_identity)"
                )
            check_server_identity(credentials.server_identity)
        self.credentials = credentials
        self._key = strong_key(credentials.secret_key)
        self._now_ms = now_ms
        self._new_nonce = new_nonce

    def sign(self, code: int, ext_fields: Mapping[str, str], body: bytes) -> dict[str, str]:
        c = self.credentials
        if c.form is SignatureForm.UPSTREAM:
            return sign_upstream(ext_fields, body, c.access_key, c.secret_key, c.security_token)
        return sign_strong(
            code,
            ext_fields,
            body,
            c.access_key,
            self._key,
            self._now_ms(),
            self._new_nonce(),
            c.server_identity,
            c.security_token,
        )
