"""Name-server configuration: embedded defaults, overridden by an optional file (``config_file``).

Every value here is documented in ``docs/config.md``; a file may set any subset. Unknown keys
and values of the wrong type are refused at start-up with a message naming the key, so a typo
never silently leaves a default in force.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, TypeVar

from protocol.address import AddressError, split_host_port
from protocol.signing import SERVER_IDENTITY, SERVER_IDENTITY_MAX_CHARS
from protocol.topic_name import topic_name_problem

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


DEFAULT_KV_CONFIG_PATH = "~/namesrv/kvConfig.json"
"""Upstream's ``kvConfigPath`` default: ``${user.home}/namesrv/kvConfig.json``."""
IN_MEMORY = ":memory:"
"""A state-file path that keeps the state in memory only (as does an empty one)."""
DEFAULT_REPLAY_RECORD_PATH = "aclReplayRecord.json"
"""Relative, so beside the KV config file (see :func:`replay_record_file`)."""


def state_file_path(value: str) -> str | None:
    """The file a state-file setting names, ``~`` expanded; None for ``:memory:`` or empty."""
    if not value or value == IN_MEMORY:
        return None
    return os.path.expanduser(value)


class ConfigError(ValueError):
    """The configuration file or a value in it is not acceptable."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    listen: str = "0.0.0.0:9876"
    max_frame_size: int = 16 * MIB
    """Frames announcing more than this are refused and their connection closed."""
    max_header_size: int = 64 * KIB
    """A frame whose header is longer is refused before the header is parsed."""
    frame_timeout_ms: int = 30_000
    """A frame begun must be complete within this long, or its connection is closed."""
    max_buffered_input_bytes: int = 128 * MIB
    """Bytes of partly received frames, of whole requests waiting for their connection's
    output to drain and of requests served over several reactor turns (large registers), held
    over all connections; past it the connection holding the most is closed."""
    max_input_bytes_per_connection: int = 32 * MIB
    """Bytes of requests one connection has in service over several reactor turns (large
    registers being read or applied, and those queued behind them): past it nothing more is
    read from the connection until they are answered. Above ``max_buffered_input_bytes``
    that bound is the share."""
    idle_timeout_ms: int = 120_000
    """A connection with no request for this long is closed, as upstream's
    ``serverChannelMaxIdleTimeSeconds``; subscribed connections are exempt. 0 turns it off."""
    max_connections: int = 10_000
    max_connections_per_host: int = 1_000
    """Connections from one remote address; a bound well below ``max_connections`` keeps one
    host from taking every slot."""
    route_cache_bytes: int = 64 * MIB
    """Bytes of whole route responses kept to answer repeated lookups without decoding."""
    output_buffer_bytes: int = 4 * MIB
    """Unsent bytes on one connection past which the server stops reading its requests and
    skips its notifications until it drains: what bounds memory against a client that never
    reads."""
    max_shared_output_bytes: int = 256 * MIB
    """Bytes that answers with a large body (listings of the whole registry) may hold until
    their clients read them: each distinct body once, and ``output_buffer_bytes`` per
    connection being sent one. A large answer that would pass it is answered SYSTEM_BUSY."""
    shutdown_grace_ms: int = 5_000
    """After GoAway, how long existing connections are still served before the server closes."""
    go_away_alternatives: list[str] = field(default_factory=list)
    """Other name servers named in GoAway, so clients know where to move."""
    tls: str = "disabled"
    """``disabled``, ``permissive`` (TLS and plaintext on one port) or ``enforcing``."""
    tls_cert_file: str = ""
    """PEM certificate (chain) the server presents; required unless TLS is disabled."""
    tls_key_file: str = ""
    """PEM private key of that certificate (may be the same file)."""
    tls_handshake_timeout_ms: int = 10_000
    """A TLS connection whose handshake has not finished within this long is closed, as
    upstream's name server does after 10 s (from accept when ``tls`` is enforcing, from the
    first handshake byte when permissive)."""
    wait_for_service_ms: int = 45_000
    """The start-up window: for this long after it starts the server has not heard every
    broker (they register every 30 s), so a lookup of a topic it has not heard of is answered
    SYSTEM_ERROR ("not ready"), not TOPIC_NOT_EXIST, as upstream's ``waitSecondsForService``.
    0 turns the window off."""
    wait_for_service_exempt_topics: list[str] = field(
        default_factory=lambda: ["DefaultHeartBeatSyncerTopic"]
    )
    """Topics answered TOPIC_NOT_EXIST inside the start-up window all the same: system topics
    a client creates when told they are absent and cannot start without. The 5.x proxy asks
    for its heartbeat-sync topic (``heartbeatSyncerTopicName``) at start and exits on any
    other answer."""


@dataclass(frozen=True, slots=True)
class RegistryConfig:
    broker_expiry_ms: int = 120_000
    min_heartbeat_timeout_ms: int = 1_000
    """A broker's own ``heartbeatTimeoutMillis`` below this is raised to it: a broker that
    expires between its heartbeats churns routes, events and log lines."""
    scan_interval_ms: int = 5_000
    order_message_enable: bool = False
    enable_all_topic_list: bool = True
    kv_config_path: str = DEFAULT_KV_CONFIG_PATH
    """Where KV config is persisted (``~`` is the home directory of the server's user), as
    upstream's ``kvConfigPath``: by default where upstream keeps it. ``:memory:`` or empty
    keeps it in memory only (lost when the server stops)."""
    max_kv_config_bytes: int = 16 * MIB
    """Namespaces, keys and values of the KV config together; a PUT_KV_CONFIG past it is
    refused (INVALID_PARAMETER). A file loaded at start-up may hold more."""
    max_queue_nums: int = 1_024
    """Read or write queue counts above this in a register are refused (INVALID_PARAMETER)."""
    delete_topic_with_broker_registration: bool = False
    """Upstream's ``deleteTopicWithBrokerRegistration``: a master's full register drops topics
    it no longer reports. Off as upstream: 5.x brokers also register single new topics."""
    register_slice_topics: int = 5_000
    """A register table larger than this is applied this many topics per reactor turn, so a
    broker with 100,000 topics never stalls lookups (each topic's route moves in one step)."""
    register_read_slice_bytes: int = 1 << 19
    """A register body larger than this is checked and parsed in slices of this many bytes
    (and ``register_slice_topics`` topic configs) per reactor turn."""
    max_listing_bytes: int = 15 * MIB
    """Body bytes of an answer listing the whole registry (topic lists, cluster info): past
    it the list is cut to its first entries in sorted order, and the answer says so. Below
    upstream clients' 16 MiB frame limit, so they can always read the answer."""
    register_chunk_cache_bytes: int = 64 * MIB
    """Topic-table chunks read lately, charged at their JSON size: a chunk seen again (the
    next register of the same broker, or a broker with the same topics) is not decoded again,
    and one the broker's table already holds is not applied again. 0 turns it off."""
    max_topics_per_broker: int = 1_000_000
    """A REGISTER_BROKER whose table holds more topics is refused whole. Upstream's largest
    reported broker holds about 60,000; a million still registers (and costs about 200 MiB)."""
    max_total_topics: int = 2_000_000
    """A REGISTER_BROKER or REGISTER_TOPIC_IN_NAMESRV that would take the distinct topics of
    the registry past this is refused whole (about 400 MiB of route tables at the bound)."""
    max_topic_name_bytes: int = 127
    """A topic name longer than this is dropped from its register (counted, logged);
    upstream's ``TopicValidator`` allows 127 (ASCII) characters, so the bound can only be
    lowered."""
    max_topic_attributes_bytes: int = 16 * KIB
    """A topic config whose attributes (their JSON text as sent) are longer is refused with its
    register. Upstream's attributes are a few short pairs (message type, queue type, cleanup
    policy): well under 1 KiB."""
    register_max_inflate_ratio: int = 128
    """A compressed register body may inflate to this many times its size (from 1 MiB on; at
    most 64 MiB): real topic tables inflate 15 to 60 times, a compression bomb about 1,000, so
    a bomb is refused after inflating this much of it, at a cost in proportion to its size."""
    heap_trim_after_ms: int = 1_000
    """Once register tables applied in slices have been done this long, the C heap's free
    pages go back to the system (glibc's ``malloc_trim``): what reading and applying them
    allocated and freed. 0 keeps them with the allocator."""


@dataclass(frozen=True, slots=True)
class SuppressionConfig:
    """Which causes of a route change stay silent (upstream issue #3870, table in 3.1.1.2)."""

    broker_startup: bool = True
    unregister: bool = True
    channel_close: bool = True
    expiry: bool = True
    delete_topic: bool = False
    register: bool = False
    write_perm: bool = False


@dataclass(frozen=True, slots=True)
class BrokerEventConfig:
    """Which broker arrivals and departures are announced, one entry per broker per subscriber.

    False keeps the seed's behaviour for that cause: silent (as ``[push.suppress]`` decides),
    learned by poll. Per-topic entries stay governed by ``[push.suppress]`` either way.
    """

    unregister: bool = True
    channel_close: bool = True
    expiry: bool = True
    arrival: bool = True
    """A broker address's first registration (start-up, or a slave joining its master)."""
    refetch_rate_per_second: int = 2_000
    """Route requests per second the fleet's refetches after broker events may cost: each entry
    carries ``refetch_window_ms`` = subscriptions owed broker entries / this rate."""
    max_refetch_window_ms: int = 60_000
    """... but never longer than this (clients then learn arrivals within it)."""


@dataclass(frozen=True, slots=True)
class PushConfig:
    enabled: bool = True
    tick_interval_ms: int = 1_000
    master_arrival_tick_ms: int = 50
    """A master arriving in a broker name (a slave promoted, a master started or replaced)
    brings the next tick forward to this many ms after it, once between two regular ticks:
    until they learn the new master, producers fail their sends. 0: wait for the regular tick."""
    max_topics_per_connection: int = 10_000
    max_total_subscriptions: int = 1_000_000
    max_subscriptions_per_host: int = 100_000
    """Subscriptions held by the connections of one remote address; so no single client host
    can spend the total budget for everyone."""
    max_topics_per_request: int = 10_000
    recovery_notifications_per_second: int = 2_000
    """After degradation ends, at most this many connection notifications go out per second."""
    settle_slice_topics: int = 5_000
    """Changed topics a tick settles per reactor turn; more continue in the next turn."""
    settle_slice_ms: int = 5
    """Time a tick may spend settling in one reactor turn (checked every 256 topics); the
    rest continue in the next turn, so a slow machine does not stretch a turn."""
    notify_slice_connections: int = 2_000
    """Notification frames a tick builds and writes per reactor turn; more continue next turn."""
    inline_route_max_bytes: int = 4 * KIB
    """A changed topic's route goes inside the notification (to connections that asked for
    inline routes) only when its GET_ROUTEINFO body is at most this long; 0 inlines none."""
    inline_budget_bytes_per_tick: int = 64 * KIB
    """Inline route bytes one connection's frame may carry per tick; the changes past it go as
    plain entries (the client fetches them)."""
    deleted_topics_remembered: int = 100_000
    """Topics deleted in this epoch that the server remembers (the newest), so a lookup or a
    SUBSCRIBE can say a topic was deleted rather than merely unrouted. 0 remembers none."""
    suppress: SuppressionConfig = field(default_factory=SuppressionConfig)
    broker_events: BrokerEventConfig = field(default_factory=BrokerEventConfig)


@dataclass(frozen=True, slots=True)
class PressureConfig:
    enabled: bool = True
    sample_interval_ms: int = 1_000
    cpu_high_percent: float = 90.0
    cpu_low_percent: float = 75.0
    memory_high_percent: float = 90.0
    memory_low_percent: float = 85.0


@dataclass(frozen=True, slots=True)
class JournalConfig:
    directory: str = ""
    """Empty turns the journal off."""
    max_file_bytes: int = 64 * MIB
    max_files: int = 0
    """Rotated files kept; 0 leaves the count unbounded (``max_total_bytes`` still applies)."""
    max_total_bytes: int = 1 * GIB
    """The journal's files together; the oldest are deleted past it. 0 keeps every file."""
    max_records_per_second: int = 1_000
    """Records beyond this in one second are dropped and summarized in one
    ``journal_suppressed`` record; 0 turns the limit off. Route changes and the tick's own
    records are never dropped."""
    max_topics_per_record: int = 1_000
    """Topics one ``route_changes`` record lists at most; a larger tick writes several."""
    max_bytes_per_second: int = 256 * KIB
    """Bytes of the records clients and brokers cause (all but route changes and the tick's
    own) in one second; past it they are dropped and summarized. 0 turns the bound off."""
    max_bytes_per_connection_per_second: int = 32 * KIB
    """The same, for the records that name one connection (``conn``): no connection takes
    more than this share. 0 turns the bound off."""


SIGNATURE_FORMS = ("upstream", "strong", "either")


@dataclass(frozen=True, slots=True)
class AclAccount:
    """One access key and what it may do."""

    access_key: str = ""
    secret_key: str = ""
    brokers: list[str] = field(default_factory=list)
    """Broker names this key may register, unregister and heartbeat; ``"*"`` allows any."""
    admin: bool = False
    """Admin writes: wipe/add write perm, delete/register topic, KV put/delete, push status."""
    read: bool = True
    """Lookups and subscriptions, when ``acl.authenticate_reads`` makes them need a signature."""
    signature: str = "either"
    """Signed forms accepted: ``"upstream"`` (``AclClientRPCHook``), ``"strong"`` (bound to the
    request code, timestamp and nonce) or ``"either"``."""


@dataclass(frozen=True, slots=True)
class AclConfig:
    enabled: bool = False
    authenticate_reads: bool = False
    """Off: lookups, lists and subscriptions need no signature (a bad one is still refused)."""
    max_bound_brokers: int = 100_000
    """Broker names (and their addresses) remembered with the key that registered them."""
    server_identity: str = ""
    """The name this server answers to in the strong form's ``SignServer``: a strong-signed
    request names the server it is for and is refused by every server of another identity.
    One per server binds a request to that server; one per cluster lets every member take it
    (once each). Empty: the strong form is refused (accounts must then take the upstream one)."""
    signature_skew_ms: int = 120_000
    """A strong-form request stamped further than this from the server's clock is refused;
    its nonce is remembered this long past its stamp."""
    replay_cache_max_entries: int = 200_000
    """Strong-form nonces remembered at once over all keys (each at most 64 characters)."""
    replay_cache_max_entries_per_key: int = 50_000
    """Strong-form nonces one access key holds at once; the share a key gets is this or the
    total divided among the accounts that take the strong form, whichever is less."""
    replay_record_path: str = DEFAULT_REPLAY_RECORD_PATH
    """Where the highest strong-form stamp accepted per access key is kept across restarts: a
    restarted server refuses every request stamped at or before it. A relative path is taken in
    the KV config file's directory (``~/namesrv`` when the KV config is in memory), so by
    default the record sits beside ``kvConfig.json``. ``:memory:`` or empty: only the server's
    start time bounds replays after a restart (a request stamped ahead of that, by a client
    clock running ahead or a server clock stepped back, could be sent again)."""
    accounts: list[AclAccount] = field(default_factory=list, metadata={"item": AclAccount})


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    listen: str = ""
    """HOST:PORT of the Prometheus endpoint (``/metrics``); empty turns it off."""
    max_connections: int = 64
    """Connections open to the endpoint at once; a new one past it closes the connection
    served longest ago, so held-open connections cannot lock the scraper out."""
    idle_timeout_ms: int = 30_000
    """A connection that completes no request for this long is closed."""
    bearer_token: str = field(default="", metadata={"secret": True})
    """Non-empty: ``/metrics`` needs ``Authorization: Bearer <token>`` (or the basic
    credentials below, when set)."""
    basic_auth_user: str = ""
    basic_auth_password: str = field(default="", metadata={"secret": True})
    """Both set: ``/metrics`` needs HTTP basic auth with them (or the bearer token, when set)."""


TLS_MODES = ("disabled", "permissive", "enforcing")


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    server: ServerConfig = field(default_factory=ServerConfig)
    registry: RegistryConfig = field(default_factory=RegistryConfig)
    push: PushConfig = field(default_factory=PushConfig)
    pressure: PressureConfig = field(default_factory=PressureConfig)
    journal: JournalConfig = field(default_factory=JournalConfig)
    acl: AclConfig = field(default_factory=AclConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    def __post_init__(self) -> None:
        _validate(self)


T = TypeVar("T")


def _build(cls: type[T], raw: dict[str, Any], where: str) -> T:
    """Overlay a TOML table on a dataclass's defaults, refusing unknown keys and wrong types."""
    known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1)
            hint = f" (did you mean {where}{close[0]}?)" if close else ""
            raise ConfigError(f"unknown config key {where}{key}{hint}")
        default = getattr(cls(), key)
        item = known[key].metadata.get("item")
        if item is not None:
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise ConfigError(f"config key {where}{key} must be an array of tables")
            values[key] = [_build(item, v, f"{where}{key}[{i}].") for i, v in enumerate(value)]
            continue
        if is_dataclass(default):
            if not isinstance(value, dict):
                raise ConfigError(f"config key {where}{key} must be a table")
            values[key] = _build(type(default), value, f"{where}{key}.")
            continue
        expected = type(default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not expected:
            raise ConfigError(f"config key {where}{key} must be {expected.__name__}, got {value!r}")
        values[key] = value
    return replace(cls(), **values)  # type: ignore[type-var]


_Range = tuple[str, int | float, int | float, int | float]
"""A key's name, value, lowest and highest allowed value."""


def _validate(cfg: NamesrvConfig) -> None:
    s, j = cfg.server, cfg.journal
    ranges = [
        *_server_ranges(s),
        *_registry_ranges(cfg.registry),
        *_push_ranges(cfg.push),
        *_ops_ranges(cfg),
    ]
    for name, value, lowest, highest in ranges:
        if not lowest <= value <= highest:
            raise ConfigError(
                f"config key {name} must be between {lowest} and {highest}, got {value}"
            )
    if 0 < j.max_total_bytes < j.max_file_bytes:
        raise ConfigError(
            f"config key journal.max_total_bytes ({j.max_total_bytes}) must be 0 or at least "
            f"journal.max_file_bytes ({j.max_file_bytes})"
        )
    _validate_pressure(cfg.pressure)
    parse_listen(s.listen)
    for addr in s.go_away_alternatives:
        _check_addr("server.go_away_alternatives", addr)
    _check_exempt_topics(s.wait_for_service_exempt_topics)
    _validate_metrics(cfg.metrics)
    _validate_tls(s)
    _validate_acl(cfg.acl)


def _server_ranges(s: ServerConfig) -> list[_Range]:
    ranges: list[_Range] = [
        ("server.max_frame_size", s.max_frame_size, 64 * KIB, 2**31 - 1),
        ("server.max_header_size", s.max_header_size, 1 * KIB, min(s.max_frame_size, 0xFFFFFF)),
        ("server.frame_timeout_ms", s.frame_timeout_ms, 10, 3_600_000),
        ("server.max_buffered_input_bytes", s.max_buffered_input_bytes, s.max_frame_size, 2**62),
        (
            "server.max_input_bytes_per_connection",
            s.max_input_bytes_per_connection,
            64 * KIB,
            2**62,
        ),
        ("server.max_connections", s.max_connections, 1, 10_000_000),
        ("server.max_connections_per_host", s.max_connections_per_host, 1, s.max_connections),
        ("server.route_cache_bytes", s.route_cache_bytes, 0, 2**62),
        ("server.output_buffer_bytes", s.output_buffer_bytes, 64 * KIB, 2**62),
        ("server.max_shared_output_bytes", s.max_shared_output_bytes, 0, 2**62),
        ("server.shutdown_grace_ms", s.shutdown_grace_ms, 0, 3_600_000),
        ("server.tls_handshake_timeout_ms", s.tls_handshake_timeout_ms, 10, 3_600_000),
        ("server.wait_for_service_ms", s.wait_for_service_ms, 0, 86_400_000),
    ]
    if s.idle_timeout_ms != 0:
        ranges.append(("server.idle_timeout_ms", s.idle_timeout_ms, 10, 2**31 - 1))
    return ranges


def _registry_ranges(r: RegistryConfig) -> list[_Range]:
    return [
        ("registry.broker_expiry_ms", r.broker_expiry_ms, 10, 2**31 - 1),
        ("registry.min_heartbeat_timeout_ms", r.min_heartbeat_timeout_ms, 10, 2**31 - 1),
        ("registry.scan_interval_ms", r.scan_interval_ms, 10, 3_600_000),
        ("registry.max_queue_nums", r.max_queue_nums, 1, 65_535),
        ("registry.max_kv_config_bytes", r.max_kv_config_bytes, 1 * KIB, 2**40),
        ("registry.register_slice_topics", r.register_slice_topics, 1, 10_000_000),
        ("registry.register_read_slice_bytes", r.register_read_slice_bytes, 4 * KIB, 2**31 - 1),
        ("registry.register_chunk_cache_bytes", r.register_chunk_cache_bytes, 0, 2**40),
        ("registry.max_listing_bytes", r.max_listing_bytes, 1 * KIB, 2**31 - 1),
        ("registry.heap_trim_after_ms", r.heap_trim_after_ms, 0, 86_400_000),
        ("registry.max_topics_per_broker", r.max_topics_per_broker, 1, 2**31 - 1),
        ("registry.max_total_topics", r.max_total_topics, 1, 2**31 - 1),
        ("registry.max_topic_name_bytes", r.max_topic_name_bytes, 1, 127),
        ("registry.max_topic_attributes_bytes", r.max_topic_attributes_bytes, 2, 2**31 - 1),
        ("registry.register_max_inflate_ratio", r.register_max_inflate_ratio, 2, 1_032),
    ]


def _push_ranges(p: PushConfig) -> list[_Range]:
    return [
        ("push.tick_interval_ms", p.tick_interval_ms, 10, 3_600_000),
        ("push.master_arrival_tick_ms", p.master_arrival_tick_ms, 0, 3_600_000),
        ("push.max_topics_per_connection", p.max_topics_per_connection, 1, 100_000_000),
        ("push.max_total_subscriptions", p.max_total_subscriptions, 1, 1_000_000_000),
        (
            "push.max_subscriptions_per_host",
            p.max_subscriptions_per_host,
            1,
            p.max_total_subscriptions,
        ),
        ("push.max_topics_per_request", p.max_topics_per_request, 1, 100_000_000),
        (
            "push.recovery_notifications_per_second",
            p.recovery_notifications_per_second,
            1,
            100_000_000,
        ),
        ("push.settle_slice_topics", p.settle_slice_topics, 1, 100_000_000),
        ("push.settle_slice_ms", p.settle_slice_ms, 1, 60_000),
        ("push.notify_slice_connections", p.notify_slice_connections, 1, 100_000_000),
        ("push.inline_route_max_bytes", p.inline_route_max_bytes, 0, 16 * MIB),
        ("push.inline_budget_bytes_per_tick", p.inline_budget_bytes_per_tick, 0, 64 * MIB),
        ("push.deleted_topics_remembered", p.deleted_topics_remembered, 0, 10_000_000),
        (
            "push.broker_events.refetch_rate_per_second",
            p.broker_events.refetch_rate_per_second,
            1,
            100_000_000,
        ),
        (
            "push.broker_events.max_refetch_window_ms",
            p.broker_events.max_refetch_window_ms,
            1,
            3_600_000,
        ),
    ]


def _ops_ranges(cfg: NamesrvConfig) -> list[_Range]:
    """The pressure monitor's, the journal's and the metrics port's."""
    j = cfg.journal
    return [
        ("pressure.sample_interval_ms", cfg.pressure.sample_interval_ms, 10, 3_600_000),
        ("journal.max_file_bytes", j.max_file_bytes, 4 * KIB, 2**62),
        ("journal.max_files", j.max_files, 0, 1_000_000),
        ("journal.max_total_bytes", j.max_total_bytes, 0, 2**62),
        ("journal.max_records_per_second", j.max_records_per_second, 0, 100_000_000),
        ("journal.max_topics_per_record", j.max_topics_per_record, 1, 1_000_000),
        ("journal.max_bytes_per_second", j.max_bytes_per_second, 0, 2**62),
        (
            "journal.max_bytes_per_connection_per_second",
            j.max_bytes_per_connection_per_second,
            0,
            2**62,
        ),
        ("metrics.max_connections", cfg.metrics.max_connections, 1, 100_000),
        ("metrics.idle_timeout_ms", cfg.metrics.idle_timeout_ms, 10, 3_600_000),
    ]


def _validate_pressure(pr: PressureConfig) -> None:
    for kind, low, high in (
        ("cpu", pr.cpu_low_percent, pr.cpu_high_percent),
        ("memory", pr.memory_low_percent, pr.memory_high_percent),
    ):
        if not 0 < low <= high <= 100:
            raise ConfigError(
                f"pressure.{kind}_low_percent ({low}) and pressure.{kind}_high_percent ({high}) "
                "must satisfy 0 < low <= high <= 100"
            )


MAX_EXEMPT_TOPICS = 100


def _check_exempt_topics(topics: list[str]) -> None:
    name = "server.wait_for_service_exempt_topics"
    if len(topics) > MAX_EXEMPT_TOPICS:
        raise ConfigError(
            f"config key {name} names {len(topics)} topics, at most {MAX_EXEMPT_TOPICS}"
        )
    for topic in topics:
        problem = topic_name_problem(topic)
        if problem is not None:
            raise ConfigError(f"config key {name}: {problem}")


def _check_addr(name: str, addr: str) -> None:
    try:
        split_host_port(addr)
    except AddressError:
        raise ConfigError(f"config key {name} holds {addr!r}, not HOST:PORT") from None


def replay_record_file(cfg: NamesrvConfig) -> str | None:
    """The file of the strong form's replay record, ``~`` expanded; None when nothing needs one
    (ACL off, or no account takes the strong form) or ``acl.replay_record_path`` opts out."""
    acl = cfg.acl
    if not acl.enabled or all(a.signature == "upstream" for a in acl.accounts):
        return None
    path = state_file_path(acl.replay_record_path)
    if path is None or os.path.isabs(path):
        return path
    kv_file = state_file_path(cfg.registry.kv_config_path)
    beside = os.path.dirname(kv_file or os.path.expanduser(DEFAULT_KV_CONFIG_PATH))
    return os.path.join(beside, path)


def check_paths(cfg: NamesrvConfig, *, create: bool = True) -> None:
    """The files and directories the server will write are usable: checked at start-up, so a
    typo stops the server instead of dropping its journal or KV changes later. ``create``
    False (``--check-config``) creates nothing: a missing directory must be creatable, its
    nearest existing ancestor a writable directory."""
    journal = cfg.journal.directory
    if journal:
        _check_directory("journal.directory", journal, create)
    for name, state in (
        ("registry.kv_config_path", state_file_path(cfg.registry.kv_config_path)),
        ("acl.replay_record_path", replay_record_file(cfg)),
    ):
        if state:
            if os.path.isdir(state):
                raise ConfigError(f"{name} {state} is a directory")
            _check_directory(name, os.path.dirname(os.path.abspath(state)), create)
    if cfg.server.tls != "disabled":
        for name, path in (
            ("server.tls_cert_file", cfg.server.tls_cert_file),
            ("server.tls_key_file", cfg.server.tls_key_file),
        ):
            if not os.path.isfile(path) or not os.access(path, os.R_OK):
                raise ConfigError(f"{name} {path} is not a readable file")


def _check_directory(name: str, directory: str, create: bool) -> None:
    """``directory`` is (or, with ``create``, is made) a directory the server can write in."""
    if create:
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{name}: {directory} cannot be created: {exc.strerror}") from None
        existing = directory
    else:
        existing = os.path.abspath(directory)
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{name}: {existing} is not a writable directory")


def _validate_metrics(metrics: MetricsConfig) -> None:
    if metrics.listen:
        parse_listen(metrics.listen)
    if bool(metrics.basic_auth_user) != bool(metrics.basic_auth_password):
        raise ConfigError("metrics.basic_auth_user and metrics.basic_auth_password go together")
    if ":" in metrics.basic_auth_user:
        raise ConfigError("config key metrics.basic_auth_user must not contain ':'")
    token = metrics.bearer_token
    if token and (not token.isascii() or not token.isprintable() or " " in token):
        raise ConfigError("config key metrics.bearer_token must be printable ASCII without spaces")


def _validate_tls(server: ServerConfig) -> None:
    if server.tls not in TLS_MODES:
        raise ConfigError(
            f"config key server.tls must be one of {', '.join(TLS_MODES)}, got {server.tls!r}"
        )
    if server.tls != "disabled" and not (server.tls_cert_file and server.tls_key_file):
        raise ConfigError(
            f"server.tls = {server.tls!r} needs server.tls_cert_file and server.tls_key_file"
        )


def _validate_acl(acl: AclConfig) -> None:
    if acl.max_bound_brokers <= 0:
        raise ConfigError(
            f"config key acl.max_bound_brokers must be positive, got {acl.max_bound_brokers}"
        )
    seen: set[str] = set()
    for key in (
        "signature_skew_ms",
        "replay_cache_max_entries",
        "replay_cache_max_entries_per_key",
    ):
        if getattr(acl, key) <= 0:
            raise ConfigError(f"config key acl.{key} must be positive, got {getattr(acl, key)}")
    if acl.server_identity and not SERVER_IDENTITY.fullmatch(acl.server_identity):
        raise ConfigError(
            f"config key acl.server_identity must be 1 to {SERVER_IDENTITY_MAX_CHARS} characters "
            f"of A-Z a-z 0-9 . _ : @ / -, got {acl.server_identity!r}"
        )
    for i, account in enumerate(acl.accounts):
        if not account.access_key or not account.secret_key:
            raise ConfigError(f"acl.accounts[{i}] needs access_key and secret_key")
        if account.signature not in SIGNATURE_FORMS:
            raise ConfigError(
                f"acl.accounts[{i}].signature must be one of {', '.join(SIGNATURE_FORMS)}, "
                f"got {account.signature!r}"
            )
        if account.access_key in seen:
            raise ConfigError(f"acl.accounts[{i}]: access_key {account.access_key!r} appears twice")
        seen.add(account.access_key)
    if acl.enabled and not acl.accounts:
        raise ConfigError("acl.enabled = true needs at least one [[acl.accounts]] entry")
    strong = [a for a in acl.accounts if a.signature != "upstream"]
    strong_only = [a.access_key for a in acl.accounts if a.signature == "strong"]
    if acl.enabled and strong_only and not acl.server_identity:
        raise ConfigError(
            f"acl.server_identity must be set: account {strong_only[0]!r} takes only the strong "
            "signature form, whose requests name the name server they are for"
        )
    if len(strong) > acl.replay_cache_max_entries:
        raise ConfigError(
            f"config key acl.replay_cache_max_entries ({acl.replay_cache_max_entries}) must give "
            f"each of the {len(strong)} accounts taking the strong form at least one entry"
        )


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 hosts in brackets) to a (host, port) pair."""
    try:
        return split_host_port(text, listening=True)
    except AddressError as exc:
        raise ConfigError(f"listen address must be HOST:PORT: {exc}") from None


def from_mapping(raw: dict[str, Any]) -> NamesrvConfig:
    return _build(NamesrvConfig, raw, "")
