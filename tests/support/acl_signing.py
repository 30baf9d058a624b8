"""ACL accounts for tests, and a signer written apart from the server's, to check it against."""

from __future__ import annotations

import base64
import hashlib
import hmac

from protocol.frame import RemotingCommand

ACL = {
    "enabled": True,
    "accounts": [
        {"access_key": "broker-key", "secret_key": "broker-secret", "brokers": ["broker-a"]},
        {"access_key": "other-key", "secret_key": "other-secret", "brokers": ["*"]},
        {"access_key": "ops", "secret_key": "ops-secret", "admin": True},
    ],
}


def independent_sign(cmd: RemotingCommand, access_key: str, secret_key: str) -> RemotingCommand:
    """Upstream's signing rule (``AclClientRPCHook``), written without the server's helpers."""
    fields = dict(cmd.ext_fields)
    fields["AccessKey"] = access_key
    content = b""
    for key in sorted(fields):
        if key != "Signature":
            content += fields[key].encode("utf-8")
    content += cmd.body
    mac = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    fields["Signature"] = base64.b64encode(mac).decode()
    cmd.ext_fields = fields
    return cmd


SERVER_IDENTITY = "ns-test.cluster-a"
"""The identity of the test servers that take strong signatures (``acl.server_identity``)."""

STRONG_ACL = {
    "enabled": True,
    "server_identity": SERVER_IDENTITY,
    "signature_skew_ms": 60_000,
    "accounts": [
        {"access_key": "broker-key", "secret_key": "broker-secret", "brokers": ["broker-a"]},
        {"access_key": "ops", "secret_key": "ops-secret", "admin": True, "signature": "strong"},
        {"access_key": "ops-either", "secret_key": "either-secret", "admin": True},
        {
            "access_key": "ops-upstream",
            "secret_key": "upstream-secret",
            "admin": True,
            "signature": "upstream",
        },
    ],
}
"""Accounts of each signature form; ``ops`` takes only the strong form."""


def independent_strong_sign(
    cmd: RemotingCommand,
    access_key: str,
    secret_key: str,
    timestamp_ms: int,
    nonce: str,
    server: str = SERVER_IDENTITY,
) -> RemotingCommand:
    """The strong form as docs/config.md states it, written without the project's helpers,
    for the name server whose identity is ``server``."""
    fields = dict(cmd.ext_fields)
    fields.update(
        {
            "AccessKey": access_key,
            "SignatureForm": "strong-v2",
            "SignServer": server,
            "SignTimestamp": str(timestamp_ms),
            "SignNonce": nonce,
        }
    )
    fields.pop("Signature", None)
    key = hmac.new(
        secret_key.encode(), b"rocketmq-namesrv strong request signature key v1", hashlib.sha256
    ).digest()

    def netstring(data: bytes) -> bytes:
        return str(len(data)).encode() + b":" + data + b","

    content = b"rocketmq-namesrv-strong-v2\n" + str(cmd.code).encode() + b"\n"
    for name in sorted(fields):
        content += netstring(name.encode()) + netstring(fields[name].encode())
    content += netstring(cmd.body)
    fields["Signature"] = base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    cmd.ext_fields = fields
    return cmd


def recoded(captured: RemotingCommand, code: int) -> RemotingCommand:
    """A captured request's fields and body sent again under another request code."""
    return RemotingCommand.request(code, dict(captured.ext_fields), captured.body)


def resent(captured: RemotingCommand) -> RemotingCommand:
    """A captured request sent again byte for byte (a new opaque, as any sender assigns)."""
    return recoded(captured, captured.code)
