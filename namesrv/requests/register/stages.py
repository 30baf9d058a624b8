"""REGISTER_BROKER as a table of stages, declared once in order in :data:`STAGES`.

A stage is a small function, or a generator when its work may take more than a slice, over one
register's :class:`Passage`: it reads what the stages before it found there and leaves what it
finds. A generator yields None after each slice of its work (a few milliseconds: a CRC-32
slice, a hash, a slice of reading or of checking names) and :data:`WAIT` while the registry
applies the table in slices of its own; the server steps a pending register once per reactor
turn, so a large body never holds the reactor for longer than a slice.

==========  ==============================================================  ==================
stage       does                                                            runs for
==========  ==============================================================  ==================
checksum    the body's CRC-32 against the one its header declares           every register
classify    the heartbeat (the very body of the address's last register),   every register
            the version-only change (a plain body that differs from the
            last one only in its data version), a body to read, or none
read        the lean read of :mod:`protocol.register`, bounded by           a body to read
            :class:`ReadLimits`
validate    names, keys against names, queue counts and perms, the filter   a body to read
            servers' addresses, checked whole before anything is applied;
            a topic whose name upstream's broker could never have created
            is dropped (logged and counted), the rest applied
totals      ``registry.max_total_topics`` against the topics new to the     a body to read
            registry
apply       the ACL's address claim, then the registry, and the audit       every register
            trail
answer      the answer, once the registry has applied the table             every register
==========  ==============================================================  ==================

Bytes are read in :mod:`protocol.register` alone: the stages hand it the body and take what it
found.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Hashable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from namesrv.ops.audit_events import BrokerRegistered, TopicsUnlisted, Who
from namesrv.requests.context import Services
from namesrv.requests.register import validation
from namesrv.routes.register_request import RegisterRequest
from namesrv.routes.registration import RegisterResult
from namesrv.routes.route_bodies import ORDER_TOPIC_CONFIG_NAMESPACE
from namesrv.routes.tables import QueueSpec
from protocol import headers
from protocol.codes import ResponseCode
from protocol.frame import RemotingCommand
from protocol.paced_log import PacedLog
from protocol.register import identity
from protocol.register.read import ChunkCache, register_body_steps
from protocol.register.steps import apart
from protocol.register.table import ReadLimits, RegisterTable, TablePart
from protocol.route_model import DataVersion

log = logging.getLogger(__name__)

WAIT = "wait"
"""Yielded while the registry applies the table: the register's body is read whole."""
DROPPED_NAMES_SHOWN = 5
"""Dropped topic names a log line names; the rest are counted."""

Steps = Generator[str | None, None, RemotingCommand]
"""A register's steps: None after each slice of work, :data:`WAIT` while it is applied."""
Work = Generator[str | None, None, None]
"""A stage that takes more than one step."""


class Kind(Enum):
    """What the classify stage found a register's body to be."""

    EMPTY = "empty"
    """No body: a register without topics."""
    HEARTBEAT = "heartbeat"
    """The very body of the address's last register: not read again."""
    VERSION_ONLY = "version-only"
    """The last register's body with another data version: its table is whole."""
    READ = "read"
    """A body to read."""


@dataclass(slots=True)
class Passage:
    """One register on its way through the stages: the request as it came, then what each
    stage found."""

    req: RemotingCommand
    data: bytes
    compressed: bool
    broker_version: int
    declared_crc32: int
    """0: the broker declared none."""
    large: bool
    """Read in slices across reactor turns from the first one (the register is pending)."""
    header: headers.RegisterBrokerRequestHeader
    """Who registers (the registry's :class:`~namesrv.routes.register_request.Origin`)."""
    channel: object
    """The broker's connection, as the registry keeps it."""
    who: Who
    """Who sent it, for the audit trail."""
    crc: int = 0
    kind: Kind = Kind.READ
    digest: bytes | None = None
    cut: identity.VersionCut | None = None
    """A plain body cut around its data version (see :mod:`protocol.register.identity`)."""
    table: RegisterTable | None = None
    result: RegisterResult | None = None
    response: RemotingCommand | None = None


class RegisterStages:
    """What the stages of one name server's registers use, and the counters of what they
    skipped or dropped; :meth:`steps` takes a register through :data:`STAGES`."""

    def __init__(
        self,
        services: Services,
        limits: ReadLimits,
        cache: ChunkCache | None,
        peer_log: PacedLog | None = None,
    ) -> None:
        self.services = services
        self.limits = limits
        self.chunk_cache = cache
        self.log = peer_log if peer_log is not None else PacedLog(log, services.clock.seconds)
        self.topics_dropped = 0
        """Topics dropped from registers for names that are no topic names."""
        self.bodies_read = 0
        """Register bodies parsed; an identical heartbeat body is not."""
        self.versions_only = 0
        """Registers whose body differed from the broker's last one only in the data version:
        not parsed either."""

    def steps(self, p: Passage) -> Steps:
        """Check, read, apply and answer one register: each stage of :data:`STAGES` that runs
        for what its body is, in order."""
        for stage in STAGES:
            if stage.runs_for is None or p.kind in stage.runs_for:
                work = stage.run(self, p)
                if work is not None:
                    yield from work
        assert p.response is not None, "the answer stage answers every register"
        return p.response


def checksum(stages: RegisterStages, p: Passage) -> Work:
    """The body's CRC-32 against the declared one, a slice per step when large."""
    p.crc = yield from identity.crc32_steps(p.data, p.declared_crc32, p.large)


def classify(stages: RegisterStages, p: Passage) -> Work:
    """Heartbeat, version-only, a body to read, or none, told by the body's digest and cut
    (:mod:`protocol.register.identity`) against the address's last register."""
    if not p.data:
        p.kind = Kind.EMPTY
        return
    # A body hashed in slices: what its digest decides starts in the next turn.
    p.digest, p.cut = yield from apart(identity.digest_steps(p.data, p.compressed, p.crc, p.large))
    registry = stages.services.registry
    if registry.body_unchanged(p.header, p.digest):
        p.kind = Kind.HEARTBEAT
    elif p.cut is not None and registry.table_unchanged(p.header, p.cut.key):
        stages.versions_only += 1
        p.kind = Kind.VERSION_ONLY


def read(stages: RegisterStages, p: Passage) -> Work:
    """The lean read, a slice of content per step whatever the body's size: a small compressed
    body may inflate large, and then its reading yields like a large one's. A large body's
    table read before from the same bytes (any broker's) is taken as it was read."""
    stages.bodies_read += 1
    # A body read in slices: the checks of the table read start in the next turn.
    p.table = yield from apart(
        register_body_steps(
            p.data,
            p.compressed,
            p.broker_version,
            topics_per_step=stages.services.config.registry.register_read_slice_topics,
            bytes_per_step=stages.services.config.registry.register_read_slice_bytes,
            chunk_cache=stages.chunk_cache,
            limits=stages.limits,
            digest=p.digest if p.large else None,
            cut=p.cut,
        )
    )


def validate(stages: RegisterStages, p: Passage) -> Work:
    """The table checked whole before anything is applied: names a slice at a time (in C; the
    names of chunks that passed before are not checked again), keys against names, queue
    counts and perms once per spec, and the filter servers' addresses. Topics whose names are
    no topic names leave the table (logged and counted); the chunks it was read from are then
    not marked checked, so the next register checks them again."""
    table = p.table
    assert table is not None
    config = stages.services.config.registry
    names = validation.unchecked_names(table)
    per_step = stages.services.registry.slice_topics
    bad = yield from validation.bad_names_steps(names, per_step, config.max_topic_name_bytes)
    if bad:
        stages.topics_dropped += len(bad)
        more = len(bad) - DROPPED_NAMES_SHOWN
        stages.log.warning(
            "register_topic_dropped",
            "REGISTER_BROKER from %s: %d topic(s) dropped, their names are no topic names "
            "(1-%d characters of A-Z a-z 0-9 _ - %% |): %s%s",
            p.header.broker_addr,
            len(bad),
            config.max_topic_name_bytes,
            "; ".join(list(bad.values())[:DROPPED_NAMES_SHOWN]),
            f" (and {more} more)" if more > 0 else "",
        )
        table = p.table = validation.without(table, bad)
    validation.check_table(table, config.max_queue_nums)


def totals(stages: RegisterStages, p: Passage) -> Work:
    """``registry.max_total_topics``: near the bound, the topics new to the registry are
    counted, a slice per step."""
    assert p.table is not None
    topic_queues = p.table.topic_queues
    registry = stages.services.registry
    limit = stages.services.config.registry.max_total_topics
    topic_count = registry.topic_count
    unknown = 0
    if topic_count + len(topic_queues) > limit:
        everything = list(topic_queues)
        per_step = registry.slice_topics
        for start in range(0, len(everything), per_step):
            yield None
            unknown += registry.unknown_topics(everything[start : start + per_step])
    validation.check_total_topics(topic_count, unknown, limit)


def apply(stages: RegisterStages, p: Passage) -> None:
    """The ACL's claim on the address, then the registry. A new
    address of a broker id, and topics its table no longer lists, go to the audit trail as the
    sender's doing."""
    request = _request_of(p)
    acl = stages.services.acl
    if acl is not None and acl.enabled:
        # Checked again where it is applied: a register checked before another one took the
        # address (both pending) must not move it.
        acl.check_address(
            p.req.code,
            "REGISTER_BROKER",
            request.cluster_name,
            request.broker_name,
            request.broker_addr,
        )
    result = p.result = stages.services.registry.register_broker(request)
    trail = stages.services.audit
    if trail is not None:
        if result.arrived is not None:
            trail.record(BrokerRegistered.of(result.arrived), p.who)
        if result.unlisted:
            addr = request.broker_addr
            trail.record(TopicsUnlisted(request.broker_name, addr, result.unlisted), p.who)


def _request_of(p: Passage) -> RegisterRequest:
    """The register as the registry takes it: the header's, with what the body holds, or that
    it is the body of the address's last register, or that only its data version is new. Made
    once, here (a heartbeat's cost counts)."""
    h, kind, cut = p.header, p.kind, p.cut
    topic_configs: Mapping[str, QueueSpec] | None = None
    data_version = _NO_VERSION
    servers: list[str] = []
    mapping: Mapping[str, Any] = {}
    parts: Sequence[TablePart] | None = None
    table_key: Hashable | None = None
    if kind is Kind.EMPTY:
        topic_configs = {}
    elif kind is Kind.VERSION_ONLY:
        assert cut is not None
        data_version, table_key = cut.version, cut.key
    elif kind is Kind.READ:
        table = p.table
        assert table is not None
        topic_configs, data_version = table.topic_queues, table.data_version
        servers, mapping, parts = (
            table.filter_server_list,
            table.topic_queue_mapping_info_map,
            table.parts,
        )
        table_key = table.version_key
    return RegisterRequest(
        cluster_name=h.cluster_name,
        broker_addr=h.broker_addr,
        broker_name=h.broker_name,
        broker_id=h.broker_id,
        ha_server_addr=h.ha_server_addr,
        topic_configs=topic_configs,
        data_version=data_version,
        filter_server_list=servers,
        heartbeat_timeout_ms=h.heartbeat_timeout_millis,
        enable_acting_master=h.enable_acting_master,
        channel=p.channel,
        topic_queue_mapping_info=mapping,
        body_digest=p.digest,
        table_parts=parts,
        zone_name=h.zone_name,
        table_key=table_key,
        same_table=kind is Kind.VERSION_ONLY,
    )


_NO_VERSION = DataVersion()
"""The data version of a register without a body, or whose version the registry takes from
the address's last register."""


def answer(stages: RegisterStages, p: Passage) -> Work:
    """The answer (a slave's master and HA address, the order confs), given once the registry
    has applied the table: :data:`WAIT` until then."""
    result = p.result
    assert result is not None
    ext = headers.RegisterBrokerResponseHeader(
        ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
    ).to_wire()
    order_conf = stages.services.kv.listing(ORDER_TOPIC_CONFIG_NAMESPACE)
    p.response = p.req.make_response(ResponseCode.SUCCESS, None, ext, order_conf or b"")
    while result.job is not None and not result.job.done:
        yield WAIT


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    run: Callable[[RegisterStages, Passage], Work | None]
    runs_for: tuple[Kind, ...] | None
    """The kinds of body it runs for; None: every register. A tuple: ``in`` looks at
    identity in C, where a set would hash the enum member in Python."""


_READ = (Kind.READ,)

STAGES: tuple[Stage, ...] = (
    Stage("checksum", checksum, None),
    Stage("classify", classify, None),
    Stage("read", read, _READ),
    Stage("validate", validate, _READ),
    Stage("totals", totals, _READ),
    Stage("apply", apply, None),
    Stage("answer", answer, None),
)
"""The stages of a register, in order (see the table above)."""
