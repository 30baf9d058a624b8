"""REGISTER_BROKER in stages: checksum, classify, read, validate, apply.

Each stage is a generator the register's steps join with ``yield from``; it yields ``"read"``
after each slice of its work (a few milliseconds: a CRC-32 slice, a hash, a slice of reading or
of checking names) and the apply stage ``"wait"`` while the registry applies the table in
slices of its own. The server steps a pending register once per reactor turn, so a large body
never holds the reactor for longer than a slice.

- **checksum**: the body's CRC-32 against the one its header declares.
- **classify**: the heartbeat (the very body of the address's last register), the version-only
  change (a plain body that differs from the last one only in its data version), or a body
  to read.
- **read**: the lean read of :mod:`protocol.register.lean_read`, bounded by :class:`ReadLimits`.
- **validate**: names, queue counts and the registry's total, checked whole before anything of
  the register is applied; a topic whose name upstream's broker could never have created is
  dropped from the register (logged and counted), the rest applied.
- **apply**: filter-server addresses and the ACL's address claim, then the registry.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import zlib
from collections.abc import Generator
from dataclasses import dataclass
from enum import Enum

from namesrv.ops.audit_events import BrokerRegistered, TopicsUnlisted, Who
from namesrv.requests import register_validation as validation
from namesrv.requests.context import Services, ok
from namesrv.routes.register_request import RegisterRequest
from namesrv.routes.route_bodies import ORDER_TOPIC_CONFIG_NAMESPACE
from protocol import headers
from protocol.codes import ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.paced_log import PacedLog
from protocol.register import lean_read, version_cut
from protocol.register.chunk_cache import ChunkCache
from protocol.register.read_table import ReadLimits, RegisterTable
from protocol.route_model import DataVersion

HASH_SLICE_BYTES = 4 << 20
"""CRC-32 of a large register body per reactor turn: a few milliseconds."""
_DIGEST = struct.Struct(">cQIq")
"""(form, length, CRC-32, hash) of a register body: what makes two bodies the same."""

log = logging.getLogger(__name__)

DROPPED_NAMES_SHOWN = 5
"""Dropped topic names a log line names; the rest are counted."""

Steps = Generator[str, None, RemotingCommand]
"""A register's steps: ``"read"`` after each slice of reading, ``"wait"`` while applied."""


@dataclass(frozen=True, slots=True)
class RegisterBody:
    """A register's body as it came: its bytes, form, broker version and declared CRC-32."""

    data: bytes
    compressed: bool
    broker_version: int
    declared_crc32: int
    """0: the broker declared none."""
    large: bool
    """Read in slices across reactor turns from the first one (the register is pending)."""


class Kind(Enum):
    """What the classify stage found a non-empty body to be."""

    HEARTBEAT = "heartbeat"
    """The very body of the address's last register: not read again."""
    VERSION_ONLY = "version-only"
    """The last register's body with another data version: its table is whole."""
    READ = "read"


@dataclass(frozen=True, slots=True)
class Classified:
    kind: Kind
    digest: bytes
    cut: version_cut.VersionCut | None
    """A plain body cut around its data version (see :mod:`protocol.register.version_cut`)."""


def broker_request(h: headers.RegisterBrokerRequestHeader, channel: object) -> RegisterRequest:
    """The register of a header, its body not looked at yet (an empty body's: no topics)."""
    return RegisterRequest(
        cluster_name=h.cluster_name,
        broker_addr=h.broker_addr,
        broker_name=h.broker_name,
        broker_id=h.broker_id,
        ha_server_addr=h.ha_server_addr,
        topic_configs={},
        data_version=DataVersion(),
        filter_server_list=[],
        heartbeat_timeout_ms=h.heartbeat_timeout_millis,
        enable_acting_master=h.enable_acting_master,
        channel=channel,
        topic_queue_mapping_info={},
        zone_name=h.zone_name,
    )


def checksum(body: RegisterBody) -> Generator[str, None, int]:
    """The body's CRC-32, a slice per step when large, checked against the declared one (the
    masked form upstream sends); SYSTEM_ERROR when they differ."""
    crc = 0
    data = body.data
    view = memoryview(data)
    for offset in range(0, len(data), HASH_SLICE_BYTES):  # in C, a few ms per slice
        crc = zlib.crc32(view[offset : offset + HASH_SLICE_BYTES], crc)
        if body.large:
            yield "read"
    if body.declared_crc32 != 0 and crc & 0x7FFFFFFF != body.declared_crc32:
        raise ProtocolError("crc32 not match", ResponseCode.SYSTEM_ERROR)
    return crc


class RegisterStages:
    """The stages of one name server's registers, with the counters of what they skipped."""

    def __init__(
        self,
        services: Services,
        limits: ReadLimits,
        cache: ChunkCache | None,
        peer_log: PacedLog | None = None,
    ) -> None:
        self.s = services
        self.limits = limits
        self.chunk_cache = cache
        self._log = peer_log if peer_log is not None else PacedLog(log, services.clock.seconds)
        self.topics_dropped = 0
        """Topics dropped from registers for names that are no topic names."""
        self.bodies_read = 0
        """Register bodies parsed; an identical heartbeat body is not."""
        self.versions_only = 0
        """Registers whose body differed from the broker's last one only in the data version:
        not parsed either."""

    def steps(
        self,
        req: RemotingCommand,
        body: RegisterBody,
        request: RegisterRequest,
        who: Who | None = None,
    ) -> Steps:
        """Check, read and apply one register (``request`` as :func:`broker_request` made it);
        ``who`` sent it, for the audit trail."""
        crc = yield from checksum(body)
        if body.data:
            request = yield from self._body_request(request, body, crc)
        return (yield from self.apply(req, request, who or Who()))

    def _body_request(
        self, request: RegisterRequest, body: RegisterBody, crc: int
    ) -> Generator[str, None, RegisterRequest]:
        seen = yield from self.classify(request, body, crc)
        if seen.kind is Kind.HEARTBEAT:
            return request.evolve(topic_configs=None, body_digest=seen.digest)
        cut = seen.cut
        if seen.kind is Kind.VERSION_ONLY:
            assert cut is not None
            self.versions_only += 1
            return request.evolve(
                topic_configs=None,
                data_version=cut.version,
                body_digest=seen.digest,
                table_key=cut.key,
                same_table=True,
            )
        self.bodies_read += 1
        table = yield from self.read(body)
        table = yield from self.validate(table, request.broker_addr)
        certified = cut is not None and version_cut.certify(body.data, cut, table.data_version)
        return request.evolve(
            topic_configs=table.topic_queues,
            data_version=table.data_version,
            filter_server_list=table.filter_server_list,
            topic_queue_mapping_info=table.topic_queue_mapping_info_map,
            body_digest=seen.digest,
            table_parts=table.parts,
            table_key=cut.key if certified and cut is not None else None,
        )

    def classify(
        self, request: RegisterRequest, body: RegisterBody, crc: int
    ) -> Generator[str, None, Classified]:
        """Heartbeat, version-only or a body to read.

        A body is told apart by length, CRC-32 and the interpreter's keyed SipHash of its bytes
        (in C), which a broker cannot steer into a collision without the process's secret key;
        a plain body is cut around its data version, and then keyed by the hashes of the bytes
        around the version and the version (the same bytes around it say the same table).
        """
        data = body.data
        if body.large:
            hash(data)  # kept by the bytes: the cut then hashes its tail alone
            yield "read"  # hashing 16 MB is a few milliseconds of its own
        cut = None if body.compressed else version_cut.cut(data)
        whole = hash(data) if cut is None else hash(cut)
        digest = _DIGEST.pack(b"c" if body.compressed else b"p", len(data), crc, whole)
        if body.large:
            yield "read"  # and the tail's hash, a few more
        registry = self.s.registry
        if registry.body_unchanged(request, digest):
            return Classified(Kind.HEARTBEAT, digest, cut)
        if cut is not None and registry.table_unchanged(request, cut.key):
            return Classified(Kind.VERSION_ONLY, digest, cut)
        return Classified(Kind.READ, digest, cut)

    def read(self, body: RegisterBody) -> Generator[str, None, RegisterTable]:
        """The lean read, a slice of content per step whatever the body's size: a small
        compressed body may inflate large, and then its reading yields like a large one's."""
        reading = lean_read.register_body_steps(
            body.data,
            body.compressed,
            body.broker_version,
            topics_per_step=self.s.registry.slice_topics,
            bytes_per_step=self.s.config.registry.register_read_slice_bytes,
            chunk_cache=self.chunk_cache,
            limits=self.limits,
        )
        while True:
            try:
                next(reading)
            except StopIteration as done:
                table: RegisterTable = done.value
                return table
            yield "read"

    def validate(
        self, table: RegisterTable, broker_addr: str = "?"
    ) -> Generator[str, None, RegisterTable]:
        """The table checked whole before anything is applied: names a slice at a time (in
        C; the names of cached chunks that passed before are not checked again), the
        registry's total, keys against names, and queue counts and perms once per spec. The
        table returned lacks the topics whose names are no topic names."""
        config = self.s.config.registry
        per_step = self.s.registry.slice_topics
        cache = self.chunk_cache
        if table.parts is not None and cache is not None:
            names = cache.unchecked_names(table.parts)
        else:
            names = list(table.topic_queues)
        bad: dict[str, str] = {}
        for start in range(0, len(names), per_step):
            if start:
                yield "read"
            piece = names[start : start + per_step]
            bad.update(validation.bad_topic_names(piece, config.max_topic_name_bytes))
        if bad:
            table = self._without(table, bad, broker_addr)
        yield from self._check_total(table)
        for name, other in table.renamed.items():
            field = f"topicConfigTable[{name[:130]!r}]"
            raise validation.RegisterError(
                f"{field}.topicName {other[:130]!r} differs from its key"
            )
        validation.check_topic_specs(table.topic_queues, table.specs, config.max_queue_nums)
        if table.parts is not None and cache is not None:
            cache.checked(table.parts)
        return table

    def _without(
        self, table: RegisterTable, bad: dict[str, str], broker_addr: str
    ) -> RegisterTable:
        """``table`` less the topics named in ``bad``, logged (paced) and counted. The chunks
        it was read from are not marked checked, so the next register checks them again."""
        self.topics_dropped += len(bad)
        shown = "; ".join(list(bad.values())[:DROPPED_NAMES_SHOWN])
        more = len(bad) - DROPPED_NAMES_SHOWN
        self._log.warning(
            "register_topic_dropped",
            "REGISTER_BROKER from %s: %d topic(s) dropped, their names are no topic names "
            "(1-%d characters of A-Z a-z 0-9 _ - %% |): %s%s",
            broker_addr,
            len(bad),
            self.s.config.registry.max_topic_name_bytes,
            shown,
            f" (and {more} more)" if more > 0 else "",
        )
        queues = {n: spec for n, spec in table.topic_queues.items() if n not in bad}
        return dataclasses.replace(
            table,
            topic_queues=queues,
            specs=tuple(set(queues.values())),
            renamed={n: o for n, o in table.renamed.items() if n not in bad},
            parts=None,
        )

    def _check_total(self, table: RegisterTable) -> Generator[str, None, None]:
        """``registry.max_total_topics``: near the bound, the topics new to the registry are
        counted, a slice per step."""
        registry = self.s.registry
        limit = self.s.config.registry.max_total_topics
        topic_count = registry.topic_count
        unknown = 0
        if topic_count + len(table.topic_queues) > limit:
            everything = list(table.topic_queues)
            per_step = registry.slice_topics
            for start in range(0, len(everything), per_step):
                yield "read"
                unknown += registry.unknown_topics(everything[start : start + per_step])
        validation.check_total_topics(topic_count, unknown, limit)

    def apply(self, req: RemotingCommand, request: RegisterRequest, who: Who) -> Steps:
        """Filter-server addresses and the ACL's claim on the address, then the registry; the
        answer once the registry has applied the table (``"wait"`` until then). A new address
        of a broker id, and topics its table no longer lists, go to the audit trail as
        ``who``'s doing."""
        for i, addr in enumerate(request.filter_server_list):
            validation.check_address(f"filterServerList[{i}]", addr)
        acl = self.s.acl
        if acl is not None and acl.enabled:
            # Checked again where it is applied: a register checked before another one took
            # the address (both pending) must not move it.
            acl.check_address(
                req.code,
                "REGISTER_BROKER",
                request.cluster_name,
                request.broker_name,
                request.broker_addr,
            )
        result = self.s.registry.register_broker(request)
        trail = self.s.audit
        if trail is not None:
            if result.arrived is not None:
                trail.record(BrokerRegistered.of(result.arrived), who)
            if result.unlisted:
                addr = request.broker_addr
                trail.record(TopicsUnlisted(request.broker_name, addr, result.unlisted), who)
        ext = headers.RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        ).to_wire()
        order_conf = self.s.kv.listing(ORDER_TOPIC_CONFIG_NAMESPACE)
        response = ok(req, ext, order_conf or b"")
        while result.job is not None and not result.job.done:
            yield "wait"
        return response
