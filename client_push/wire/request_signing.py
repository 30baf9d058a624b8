"""Signing a client's name-server requests with its credentials, the same for both links.

Each send is signed afresh (a retry elsewhere gets a new nonce and timestamp), so the strong
form's replay cache on the server never sees the same nonce twice from an honest client.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable

from client_push.config import ClientConfig
from protocol.frame import RemotingCommand
from protocol.signing import Credentials, RequestSigner, SignatureForm


def request_signer(config: ClientConfig, now_ms: Callable[[], int]) -> RequestSigner | None:
    """The signer of ``config``'s credentials, or None when it has none; ``now_ms`` is the
    client's clock in milliseconds since the epoch (the wall clock the server compares with),
    which stamps strong-form requests."""
    if not config.access_key:
        return None
    return RequestSigner(
        Credentials(
            config.access_key,
            config.secret_key,
            form=SignatureForm(config.signature),
            server_identity=config.server_identity,
        ),
        now_ms,
        lambda: secrets.token_urlsafe(24),
    )


def signed(signer: RequestSigner | None, cmd: RemotingCommand) -> RemotingCommand:
    """``cmd`` signed for this send, or ``cmd`` itself without a signer."""
    if signer is None:
        return cmd
    fields = signer.sign(cmd.code, cmd.ext_fields, cmd.body)
    return dataclasses.replace(cmd, ext_fields=fields)
