"""Broker requests: register (read and applied in slices when large), unregister, heartbeat,
data-version query and member group."""

from __future__ import annotations

import logging
import struct
import zlib
from collections import Counter
from collections.abc import Generator
from typing import Any

from namesrv.ops.log_limit import RateLimitedLog
from namesrv.requests import register_validation as validation
from namesrv.requests.context import Connection, PendingResponse, Services, ok
from namesrv.routes.route_bodies import ORDER_TOPIC_CONFIG_NAMESPACE
from protocol import bodies, headers, register_body
from protocol.codes import ResponseCode
from protocol.errors import LimitError, ProtocolError
from protocol.frame import RemotingCommand
from protocol.register import lean_read, version_cut
from protocol.register.chunk_cache import ChunkCache
from protocol.route_model import DataVersion

_HASH_SLICE_BYTES = 4 << 20
"""CRC-32 of a large register body per reactor turn: a few milliseconds."""
_DIGEST = struct.Struct(">cQIq")
"""(form, length, CRC-32, hash) of a register body: what makes two bodies the same."""

log = logging.getLogger(__name__)


class BrokerHandlers:
    def __init__(
        self, services: Services, refused: Counter[str], peer_log: RateLimitedLog | None = None
    ) -> None:
        """``refused`` counts the registers refused once they were pending (by code name);
        ``peer_log`` paces the lines about them (a peer decides how many there are)."""
        self.s = services
        self._refused = refused
        self._log = peer_log if peer_log is not None else RateLimitedLog(log, services.clock)
        registry = services.config.registry
        self.limits = lean_read.ReadLimits(
            max_topics=registry.max_topics_per_broker,
            max_attributes_bytes=registry.max_topic_attributes_bytes,
            max_inflate_ratio=registry.register_max_inflate_ratio,
            max_general_bytes=registry.register_read_slice_bytes,
        )
        self.limit_refusals: Counter[str] = Counter()
        """Registers refused at a size or count bound, by the bound's name."""
        self.register_bodies_read = 0
        """Register bodies parsed; an identical heartbeat body is not."""
        self.register_versions_only = 0
        """Registers whose body differed from the broker's last one only in the data version:
        not parsed either."""
        cache_bytes = services.config.registry.register_chunk_cache_bytes
        self.chunk_cache = ChunkCache(cache_bytes) if cache_bytes > 0 else None
        """Register-table chunks read lately (see ``registry.register_chunk_cache_bytes``)."""
        self._in_flight: Counter[tuple[str, str]] = Counter()

    def register_broker(
        self, conn: Connection, req: RemotingCommand, h: headers.RegisterBrokerRequestHeader
    ) -> RemotingCommand | PendingResponse:
        """REGISTER_BROKER. A small body is read and applied now; a large one (past
        ``registry.register_read_slice_bytes``), a large table, a small compressed body that
        inflates large, or a register from an address whose earlier register is still in
        flight, is a :class:`PendingResponse` the server steps once per reactor turn
        (:meth:`step`). A register past a registry bound (``registry.max_topics_per_broker``
        and the others of :class:`~protocol.register.lean_read.ReadLimits`, and
        ``registry.max_total_topics``) is refused whole before anything of it is applied."""
        validation.check_address("brokerAddr", h.broker_addr)
        validation.check_address("haServerAddr", h.ha_server_addr, required=False)
        key = (h.cluster_name, h.broker_addr)
        # A compressed body inflates to about 16 times its size (20-40 for real tables).
        weight = len(req.body) * (16 if h.compressed else 1)
        large = weight > self.s.config.registry.register_read_slice_bytes
        steps = self._register_steps(conn, req, h, large)
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
            log.exception("error processing REGISTER_BROKER from %s", pending.key[1])
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

    def _register_steps(
        self,
        conn: Connection,
        req: RemotingCommand,
        h: headers.RegisterBrokerRequestHeader,
        large: bool,
    ) -> Generator[str, None, RemotingCommand]:
        """Read, check and apply one register; yields ``"read"`` after each slice of reading
        and ``"wait"`` while its table is applied by the registry's jobs."""
        registry = self.s.registry
        config = self.s.config.registry
        body = bytes(req.body)
        # Slices of content whatever the body's size: a small compressed body may inflate
        # large, and then its reading yields like a large one's (and the register is pending).
        chunk = config.register_read_slice_bytes
        topics_per_step = registry.slice_topics
        crc = 0
        view = memoryview(body)
        for offset in range(0, len(body), _HASH_SLICE_BYTES):  # in C, a few ms per slice
            crc = zlib.crc32(view[offset : offset + _HASH_SLICE_BYTES], crc)
            if large:
                yield "read"
        if h.body_crc32 != 0 and crc & 0x7FFFFFFF != h.body_crc32:
            raise ProtocolError("crc32 not match", ResponseCode.SYSTEM_ERROR)
        digest: bytes | None = None
        table_key: version_cut.TableKey | None = None
        same_table = False
        topic_configs: dict[str, lean_read.TopicQueueSpec] | None
        filter_servers: list[str]
        mapping: dict[str, Any]
        if body:
            if large:
                hash(body)  # kept by the body: the cut then hashes its tail alone
                yield "read"  # hashing 16 MB is a few milliseconds of its own
            # A plain body is cut around its data version: the same bytes around it say the
            # same table (see protocol.register.version_cut).
            found = None if h.compressed else version_cut.cut(body)
            # Tells the heartbeat (the very body of the last register) apart: length, CRC-32
            # and the interpreter's keyed SipHash of the bytes (in C), which a broker cannot
            # steer into a collision without the process's secret key; of a cut body, the
            # hashes of the bytes around the version and the version.
            whole = hash(body) if found is None else hash(found)
            digest = _DIGEST.pack(b"c" if h.compressed else b"p", len(body), crc, whole)
            parts = None
            if large:
                yield "read"  # and the tail's hash, a few more
            if registry.body_unchanged(
                h.cluster_name, h.broker_addr, h.broker_name, h.broker_id, digest
            ):
                # The heartbeat: the very body of this broker's last register, not read again.
                topic_configs, data_version, filter_servers, mapping = None, DataVersion(), [], {}
            elif found is not None and registry.table_unchanged(
                h.cluster_name,
                h.broker_addr,
                h.broker_name,
                h.broker_id,
                found.key,
                h.enable_acting_master,
            ):
                # The last register's body with another data version: its table is whole.
                self.register_versions_only += 1
                topic_configs, data_version, filter_servers, mapping = None, found.version, [], {}
                table_key, same_table = found.key, True
            else:
                self.register_bodies_read += 1
                reading = lean_read.register_body_steps(
                    body,
                    h.compressed,
                    req.version,
                    topics_per_step=topics_per_step,
                    bytes_per_step=chunk,
                    chunk_cache=self.chunk_cache,
                    limits=self.limits,
                )
                while True:
                    try:
                        next(reading)
                    except StopIteration as done:
                        table: lean_read.RegisterTable = done.value
                        break
                    yield "read"
                # Checked whole before anything is applied (names a slice at a time, in C); the
                # names of chunks that passed before are not checked again.
                cache = self.chunk_cache
                if table.parts is not None and cache is not None:
                    names = cache.unchecked_names(table.parts)
                else:
                    names = list(table.topic_queues)
                for start in range(0, len(names), topics_per_step):
                    if start:
                        yield "read"
                    piece = names[start : start + topics_per_step]
                    validation.check_topic_names(piece, config.max_topic_name_bytes)
                topic_count = registry.topic_count
                unknown = 0
                if topic_count + len(table.topic_queues) > config.max_total_topics:
                    # Near the bound: the topics new to the registry are counted.
                    everything = list(table.topic_queues)
                    for start in range(0, len(everything), topics_per_step):
                        yield "read"
                        piece = everything[start : start + topics_per_step]
                        unknown += registry.unknown_topics(piece)
                validation.check_total_topics(topic_count, unknown, config.max_total_topics)
                for name, other in table.renamed.items():
                    field = f"topicConfigTable[{name[:130]!r}]"
                    raise validation.RegisterError(
                        f"{field}.topicName {other[:130]!r} differs from its key"
                    )
                validation.check_topic_specs(
                    table.topic_queues, table.specs, self.s.config.registry.max_queue_nums
                )
                if table.parts is not None and cache is not None:
                    cache.checked(table.parts)
                topic_configs, data_version = table.topic_queues, table.data_version
                if found is not None and version_cut.certify(body, found, data_version):
                    table_key = found.key
                parts = table.parts
                filter_servers = table.filter_server_list
                mapping = table.topic_queue_mapping_info_map
        else:
            topic_configs, data_version, filter_servers, mapping = {}, DataVersion(), [], {}
            parts = None
        for i, addr in enumerate(filter_servers):
            validation.check_address(f"filterServerList[{i}]", addr)
        acl = self.s.acl
        if acl is not None and acl.enabled:
            # Checked again where it is applied: a register checked before another one took
            # the address (both pending) must not move it.
            acl.check_address(
                req.code, "REGISTER_BROKER", h.cluster_name, h.broker_name, h.broker_addr
            )
        result = registry.register_broker(
            cluster_name=h.cluster_name,
            broker_addr=h.broker_addr,
            broker_name=h.broker_name,
            broker_id=h.broker_id,
            ha_server_addr=h.ha_server_addr,
            topic_configs=topic_configs,
            data_version=data_version,
            filter_server_list=filter_servers,
            heartbeat_timeout_ms=h.heartbeat_timeout_millis,
            enable_acting_master=h.enable_acting_master,
            channel=conn.conn_id,
            topic_queue_mapping_info=mapping,
            body_digest=digest,
            table_parts=parts,
            zone_name=h.zone_name,
            table_key=table_key,
            same_table=same_table,
        )
        ext = headers.RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        ).to_wire()
        order_conf = self.s.kv.list_namespace(ORDER_TOPIC_CONFIG_NAMESPACE)
        response = ok(req, ext, bodies.encode_kv_table(order_conf) if order_conf else b"")
        while result.job is not None and not result.job.done:
            yield "wait"
        return response

    def unregister_broker(
        self, conn: Connection, req: RemotingCommand, h: headers.UnregisterBrokerRequestHeader
    ) -> RemotingCommand:
        self.s.registry.unregister_broker(
            cluster_name=h.cluster_name,
            broker_addr=h.broker_addr,
            broker_name=h.broker_name,
            broker_id=h.broker_id,
        )
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
