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
    """The signing rule as the issue states it, written without the server's helpers."""
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
