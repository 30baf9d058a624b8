"""Broker requests: register (read and applied in slices when large), unregister, heartbeat,
data-version query and member group."""

from __future__ import annotations

import logging
from collections import Counter

from namesrv.ops.audit_events import BrokerLeft
from namesrv.requests import register_validation as validation
from namesrv.requests.context import (
    Connection,
    PendingResponse,
    Services,
    audit,
    ok,
    who_asked,
)
from namesrv.requests.register_stages import RegisterBody, RegisterStages, broker_request
from protocol import bodies, headers, register_body
from protocol.codes import ResponseCode
from protocol.errors import LimitError, ProtocolError
from protocol.frame import RemotingCommand
from protocol.paced_log import PacedLog
from protocol.register.chunk_cache import ChunkCache
from protocol.register.read_table import ReadLimits

log = logging.getLogger(__name__)


class BrokerHandlers:
    def __init__(
        self, services: Services, refused: Counter[str], peer_log: PacedLog | None = None
    ) -> None:
        """``refused`` counts the registers refused once they were pending (by code name);
        ``peer_log`` paces the lines about them (a peer decides how many there are)."""
        self.s = services
        self._refused = refused
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
        self.limit_refusals: Counter[str] = Counter()
        """Registers refused at a size or count bound, by the bound's name."""
        self._in_flight: Counter[tuple[str, str]] = Counter()

    @property
    def chunk_cache(self) -> ChunkCache | None:
        """Register-table chunks read lately (see ``registry.register_chunk_cache_bytes``)."""
        return self.stages.chunk_cache

    @property
    def register_bodies_read(self) -> int:
        """Register bodies parsed; an identical heartbeat body is not."""
        return self.stages.bodies_read

    @property
    def register_versions_only(self) -> int:
        """Registers whose body differed from the broker's last one only in the data version:
        not parsed either."""
        return self.stages.versions_only

    @property
    def register_topics_dropped(self) -> int:
        """Topics dropped from registers because their names are no topic names."""
        return self.stages.topics_dropped

    def register_broker(
        self, conn: Connection, req: RemotingCommand, h: headers.RegisterBrokerRequestHeader
    ) -> RemotingCommand | PendingResponse:
        """REGISTER_BROKER. A small body is read and applied now; a large one (past
        ``registry.register_read_slice_bytes``), a large table, a small compressed body that
        inflates large, or a register from an address whose earlier register is still in
        flight, is a :class:`PendingResponse` the server steps once per reactor turn
        (:meth:`step`) through the stages of :mod:`namesrv.requests.register_stages`. A
        register past a registry bound (``registry.max_topics_per_broker`` and the others of
        :class:`~protocol.register.read_table.ReadLimits`, and ``registry.max_total_topics``) is
        refused whole before anything of it is applied."""
        validation.check_address("brokerAddr", h.broker_addr)
        validation.check_address("haServerAddr", h.ha_server_addr, required=False)
        key = (h.cluster_name, h.broker_addr)
        # A compressed body inflates to about 16 times its size (20-40 for real tables).
        weight = len(req.body) * (16 if h.compressed else 1)
        large = weight > self.s.config.registry.register_read_slice_bytes
        body = RegisterBody(bytes(req.body), h.compressed, req.version, h.body_crc32, large)
        who = who_asked(self.s, conn, req)
        steps = self.stages.steps(req, body, broker_request(h, conn.conn_id), who)
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
            pending.last = next(pending.steps)
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
                self.limit_refusals[exc.limit] += 1
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
        if pending.last == "wait":
            raise ValueError("a register being applied cannot be abandoned")
        pending.steps.close()
        self._done(pending)

    def _done(self, pending: PendingResponse) -> None:
        self._in_flight[pending.key] -= 1
        if self._in_flight[pending.key] <= 0:
            del self._in_flight[pending.key]

    def unregister_broker(
        self, conn: Connection, req: RemotingCommand, h: headers.UnregisterBrokerRequestHeader
    ) -> RemotingCommand:
        departed = self.s.registry.unregister_broker(
            cluster_name=h.cluster_name,
            broker_addr=h.broker_addr,
            broker_name=h.broker_name,
            broker_id=h.broker_id,
        )
        for event in departed:
            audit(self.s, BrokerLeft.of(event), conn, req)
        return ok(req)

    def broker_heartbeat(
        self, conn: Connection, req: RemotingCommand, h: headers.BrokerHeartbeatRequestHeader
    ) -> RemotingCommand:
        self.s.registry.broker_heartbeat(cluster_name=h.cluster_name, broker_addr=h.broker_addr)
        return ok(req)

    def query_data_version(
        self, conn: Connection, req: RemotingCommand, h: headers.QueryDataVersionRequestHeader
    ) -> RemotingCommand:
        version = register_body.decode_data_version(req.body)
        changed = self.s.registry.query_data_version_changed(
            cluster_name=h.cluster_name, broker_addr=h.broker_addr, data_version=version
        )
        return ok(req, headers.QueryDataVersionResponseHeader(changed=changed).to_wire())

    def get_broker_member_group(
        self, conn: Connection, req: RemotingCommand, h: headers.GetBrokerMemberGroupRequestHeader
    ) -> RemotingCommand:
        addrs = self.s.registry.broker_member_group(h.cluster_name, h.broker_name)
        return ok(req, body=bodies.encode_broker_member_group(h.cluster_name, h.broker_name, addrs))
