"""REGISTER_BROKER's one entry: a register taken in, stepped through the stages of
:mod:`namesrv.requests.register.stages`, then answered or refused.

A small body is read and applied at once. A large one (past
``registry.register_read_slice_bytes``), a small compressed body that inflates large, a large
table, or a register from an address whose earlier register is still in flight, is a
:class:`PendingResponse` the server steps once per reactor turn
(:mod:`namesrv.requests.register.turns`); the registers of one address run one after the other,
in the order they came. A register past a registry bound (``registry.max_topics_per_broker`` and
the others of :class:`~protocol.register.table.ReadLimits`, and
``registry.max_total_topics``) is refused whole before anything of it is applied.
"""

from __future__ import annotations

import logging
from collections import Counter

from namesrv.requests.context import Connection, PendingResponse, Services, who_asked
from namesrv.requests.register import validation
from namesrv.requests.register.stages import WAIT, Passage, RegisterStages
from protocol import headers
from protocol.codes import ResponseCode
from protocol.errors import LimitError, ProtocolError
from protocol.frame import RemotingCommand
from protocol.paced_log import PacedLog
from protocol.register.read import ChunkCache
from protocol.register.table import ReadLimits

log = logging.getLogger(__name__)

READ = "read"
"""What a pending register's last step did when it read a slice (see ``PendingResponse.last``)."""


class Registers:
    """The REGISTER_BROKER handler and the steps of its pending registers."""

    def __init__(
        self,
        services: Services,
        refused: Counter[str],
        limit_refusals: Counter[str],
        peer_log: PacedLog | None = None,
    ) -> None:
        """``refused`` counts the registers refused once they were pending (by code name),
        ``limit_refusals`` those refused at a bound (by the bound's name); ``peer_log`` paces
        the lines about them (a peer decides how many there are)."""
        self.s = services
        self._refused = refused
        self._limit_refusals = limit_refusals
        self._log = peer_log if peer_log is not None else PacedLog(log, services.clock.seconds)
        registry = services.config.registry
        limits = ReadLimits(
            max_topics=registry.max_topics_per_broker,
            max_attributes_bytes=registry.max_topic_attributes_bytes,
            max_inflate_ratio=registry.register_max_inflate_ratio,
            max_general_bytes=registry.register_read_slice_bytes,
        )
        cache_bytes = registry.register_chunk_cache_bytes
        self.stages = RegisterStages(
            services, limits, ChunkCache(cache_bytes) if cache_bytes > 0 else None, self._log
        )
        self._in_flight: Counter[tuple[str, str]] = Counter()

    def register_broker(
        self, conn: Connection, req: RemotingCommand, h: headers.RegisterBrokerRequestHeader
    ) -> RemotingCommand | PendingResponse:
        """REGISTER_BROKER: the answer of a small register, else a :class:`PendingResponse`."""
        validation.check_address("brokerAddr", h.broker_addr)
        validation.check_address("haServerAddr", h.ha_server_addr, required=False)
        key = (h.cluster_name, h.broker_addr)
        # A compressed body inflates to about 16 times its size (20-40 for real tables).
        weight = len(req.body) * (16 if h.compressed else 1)
        large = weight > self.s.config.registry.register_read_slice_bytes
        passage = Passage(
            req,
            bytes(req.body),
            h.compressed,
            req.version,
            h.body_crc32,
            large,
            h,
            conn.conn_id,
            who_asked(self.s, conn, req),
        )
        steps = self.stages.steps(passage)
        if large or self._in_flight[key]:
            self._in_flight[key] += 1
            return PendingResponse(steps, key)
        try:
            next(steps)
        except StopIteration as done:
            response: RemotingCommand = done.value
            return response
        self._in_flight[key] += 1
        return PendingResponse(steps, key, started=True)

    def step(self, pending: PendingResponse) -> RemotingCommand | None:
        """One step of a pending register; its response (an error one for a refused body) once
        it is done, else None."""
        try:
            pending.last = next(pending.steps) or READ
            pending.started = True
            return None
        except StopIteration as done:
            response: RemotingCommand = done.value
            acl = self.s.acl
            if acl is not None and pending.signer is not None and response.code == 0:
                request = pending.request
                acl.accepted(request.code, pending.signer, request.ext_fields)
        except ProtocolError as exc:
            self._refused["REGISTER_BROKER"] += 1
            if isinstance(exc, LimitError):
                self._limit_refusals[exc.limit] += 1
            self._log.log(
                logging.INFO,
                "REGISTER_BROKER",
                "refused REGISTER_BROKER from %s: %s",
                pending.key[1],
                exc.remark,
            )
            response = pending.request.make_response(exc.code, exc.remark)
        except Exception as exc:  # a bug must cost one request, not the server
            self._refused["REGISTER_BROKER"] += 1
            self._log.log(
                logging.ERROR,
                "error.REGISTER_BROKER",
                "error processing REGISTER_BROKER from %s",
                pending.key[1],
                exc_info=True,
            )
            response = pending.request.make_response(
                ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__} while processing REGISTER_BROKER"
            )
        self._done(pending)
        return response

    def abandon(self, pending: PendingResponse) -> None:
        """Drop a pending register whose table is not handed to the registry yet (its
        connection closed): its steps end here, and the next register of its address runs."""
        if pending.last == WAIT:
            raise ValueError("a register being applied cannot be abandoned")
        pending.steps.close()
        self._done(pending)

    def _done(self, pending: PendingResponse) -> None:
        self._in_flight[pending.key] -= 1
        if self._in_flight[pending.key] <= 0:
            del self._in_flight[pending.key]
