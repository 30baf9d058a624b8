"""The answer a TLS-enforcing server gives a plaintext request, and how a client knows it.

Upstream closes such a connection without a word, and the client reads a reset. A remoting
frame can carry the reason instead: the first request's opaque (when its frame arrived whole
with the first bytes; 0 otherwise), NO_PERMISSION and a remark a client recognises. A Java
client logs it as a response to no request of its; ``namesrv-admin`` says to use ``--tls``.
"""

from __future__ import annotations

from protocol.codes import FLAG_RESPONSE, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import FrameDecoder, RemotingCommand, encode_command

TLS_REQUIRED_REMARK = "the server requires TLS (server.tls = enforcing)"


def tls_required_frame(first_bytes: bytes) -> bytes:
    """The refusal for a connection whose first read was ``first_bytes``."""
    opaque = 0
    try:
        commands = FrameDecoder(max(len(first_bytes), 64 * 1024)).feed(first_bytes)
    except ProtocolError:
        commands = []
    if commands and not commands[0].is_response:
        opaque = commands[0].opaque
    answer = RemotingCommand(
        code=int(ResponseCode.NO_PERMISSION),
        opaque=opaque,
        flag=FLAG_RESPONSE,
        remark=f"{TLS_REQUIRED_REMARK}: connect with TLS",
    )
    return encode_command(answer)


def is_tls_refusal(cmd: RemotingCommand) -> bool:
    return (
        cmd.is_response
        and cmd.code == ResponseCode.NO_PERMISSION
        and (cmd.remark or "").startswith(TLS_REQUIRED_REMARK)
    )
