"""The requests' door: where a frame the route cache could not answer comes in, and where
each kind of answer goes out.

The processor answers a request with bytes (sent at once), a shared large answer (sent within
the connections' bound on such answers, which :class:`SharedOutput` keeps), a register spread over
reactor turns (handed to :class:`~namesrv.requests.register.turns.RegisterTurns` with its
request's size), or nothing (a oneway request, a response). A request that left registry work
for later (an unregister of a large broker) starts the turns that do it.
"""

from __future__ import annotations

from typing import Protocol

from namesrv.requests.context import Connection
from namesrv.requests.processors import PendingResponse, RequestProcessor, SharedAnswer
from namesrv.requests.register.turns import RegisterTurns, Requester
from namesrv.routes.registry import RouteRegistry
from protocol.frame import RemotingCommand, SplitFrame


class Peer(Connection, Requester, Protocol):
    """A connection as the door sees it: it sends requests and is sent their answers."""

    def send_shared(self, head: bytes, body: bytes) -> None:
        """Send an answer whose (large, shared) ``body`` is written as the output drains."""


class SharedOutput(Protocol):
    """The bound on answers sent from shared bodies (``namesrv.net.hub.ConnectionHub``)."""

    def send_shared(self, conn: Peer, request: RemotingCommand, head: bytes, body: bytes) -> None:
        """Send ``request``'s answer (``head``, then the shared ``body``) to ``conn`` within
        the bound, or answer it SYSTEM_BUSY past it."""


class RequestDoor:
    """Hands frames to the processor and its answers to where they go."""

    def __init__(
        self,
        processor: RequestProcessor,
        turns: RegisterTurns,
        registry: RouteRegistry,
        shared: SharedOutput,
    ) -> None:
        self._processor = processor
        self._turns = turns
        self._registry = registry
        self._shared = shared

    def frame_received(
        self, conn: Peer, command: RemotingCommand, frame: bytes | SplitFrame
    ) -> None:
        answer = self._processor.handle(conn, command, frame)
        if answer is None:
            return
        if isinstance(answer, PendingResponse):
            size = len(frame) if isinstance(frame, bytes) else len(frame.head) + len(frame.body)
            self._turns.answer_when_applied(conn, answer, size)
            return
        if self._registry.pending_jobs:  # e.g. an unregister of a large broker
            self._turns.schedule()
        if isinstance(answer, SharedAnswer):
            self._shared.send_shared(conn, command, answer.head, answer.body)
            return
        conn.send(answer)
