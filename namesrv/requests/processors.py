"""The requests layer's door: one decoded command in, the bytes that answer it out.

:class:`RequestProcessor` serves the commands declared in ``commands``: a table built from the
declarations maps each served code to its bound handler, so a request costs one dictionary
lookup before its handler runs. Around the handler it checks access under the command's
declared class, decodes the declared header, counts, and turns a :class:`ProtocolError` raised
anywhere below into a response carrying its code and remark, so every refusal tells the peer
what was wrong. It encodes the answer and keeps a cacheable route answer in the route-response
cache, which the connection reads before it decodes a request. It holds no sockets and no
timers: the server sends what :meth:`RequestProcessor.handle` returns and steps what is pending.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from namesrv.requests.commands import COMMANDS, Command
from namesrv.requests.context import Connection, PendingResponse, Services
from namesrv.requests.handlers.admin import AdminHandlers
from namesrv.requests.handlers.brokers import BrokerHandlers
from namesrv.requests.handlers.kv import KvHandlers
from namesrv.requests.handlers.lookups import LookupHandlers
from namesrv.requests.handlers.push import PushHandlers
from namesrv.requests.handlers.server_config import ServerConfigHandlers
from namesrv.requests.register.entry import Registers
from namesrv.requests.route_response_cache import RouteResponseCache
from protocol import headers
from protocol.codes import ResponseCode, SerializeType
from protocol.errors import LimitError, ProtocolError
from protocol.frame import RemotingCommand, SplitFrame, encode_command, encode_command_head
from protocol.paced_log import PacedLog
from protocol.register.read import ChunkCache

__all__ = ["Connection", "PendingResponse", "RequestProcessor", "Services", "SharedAnswer"]

log = logging.getLogger(__name__)

Handler = Callable[[Connection, RemotingCommand, Any], "RemotingCommand | PendingResponse"]
_Served = tuple[Command, str, Handler, Callable[[dict[str, str]], Any] | None]
"""A served code's command, its name, its bound handler and its header's decoder."""

HEADERS_REMEMBERED = 1024
"""Distinct headers of a repeating request code whose reading is remembered: a broker's
register header per address (a cluster's brokers, many times over)."""
SHARED_BODY_BYTES = 64 * 1024
"""An answer whose body is at least this long is handed out as :class:`SharedAnswer`."""


class SharedAnswer(NamedTuple):
    """An encoded answer in two parts: the frame up to its body, and the body, which may be
    shared with other answers (a listing of the whole registry): the connection sends it from
    that object as its output drains, never copying it whole."""

    head: bytes
    body: bytes


class RequestProcessor:
    def __init__(
        self,
        services: Services,
        route_responses: RouteResponseCache | None = None,
        counters: Counter[str] | None = None,
        commands: Iterable[Command] = COMMANDS,
    ) -> None:
        """``route_responses`` is the cache the connections answer repeated route lookups
        from; ``counters`` gets ``responses_ignored`` (the server's counters, in its stats)."""
        self.s = services
        if route_responses is None:
            route_responses = RouteResponseCache()
        self.route_responses = route_responses
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self.handled: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self._log = PacedLog(log, services.clock.seconds)
        """A peer decides how many requests get refused: its lines are paced per request."""
        self.limit_refusals: Counter[str] = Counter()
        """Requests refused at a size or count bound, by the bound's name."""
        self.registers = Registers(services, self.refused, self.limit_refusals, self._log)
        """REGISTER_BROKER, its pending registers stepped through :meth:`step`."""
        parts = (
            KvHandlers(services),
            BrokerHandlers(services),
            self.registers,
            LookupHandlers(services),
            AdminHandlers(services),
            ServerConfigHandlers(services),
            PushHandlers(services),
        )
        self._served = _serving_table(commands, parts, services.operations is not None)
        acl = services.acl
        self._acl = acl if acl is not None and acl.enabled else None

    @property
    def served_codes(self) -> frozenset[int]:
        """The codes this processor answers; any other is answered REQUEST_CODE_NOT_SUPPORTED."""
        return frozenset(self._served)

    @property
    def register_bodies_read(self) -> int:
        """Register bodies parsed; an identical heartbeat body is not."""
        return self.registers.stages.bodies_read

    @property
    def register_topics_dropped(self) -> int:
        """Topics dropped from registers because their names are no topic names."""
        return self.registers.stages.topics_dropped

    @property
    def chunk_cache(self) -> ChunkCache | None:
        """Register-table chunks read lately (see ``registry.register_chunk_cache_bytes``)."""
        return self.registers.stages.chunk_cache

    def step(self, pending: PendingResponse) -> RemotingCommand | None:
        """One step of a pending register: its response once it is done, else None."""
        return self.registers.step(pending)

    def abandon(self, pending: PendingResponse) -> None:
        """Drop a pending register not yet applied: it changes nothing, is never answered."""
        self.registers.abandon(pending)

    def handle(
        self, conn: Connection, request: RemotingCommand, frame: bytes | SplitFrame
    ) -> bytes | SharedAnswer | PendingResponse | None:
        """The encoded answer to send (a :class:`SharedAnswer` when its body is large); a
        :class:`PendingResponse` to step once per reactor turn (even for a oneway request: its
        answer is then dropped); or None (a oneway request, or a response frame from the peer,
        which is ignored)."""
        if request.is_response:
            # A client without the extension answers a oneway frame it does not know (a
            # notification or GO_AWAY) with REQUEST_CODE_NOT_SUPPORTED: normal, not an error.
            declined = request.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            self.counters["oneways_declined" if declined else "responses_ignored"] += 1
            return None
        served = self._served.get(request.code)
        if served is None:
            return self._unsupported(request)
        command = served[0]
        if command.marks_extension:
            encoding = command.sets_notify_encoding
            conn.note_extension(SerializeType(request.serialize_type) if encoding else None)
        response = self._respond(conn, request, served)
        if isinstance(response, PendingResponse):
            response.request = request
            return response
        if request.is_oneway:
            return None
        if len(response.body) >= SHARED_BODY_BYTES and not command.cacheable_route_answer:
            return SharedAnswer(encode_command_head(response), bytes(response.body))
        encoded = encode_command(response)
        if command.cacheable_route_answer and isinstance(frame, bytes):
            topic = request.ext_fields.get("topic", "")
            self.route_responses.store(frame, request, response, topic, encoded)
        return encoded

    def _unsupported(self, request: RemotingCommand) -> bytes | None:
        self.refused["unsupported"] += 1
        if request.is_oneway:
            return None
        return encode_command(
            request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"request code {request.code} is not supported by this name server",
            )
        )

    def _respond(
        self, conn: Connection, request: RemotingCommand, served: _Served
    ) -> RemotingCommand | PendingResponse:
        """The handler's response, after the ACL check; a refusal (``ProtocolError``) or a bug
        in the handler becomes an error response, counted and logged."""
        command, name, handler, read_header = served
        acl = self._acl
        try:
            signer = None
            if acl is not None:
                signer = acl.check(
                    command.access, request.code, name, request.ext_fields, request.body
                )
            header = read_header(request.ext_fields) if read_header is not None else None
            response = handler(conn, request, header)
            if acl is not None and signer is not None:
                if isinstance(response, PendingResponse):
                    response.signer = signer  # bound once the register succeeds
                elif response.code == ResponseCode.SUCCESS:
                    acl.accepted(request.code, signer, request.ext_fields)
            self.handled[name] += 1
            return response
        except ProtocolError as exc:
            self.refused[name] += 1
            if isinstance(exc, LimitError):
                self.limit_refusals[exc.limit] += 1
            self._log.log(logging.INFO, name, "refused %s from %s: %s", name, conn.peer, exc.remark)
            return request.make_response(exc.code, exc.remark)
        except Exception as exc:  # a bug must cost one request, not the connection
            self.refused[name] += 1
            self._log.log(
                logging.ERROR,
                f"error.{name}",
                "error processing %s from %s",
                name,
                conn.peer,
                exc_info=True,
            )
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__} while processing {name}"
            )


def _serving_table(
    commands: Iterable[Command], parts: tuple[object, ...], operations: bool
) -> dict[int, _Served]:
    """Served code -> what :meth:`RequestProcessor.handle` needs of it, each handler bound to
    the part whose class defines it. Fails on a code declared twice or an unbound handler."""
    table: dict[int, _Served] = {}
    for command in commands:
        if command.needs_operations and not operations:
            continue
        if command.code in table:
            raise ValueError(f"request code {command.name} is declared twice")
        header = command.header
        read_header: Callable[[dict[str, str]], Any] | None = None
        if header is not None and command.header_repeats:
            read_header = headers.remembering(header, HEADERS_REMEMBERED)
        elif header is not None:
            read_header = header.from_wire
        table[int(command.code)] = (command, command.name, _bind(command, parts), read_header)
    return table


def _bind(command: Command, parts: tuple[object, ...]) -> Handler:
    method = command.handler
    for part in parts:
        if vars(type(part)).get(method.__name__) is method:
            bound: Handler = getattr(part, method.__name__)
            return bound
    raise ValueError(f"the handler of {command.name} is a method of no handler class")
