"""Name-server configuration: embedded defaults, overridden by an optional file (``config_file``).

Each value is declared once below (``namesrv.config_setting``): its default, doc, range,
upstream key and whether it is internal tuning. ``python -m namesrv.config_text --write``
renders ``default_config.toml`` and the settings tables of ``docs/config.md`` from these
declarations. Unknown keys, tuning keys and values of the wrong type are refused at start-up
with a message naming the key, so a typo never silently leaves a default in force.
"""

# ruff: noqa: RUF009 (setting(), section() and items() return dataclasses.field(...))

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, TypeVar

from namesrv.config_setting import (
    ConfigError,
    check_section,
    is_section,
    items,
    section,
    setting,
    tuning,
)
from protocol.address import AddressError, split_host_port
from protocol.signing import SERVER_IDENTITY, SERVER_IDENTITY_MAX_CHARS
from protocol.topic_name import topic_name_problem

__all__ = ["ConfigError"]

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


DEFAULT_KV_CONFIG_PATH = "~/namesrv/kvConfig.json"
"""Upstream's ``kvConfigPath`` default: ``${user.home}/namesrv/kvConfig.json``."""
IN_MEMORY = ":memory:"
"""A state-file path that keeps the state in memory only (as does an empty one)."""
DEFAULT_REPLAY_RECORD_PATH = "aclReplayRecord.json"
"""Relative, so beside the KV config file (see :func:`replay_record_file`)."""
TLS_MODES = ("disabled", "permissive", "enforcing")
SIGNATURE_FORMS = ("upstream", "strong", "either")
MAX_EXEMPT_TOPICS = 100
INT31 = 2**31 - 1
HOUR_MS = 3_600_000
DAY_MS = 86_400_000


def state_file_path(value: str) -> str | None:
    """The file a state-file setting names, ``~`` expanded; None for ``:memory:`` or empty."""
    if not value or value == IN_MEMORY:
        return None
    return os.path.expanduser(value)


def _check_listen(name: str, value: str) -> None:
    if value:
        parse_listen(value)


def _check_addrs(name: str, addrs: list[str]) -> None:
    for addr in addrs:
        try:
            split_host_port(addr)
        except AddressError:
            raise ConfigError(f"config key {name} holds {addr!r}, not HOST:PORT") from None


def _check_exempt_topics(name: str, topics: list[str]) -> None:
    if len(topics) > MAX_EXEMPT_TOPICS:
        raise ConfigError(
            f"config key {name} names {len(topics)} topics, at most {MAX_EXEMPT_TOPICS}"
        )
    for topic in topics:
        problem = topic_name_problem(topic)
        if problem is not None:
            raise ConfigError(f"config key {name}: {problem}")


def _check_no_colon(name: str, value: str) -> None:
    if ":" in value:
        raise ConfigError(f"config key {name} must not contain ':'")


def _check_token(name: str, token: str) -> None:
    if token and (not token.isascii() or not token.isprintable() or " " in token):
        raise ConfigError(f"config key {name} must be printable ASCII without spaces")


def _check_identity(name: str, identity: str) -> None:
    if identity and not SERVER_IDENTITY.fullmatch(identity):
        raise ConfigError(
            f"config key {name} must be 1 to {SERVER_IDENTITY_MAX_CHARS} characters "
            f"of A-Z a-z 0-9 . _ : @ / -, got {identity!r}"
        )


@dataclass(frozen=True, slots=True)
class ServerConfig:
    listen: str = setting(
        "0.0.0.0:9876",
        "HOST:PORT to listen on; port 0 picks a free port, 127.0.0.1 serves this host only "
        "(--listen overrides it; upstream's bindAddress and listenPort)",
        check=lambda name, value: parse_listen(value),
    )
    max_frame_size: int = tuning(
        16 * MIB,
        "Frames announcing more are refused and their connection closed: upstream clients' "
        "own limit, so no valid frame is larger.",
        low=64 * KIB,
        high=INT31,
    )
    max_header_size: int = tuning(
        64 * KIB,
        "A frame whose header is longer is refused before the header is parsed; upstream "
        "headers are a few hundred bytes.",
        low=1 * KIB,
        high=("max_frame_size", 0xFFFFFF),
    )
    frame_timeout_ms: int = tuning(
        30_000,
        "A frame begun must be complete within this long, or its connection is closed.",
        low=10,
        high=HOUR_MS,
    )
    max_buffered_input_bytes: int = tuning(
        128 * MIB,
        "Bytes of partly received frames, of requests waiting for their connection's output to "
        "drain and of large registers in service, over all connections; past it the connection "
        "holding the most is closed.",
        low="max_frame_size",
    )
    max_input_bytes_per_connection: int = tuning(
        32 * MIB,
        "Bytes of large registers one connection has in service (read, applied or queued): "
        "past it nothing more is read from it until they are answered.",
        low=64 * KIB,
    )
    idle_timeout_ms: int = setting(
        120_000,
        "A connection without a request this long is closed (upstream's "
        "serverChannelMaxIdleTimeSeconds); subscribed connections are exempt",
        low=10,
        high=INT31,
        zero_off=True,
    )
    max_connections: int = setting(10_000, "Connections held at once", low=1, high=10_000_000)
    max_connections_per_host: int = setting(
        1_000,
        "Connections from one remote address, so one host cannot take every slot",
        low=1,
        high="max_connections",
    )
    route_cache_bytes: int = tuning(
        64 * MIB,
        "Whole route responses kept to answer repeated lookups without encoding; dropped "
        "whole and refilled at the bound.",
        low=0,
    )
    output_buffer_bytes: int = setting(
        4 * MIB,
        "Unsent bytes on one connection past which it is not read and its notifications are "
        "skipped until it drains: the memory a client that never reads can cost",
        low=64 * KIB,
    )
    max_shared_output_bytes: int = tuning(
        256 * MIB,
        "Bytes that large answers (listings of the whole registry) hold until their clients "
        "read them; an answer past it is SYSTEM_BUSY.",
        low=0,
    )
    shutdown_grace_ms: int = setting(
        5_000,
        "After GoAway, how long existing connections are still served before the server closes",
        low=0,
        high=HOUR_MS,
    )
    go_away_alternatives: list[str] = setting(
        [],
        'Other name servers named in GoAway, so clients know where to move ("HOST:PORT")',
        check=_check_addrs,
    )
    tls: str = setting(
        "disabled",
        "TLS: off, TLS and plaintext on one port, or TLS only",
        choices=TLS_MODES,
        upstream="tls.server.mode",
    )
    tls_cert_file: str = setting(
        "",
        "PEM certificate (chain) the server presents; needed unless tls is disabled",
        upstream="tls.server.certPath",
        path=True,
    )
    tls_key_file: str = setting(
        "",
        "PEM private key of that certificate (may be the same file)",
        upstream="tls.server.keyPath",
        path=True,
    )
    tls_handshake_timeout_ms: int = tuning(
        10_000,
        "A TLS handshake not done this long after accept (enforcing) or its first byte "
        "(permissive) closes the connection, as upstream's name server after 10 s.",
        low=10,
        high=HOUR_MS,
    )
    wait_for_service_ms: int = setting(
        45_000,
        "Start-up window: a lookup of a topic not heard of yet is answered SYSTEM_ERROR "
        '"not ready", not TOPIC_NOT_EXIST, until every broker has registered (upstream\'s '
        "needWaitForService and waitSecondsForService)",
        low=0,
        high=DAY_MS,
    )
    wait_for_service_exempt_topics: list[str] = setting(
        ["DefaultHeartBeatSyncerTopic"],
        "Topics answered TOPIC_NOT_EXIST inside the start-up window all the same: system topics "
        "a client creates when told they are absent (add a 5.x proxy's own "
        "heartbeatSyncerTopicName if it sets one); at most 100",
        check=_check_exempt_topics,
    )


@dataclass(frozen=True, slots=True)
class RegistryConfig:
    broker_expiry_ms: int = setting(
        120_000,
        "A broker silent this long is removed (unless it sent its own heartbeat timeout)",
        low=10,
        high=INT31,
    )
    min_heartbeat_timeout_ms: int = tuning(
        1_000,
        "A broker's own heartbeatTimeoutMillis below this is raised to it: a broker that "
        "expires between its heartbeats churns routes, events and log lines.",
        low=10,
        high=INT31,
    )
    scan_interval_ms: int = setting(
        5_000,
        "How often broker expiry is checked",
        low=10,
        high=HOUR_MS,
        upstream="scanNotActiveBrokerInterval",
    )
    order_message_enable: bool = setting(
        False,
        "Fill orderTopicConf from the KV namespace ORDER_TOPIC_CONFIG",
        upstream="orderMessageEnable",
        runtime=True,
    )
    enable_all_topic_list: bool = setting(
        True,
        "Answer GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        upstream="enableAllTopicList",
        runtime=True,
    )
    kv_config_path: str = setting(
        DEFAULT_KV_CONFIG_PATH,
        'File the KV config persists to, in upstream\'s format; ":memory:" or "" keeps it '
        "in memory only",
        upstream="kvConfigPath",
        path=True,
    )
    max_kv_config_bytes: int = tuning(
        16 * MIB,
        "What the KV table occupies (each entry its strings and 80 bytes); a PUT_KV_CONFIG "
        "past it is refused. Upstream's KV config is a few order-topic entries.",
        low=1 * KIB,
        high=2**40,
    )
    max_queue_nums: int = tuning(
        1_024,
        "Read or write queue counts above this in a register are refused; upstream brokers "
        "create 8 or 16.",
        low=1,
        high=65_535,
    )
    delete_topic_with_broker_registration: bool = setting(
        False,
        "A master's full register drops topics it no longer lists (off as upstream: 5.x "
        "brokers also register single new topics)",
        upstream="deleteTopicWithBrokerRegistration",
    )
    register_slice_topics: int = tuning(
        2_500,
        "A larger register table is applied this many topics per reactor turn (a few "
        "milliseconds), so a broker with 100,000 topics never stalls lookups.",
        low=1,
        high=10_000_000,
    )
    register_read_slice_topics: int = tuning(
        2_500,
        "A compressed register body's topic records (and a body of either form not in the "
        "usual form) are read this many per reactor turn: reading a topic costs several times "
        "what writing it does.",
        low=1,
        high=10_000_000,
    )
    register_read_slice_bytes: int = tuning(
        1 << 19,
        "A larger register body is checked and parsed in slices of this many bytes per "
        "reactor turn.",
        low=4 * KIB,
        high=INT31,
    )
    max_listing_bytes: int = tuning(
        15 * MIB,
        "Body bytes of a listing of the whole registry; a longer one is cut to its first "
        "entries. Below upstream clients' 16 MiB frame limit, so they can read every answer.",
        low=1 * KIB,
        high=INT31,
    )
    register_chunk_cache_bytes: int = tuning(
        64 * MIB,
        "Topic-table chunks read lately (JSON size): a chunk seen again is not decoded again, "
        "nor applied again when the broker's table holds it. 0 turns the cache off.",
        low=0,
        high=2**40,
    )
    max_topics_per_broker: int = setting(
        1_000_000,
        "A register whose table holds more topics is refused whole (a million costs about 200 MiB)",
        low=1,
        high=INT31,
    )
    max_total_topics: int = setting(
        2_000_000,
        "A register that would take the registry's distinct topics past this is refused whole",
        low=1,
        high=INT31,
    )
    max_topic_name_bytes: int = tuning(
        127,
        "A longer topic name is dropped from its register; upstream's TopicValidator allows "
        "127, so the bound can only be lowered.",
        low=1,
        high=127,
    )
    max_topic_attributes_bytes: int = tuning(
        16 * KIB,
        "A topic whose attributes (JSON text as sent) are longer is refused with its register; "
        "upstream's are a few short pairs.",
        low=2,
        high=INT31,
    )
    register_max_inflate_ratio: int = tuning(
        128,
        "A compressed register may inflate this many times its size (from 1 MiB on, at most "
        "64 MiB): real tables inflate 15 to 60 times, a compression bomb about 1,000.",
        low=2,
        high=1_032,
    )
    heap_trim_after_ms: int = tuning(
        1_000,
        "Once sliced registers have been done this long, free C heap pages go back to the "
        "system (malloc_trim); 0 keeps them with the allocator.",
        low=0,
        high=DAY_MS,
    )


@dataclass(frozen=True, slots=True)
class SuppressionConfig:
    broker_startup: bool = setting(
        True, "A register carrying more than one topic from a broker not registered"
    )
    unregister: bool = setting(True, "UNREGISTER_BROKER")
    channel_close: bool = setting(True, "A broker's connection closed")
    expiry: bool = setting(True, "A broker expired (no heartbeat)")
    delete_topic: bool = setting(False, "DELETE_TOPIC_IN_NAMESRV")
    register: bool = setting(False, "A register that adds or changes topics of a live broker")
    write_perm: bool = setting(False, "WIPE_WRITE_PERM_OF_BROKER, ADD_WRITE_PERM_OF_BROKER")


@dataclass(frozen=True, slots=True)
class BrokerEventConfig:
    unregister: bool = setting(True, "A broker unregistered")
    channel_close: bool = setting(True, "A broker's connection closed")
    expiry: bool = setting(True, "A broker expired")
    arrival: bool = setting(
        True, "A broker address's first registration (start-up, or a slave joining its master)"
    )
    refetch_rate_per_second: int = tuning(
        2_000,
        "Route requests per second the fleet's refetches after broker events may cost: each "
        "entry carries refetch_window_ms = subscriptions owed broker entries / this rate.",
        low=1,
        high=100_000_000,
    )
    max_refetch_window_ms: int = tuning(
        60_000,
        "The refetch window is never longer than this (clients then learn arrivals within it).",
        low=1,
        high=HOUR_MS,
    )


@dataclass(frozen=True, slots=True)
class PushConfig:
    enabled: bool = setting(
        True,
        "Push route changes; false answers SUBSCRIBE REQUEST_CODE_NOT_SUPPORTED (clients poll)",
    )
    tick_interval_ms: int = setting(
        1_000, "Change-detection period: notifications go out once per tick", low=10, high=HOUR_MS
    )
    master_arrival_tick_ms: int = tuning(
        50,
        "A broker name's new master brings the next tick forward to this many ms after it "
        "(producers fail their sends until they learn it); 0 waits for the regular tick.",
        low=0,
        high=HOUR_MS,
    )
    max_topics_per_connection: int = setting(
        10_000, "Topics one connection may subscribe", low=1, high=100_000_000
    )
    max_total_subscriptions: int = setting(
        1_000_000,
        "Subscriptions over all connections (about 460 bytes each)",
        low=1,
        high=1_000_000_000,
    )
    max_subscriptions_per_host: int = setting(
        100_000,
        "Subscriptions of all connections of one remote address, so one host cannot spend the "
        "total",
        low=1,
        high="max_total_subscriptions",
    )
    max_topics_per_request: int = tuning(
        10_000,
        "Topics one SUBSCRIBE may name, so one request's cost stays bounded.",
        low=1,
        high=100_000_000,
    )
    recovery_notifications_per_second: int = setting(
        2_000,
        "Notification frames per second while the backlog of a degraded period drains",
        low=1,
        high=100_000_000,
    )
    settle_slice_topics: int = tuning(
        5_000,
        "Changed topics a tick settles per reactor turn; more continue in the next turn.",
        low=1,
        high=100_000_000,
    )
    settle_slice_ms: int = tuning(
        5,
        "Time a tick may spend settling in one reactor turn (checked every 256 topics), so a "
        "slow machine does not stretch a turn.",
        low=1,
        high=60_000,
    )
    notify_slice_connections: int = tuning(
        2_000,
        "Notification frames a tick builds and writes per reactor turn; more continue next turn.",
        low=1,
        high=100_000_000,
    )
    inline_route_max_bytes: int = tuning(
        4 * KIB,
        "A changed topic's route goes inside the notification only when its route body is at "
        "most this long; 0 inlines none.",
        low=0,
        high=16 * MIB,
    )
    inline_budget_bytes_per_tick: int = tuning(
        64 * KIB,
        "Inline route bytes one connection's frame may carry per tick; the rest go as plain "
        "entries the client fetches.",
        low=0,
        high=64 * MIB,
    )
    deleted_topics_remembered: int = tuning(
        100_000,
        "Topics deleted in this epoch remembered (the newest, about 100 bytes each), so a "
        "client can tell deleted from unrouted; 0 remembers none.",
        low=0,
        high=10_000_000,
    )
    suppress: SuppressionConfig = section(
        SuppressionConfig,
        "true: that cause of a route change sends no per-topic notification (as upstream's "
        "route-push proposal); clients learn it by their poll",
    )
    broker_events: BrokerEventConfig = section(
        BrokerEventConfig,
        "true: that broker arrival or departure is announced as one entry per broker per "
        "subscriber; false: silent as [push.suppress] says",
    )


@dataclass(frozen=True, slots=True)
class PressureConfig:
    enabled: bool = setting(True, "Stop notifying while the process is under pressure")
    sample_interval_ms: int = setting(
        1_000, "How often CPU and memory are sampled", low=10, high=HOUR_MS
    )
    cpu_high_percent: float = setting(90.0, "Process CPU above this: degraded", low=0.0, high=100.0)
    cpu_low_percent: float = setting(
        75.0, "Recover only when CPU is below this (at most cpu_high_percent)", low=0.0, high=100.0
    )
    memory_high_percent: float = setting(
        90.0, "System memory above this: degraded", low=0.0, high=100.0
    )
    memory_low_percent: float = setting(
        85.0,
        "... and memory below this (at most memory_high_percent)",
        low=0.0,
        high=100.0,
    )


@dataclass(frozen=True, slots=True)
class JournalConfig:
    directory: str = setting(
        "", "Directory of the JSON-lines journal (docs/journal.md); empty: off", path=True
    )
    max_file_bytes: int = setting(64 * MIB, "A journal file is rotated past this size", low=4 * KIB)
    max_files: int = tuning(
        0,
        "Rotated files kept; 0 leaves the count to max_total_bytes, the bound an operator sizes.",
        low=0,
        high=1_000_000,
    )
    max_total_bytes: int = setting(
        1 * GIB,
        "The journal's files together; the oldest are deleted past it (0: keep every file; "
        "else at least max_file_bytes)",
        low=0,
    )
    max_records_per_second: int = tuning(
        1_000,
        "Records past this in one second are dropped and summarized in one journal_suppressed "
        "record (route changes and the tick's own never); 0 turns the limit off.",
        low=0,
        high=100_000_000,
    )
    max_topics_per_record: int = tuning(
        1_000,
        "Topics one route_changes record lists at most; a larger tick writes several.",
        low=1,
        high=1_000_000,
    )
    max_bytes_per_second: int = tuning(
        256 * KIB,
        "Bytes of the records clients and brokers cause in one second; past it they are "
        "dropped and summarized. 0 turns the bound off.",
        low=0,
    )
    max_bytes_per_connection_per_second: int = tuning(
        32 * KIB,
        "The same for the records that name one connection, so none takes more than this "
        "share. 0 turns the bound off.",
        low=0,
    )


@dataclass(frozen=True, slots=True)
class AclAccount:
    """One access key and what it may do."""

    access_key: str = setting("", "The access key", example="broker-a-key")
    secret_key: str = setting("", "Its secret", secret=True, example="change-me")
    brokers: list[str] = setting(
        [],
        'Broker names this key may register, unregister and heartbeat; "*" allows any',
        example=["broker-a"],
    )
    admin: bool = setting(
        False,
        "Admin writes: wipe/add write perm, delete/register topic, KV put/delete, push status",
    )
    read: bool = setting(True, "Lookups and subscriptions, when acl.authenticate_reads is on")
    signature: str = setting(
        "either",
        'Signed forms accepted: "upstream" (AclClientRPCHook), "strong" (bound to the request '
        'code, server, time and nonce) or "either"',
        choices=SIGNATURE_FORMS,
    )


@dataclass(frozen=True, slots=True)
class AclConfig:
    enabled: bool = setting(
        False, "Broker and admin requests must be signed (upstream's AclClientRPCHook)"
    )
    authenticate_reads: bool = setting(
        False,
        "Lookups, lists and subscriptions must be signed too (off: a bad signature is still "
        "refused)",
    )
    max_bound_brokers: int = tuning(
        100_000,
        "Broker names (and addresses) remembered with the key that registered them: far above "
        "any fleet, a bound on what signed registers can make the server hold.",
        low=1,
    )
    server_identity: str = setting(
        "",
        "The name strong-form requests must name (SignServer): per server or per cluster; "
        "empty: the strong form is refused",
        check=_check_identity,
    )
    signature_skew_ms: int = tuning(
        120_000,
        "A strong-form request stamped further than this from the server's clock is refused; "
        "its nonce is remembered this long past its stamp.",
        low=1,
    )
    replay_cache_max_entries: int = setting(
        200_000,
        "Strong-form nonces remembered at once over all keys (about 250 bytes each)",
        low=1,
    )
    replay_cache_max_entries_per_key: int = setting(
        50_000,
        "Strong-form nonces one key holds at once (at most the total divided among the strong "
        "accounts): size it above the key's strong-form requests per second times twice "
        "signature_skew_ms",
        low=1,
    )
    replay_record_path: str = setting(
        DEFAULT_REPLAY_RECORD_PATH,
        "Highest strong-form stamp accepted per key, kept across restarts; relative: beside "
        'kv_config_path; ":memory:" or "": only the start time bounds replays',
        path=True,
    )
    accounts: list[AclAccount] = items(
        AclAccount, "Access keys, one [[acl.accounts]] table each (none by default)"
    )


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    listen: str = setting(
        "",
        "HOST:PORT serving Prometheus text at /metrics; empty: off; bind it privately "
        "(--metrics overrides it)",
        check=_check_listen,
    )
    max_connections: int = tuning(
        64,
        "Connections to the endpoint at once; a new one past it closes the one served longest "
        "ago, so held-open connections cannot lock the scraper out.",
        low=1,
        high=100_000,
    )
    idle_timeout_ms: int = tuning(
        30_000,
        "A metrics connection completing no request this long is closed.",
        low=10,
        high=HOUR_MS,
    )
    bearer_token: str = setting(
        "",
        'Non-empty: /metrics needs "Authorization: Bearer <token>"',
        secret=True,
        check=_check_token,
    )
    basic_auth_user: str = setting(
        "", "With basic_auth_password: /metrics takes HTTP basic auth", check=_check_no_colon
    )
    basic_auth_password: str = setting(
        "",
        "basic_auth_user's password; with bearer_token also set, either credential is accepted",
        secret=True,
    )


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    server: ServerConfig = section(ServerConfig, "The listener, connections and their bounds")
    registry: RegistryConfig = section(RegistryConfig, "Brokers, topics and the KV config")
    push: PushConfig = section(PushConfig, "Route-change notifications")
    pressure: PressureConfig = section(
        PressureConfig, "Degradation: no notifications while CPU or memory is high"
    )
    journal: JournalConfig = section(JournalConfig, "The event journal")
    acl: AclConfig = section(AclConfig, "Access control (see Access control below)")
    metrics: MetricsConfig = section(MetricsConfig, "The Prometheus endpoint")

    def __post_init__(self) -> None:
        _validate(self)


T = TypeVar("T")


def _build(cls: type[T], raw: dict[str, Any], where: str, with_tuning: bool) -> T:
    """Overlay a TOML table on a dataclass's defaults, refusing unknown keys and wrong types,
    and tuning keys unless ``with_tuning``."""
    every = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
    known = {n: f for n, f in every.items() if with_tuning or not f.metadata.get("tuning")}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            if key in every:
                raise ConfigError(
                    f"config key {where}{key} is internal tuning, not a setting of the "
                    'config file (docs/config.md, "Built-in limits")'
                )
            close = difflib.get_close_matches(key, list(known), n=1)
            hint = f" (did you mean {where}{close[0]}?)" if close else ""
            raise ConfigError(f"unknown config key {where}{key}{hint}")
        default = getattr(cls(), key)
        item = known[key].metadata.get("item")
        if item is not None:
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise ConfigError(f"config key {where}{key} must be an array of tables")
            values[key] = [
                _build(item, v, f"{where}{key}[{i}].", with_tuning) for i, v in enumerate(value)
            ]
            continue
        if is_dataclass(default):
            if not isinstance(value, dict):
                raise ConfigError(f"config key {where}{key} must be a table")
            values[key] = _build(type(default), value, f"{where}{key}.", with_tuning)
            continue
        expected = type(default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not expected:
            raise ConfigError(f"config key {where}{key} must be {expected.__name__}, got {value!r}")
        values[key] = value
    return replace(cls(), **values)  # type: ignore[type-var]


def _validate(cfg: NamesrvConfig) -> None:
    """Each value against its declaration, then the rules between values."""
    _check_sections(cfg, "")
    j = cfg.journal
    if 0 < j.max_total_bytes < j.max_file_bytes:
        raise ConfigError(
            f"config key journal.max_total_bytes ({j.max_total_bytes}) must be 0 or at least "
            f"journal.max_file_bytes ({j.max_file_bytes})"
        )
    _validate_pressure(cfg.pressure)
    _validate_metrics(cfg.metrics)
    _validate_tls(cfg.server)
    _validate_acl(cfg.acl)


def _check_sections(obj: Any, prefix: str) -> None:
    for f in fields(obj):
        if is_section(f):
            value = getattr(obj, f.name)
            check_section(value, f"{prefix}{f.name}.")
            _check_sections(value, f"{prefix}{f.name}.")


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
    if bool(metrics.basic_auth_user) != bool(metrics.basic_auth_password):
        raise ConfigError("metrics.basic_auth_user and metrics.basic_auth_password go together")


def _validate_tls(server: ServerConfig) -> None:
    if server.tls != "disabled" and not (server.tls_cert_file and server.tls_key_file):
        raise ConfigError(
            f"server.tls = {server.tls!r} needs server.tls_cert_file and server.tls_key_file"
        )


def _validate_acl(acl: AclConfig) -> None:
    seen: set[str] = set()
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


def from_mapping(raw: dict[str, Any], *, with_tuning: bool = True) -> NamesrvConfig:
    """The defaults overlaid with ``raw`` (TOML-shaped). A config file is read with
    ``with_tuning`` False, refusing tuning keys; tests, benchmarks and embedding programs
    may override tuning values."""
    return _build(NamesrvConfig, raw, "", with_tuning)
