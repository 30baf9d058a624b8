"""Requests sent on one connection and not yet answered, matched by opaque; and the answer
to a request the server initiated.

Pure: a connection's glue (Twisted's ``RemotingProtocol``, asyncio's ``RemotingConnection``)
keeps what it waits on (a Deferred, a Future, with its timer) under the opaque this table
assigns, and lets ``answer_server_request`` decide what goes back to the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from protocol.codes import ResponseCode
from protocol.frame import RemotingCommand

log = logging.getLogger("client_push.wire.remoting")

MAX_OPAQUE = 0x7FFFFFFF

E = TypeVar("E")


class RequestTable(Generic[E]):
    """Opaque → what the glue waits on; opaques count up from 1 and wrap, skipping any in use."""

    def __init__(self) -> None:
        self._pending: dict[int, E] = {}
        self._next_opaque = 0

    def __len__(self) -> int:
        return len(self._pending)

    def allocate(self) -> int:
        """An opaque no pending request holds (``put`` an entry under it at once)."""
        while True:
            self._next_opaque = self._next_opaque % MAX_OPAQUE + 1
            if self._next_opaque not in self._pending:
                return self._next_opaque

    def put(self, opaque: int, entry: E) -> None:
        self._pending[opaque] = entry

    def pop(self, opaque: int) -> E | None:
        """The entry of an answered (or given up) request; None when none waits for it."""
        return self._pending.pop(opaque, None)

    def drain(self) -> list[E]:
        """Every entry: the connection is gone."""
        pending, self._pending = self._pending, {}
        return list(pending.values())


def answer_server_request(
    handle: Callable[[RemotingCommand], RemotingCommand | None] | None,
    cmd: RemotingCommand,
    label: str,
) -> RemotingCommand | None:
    """The response to a request from the server; None for a oneway request.

    An error in ``handle`` answers SYSTEM_ERROR (and is logged); a code it does not serve
    answers REQUEST_CODE_NOT_SUPPORTED, as upstream's remoting does.
    """
    response: RemotingCommand | None = None
    if handle is not None:
        try:
            response = handle(cmd)
        except Exception:
            log.exception("error handling request code %d from %s", cmd.code, label)
            response = cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"client failed to handle request code {cmd.code}"
            )
    if cmd.is_oneway:
        return None
    if response is None:
        response = cmd.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f"request code {cmd.code} is not supported by this client",
        )
    return response
