"""Name-server configuration: embedded defaults, overridden by an optional TOML file.

Every value here is documented in ``docs/config.md``; a file may set any subset. Unknown keys
and values of the wrong type are refused at start-up with a message naming the key, so a typo
never silently leaves a default in force.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from namesrv.acl import AclConfig

MIB = 1024 * 1024


class ConfigError(ValueError):
    """The configuration file or a value in it is not acceptable."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    listen: str = "0.0.0.0:9876"
    max_frame_size: int = 16 * MIB
    """Frames announcing more than this are refused and their connection closed."""
    output_buffer_bytes: int = 4 * MIB
    """Unsent bytes on one connection past which the server stops reading its requests and
    skips its notifications until it drains: what bounds memory against a client that never
    reads."""
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


@dataclass(frozen=True, slots=True)
class RegistryConfig:
    broker_expiry_ms: int = 120_000
    scan_interval_ms: int = 5_000
    order_message_enable: bool = False
    enable_all_topic_list: bool = True
    kv_config_path: str = ""
    """Where KV config is persisted; empty keeps it in memory only."""
    delete_topic_with_broker_registration: bool = False
    """Upstream's ``deleteTopicWithBrokerRegistration``: a master's full register drops topics
    it no longer reports. Off as upstream: 5.x brokers also register single new topics."""


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
class PushConfig:
    enabled: bool = True
    tick_interval_ms: int = 1_000
    max_topics_per_connection: int = 10_000
    max_total_subscriptions: int = 1_000_000
    max_topics_per_request: int = 10_000
    recovery_notifications_per_second: int = 2_000
    """After degradation ends, at most this many connection notifications go out per second."""
    suppress: SuppressionConfig = field(default_factory=SuppressionConfig)


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
    """Rotated files kept; 0 keeps every file (the pipeline reads them; prune them yourself)."""


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    listen: str = ""
    """HOST:PORT of the Prometheus endpoint (``/metrics``); empty turns it off."""


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
            raise ConfigError(f"unknown config key {where}{key}")
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


def _validate(cfg: NamesrvConfig) -> None:
    positive = {
        "server.max_frame_size": cfg.server.max_frame_size,
        "server.output_buffer_bytes": cfg.server.output_buffer_bytes,
        "registry.broker_expiry_ms": cfg.registry.broker_expiry_ms,
        "registry.scan_interval_ms": cfg.registry.scan_interval_ms,
        "push.max_topics_per_connection": cfg.push.max_topics_per_connection,
        "push.max_total_subscriptions": cfg.push.max_total_subscriptions,
        "push.max_topics_per_request": cfg.push.max_topics_per_request,
        "push.recovery_notifications_per_second": cfg.push.recovery_notifications_per_second,
        "pressure.sample_interval_ms": cfg.pressure.sample_interval_ms,
        "journal.max_file_bytes": cfg.journal.max_file_bytes,
    }
    for name, value in positive.items():
        if value <= 0:
            raise ConfigError(f"config key {name} must be positive, got {value}")
    if cfg.journal.max_files < 0:
        raise ConfigError("config key journal.max_files must not be negative")
    if cfg.server.shutdown_grace_ms < 0:
        raise ConfigError("config key server.shutdown_grace_ms must not be negative")
    if cfg.push.tick_interval_ms < 10:
        raise ConfigError(
            f"config key push.tick_interval_ms must be at least 10, got {cfg.push.tick_interval_ms}"
        )
    p = cfg.pressure
    for kind, low, high in (
        ("cpu", p.cpu_low_percent, p.cpu_high_percent),
        ("memory", p.memory_low_percent, p.memory_high_percent),
    ):
        if not 0 < low <= high:
            raise ConfigError(
                f"pressure.{kind}_low_percent ({low}) must be > 0 and <= "
                f"pressure.{kind}_high_percent ({high})"
            )
    parse_listen(cfg.server.listen)
    if cfg.metrics.listen:
        parse_listen(cfg.metrics.listen)
    _validate_tls(cfg.server)
    _validate_acl(cfg.acl)


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
    for i, account in enumerate(acl.accounts):
        if not account.access_key or not account.secret_key:
            raise ConfigError(f"acl.accounts[{i}] needs access_key and secret_key")
        if account.access_key in seen:
            raise ConfigError(f"acl.accounts[{i}]: access_key {account.access_key!r} appears twice")
        seen.add(account.access_key)
    if acl.enabled and not acl.accounts:
        raise ConfigError("acl.enabled = true needs at least one [[acl.accounts]] entry")


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 hosts in brackets) to a (host, port) pair."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ConfigError(f"listen address must be HOST:PORT, got {text!r}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ConfigError(f"listen port out of range: {port}")
    host = host.strip("[]") or "0.0.0.0"
    return host, port


def from_mapping(raw: dict[str, Any]) -> NamesrvConfig:
    return _build(NamesrvConfig, raw, "")


def load(path: str | Path | None) -> NamesrvConfig:
    """The embedded defaults, overlaid with the file at ``path`` when one is given: our TOML,
    or an upstream ``namesrv.properties`` (by its extension, or by having no TOML table)."""
    if path is None:
        return NamesrvConfig()
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    from namesrv import properties

    text = data.decode("utf-8", errors="replace")
    if properties.looks_like_properties(str(path), text):
        # Properties files are ISO-8859-1 by upstream's loader; \uXXXX escapes cover the rest.
        props = properties.parse_properties(data.decode("latin-1"))
        return from_mapping(properties.to_mapping(props))
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    return from_mapping(raw)
