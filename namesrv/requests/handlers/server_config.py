"""The name server's own config as upstream's properties text: read under both key forms,
changed at run time for the keys declared run-time (``namesrv.properties.UpstreamKey``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from namesrv.config import ConfigError, NamesrvConfig
from namesrv.ops.audit_events import ConfigChanged
from namesrv.properties import parse_properties, resolve_key, show_value, upstream_properties
from namesrv.requests.context import Connection, Services, audit, ok
from protocol.codes import ResponseCode
from protocol.frame import RemotingCommand

MAX_UPDATE_BODY_BYTES = 64 * 1024
"""An UPDATE_NAMESRV_CONFIG body longer than this is refused unread: every key the server
declares, with its value, fits in a few KiB."""
MAX_UPDATE_KEYS = 256
"""Keys one UPDATE_NAMESRV_CONFIG may name: above every key the server declares, so a body
naming more is refused before any key is looked up."""
MAX_KEYS_NAMED = 8
"""Refused keys a remark (or log line) names; the rest are counted."""
MAX_NAME_CHARS = 64
"""A peer's key is shown cut to this many characters."""
MAX_REASON_CHARS = 256
"""A refused value's reason (which quotes the value) is shown cut to this many characters."""


class ServerConfigHandlers:
    def __init__(self, services: Services) -> None:
        self.s = services

    def get_namesrv_config(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        control = self.s.config_control
        bound = control.listening() if control is not None else None
        return ok(req, body=config_properties(self.s.config, bound).encode())

    def update_namesrv_config(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        control = self.s.config_control
        if control is None:
            return req.make_response(
                ResponseCode.NO_PERMISSION,
                "this name server takes config from its file at start-up; "
                "edit the file and restart instead of UPDATE_NAMESRV_CONFIG",
            )
        try:
            props = bounded_properties(req.body or b"")
            config = updated_config(self.s.config, props)
        except ConfigRefused as refused:
            return req.make_response(refused.code, str(refused))
        changed = config != self.s.config
        if changed:
            control.apply(config)
        settings = named(f"{k}={v}" for k, v in props.items())
        audit(self.s, ConfigChanged(settings, changed), conn, req)
        return ok(req)


class ConfigRefused(Exception):
    """An UPDATE_NAMESRV_CONFIG body that changes nothing: ``code`` and a remark naming keys."""

    def __init__(self, code: ResponseCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def bounded_properties(body: bytes) -> dict[str, str]:
    """The body's ``key=value`` pairs, refused (:class:`ConfigRefused`) by its size before it
    is decoded and by its key count before any key is looked up."""
    if len(body) > MAX_UPDATE_BODY_BYTES:
        raise ConfigRefused(
            ResponseCode.INVALID_PARAMETER,
            f"config body of {len(body)} bytes, over {MAX_UPDATE_BODY_BYTES}; nothing was changed",
        )
    props = parse_properties(body.decode("utf-8", errors="replace"))
    if len(props) > MAX_UPDATE_KEYS:
        raise ConfigRefused(
            ResponseCode.INVALID_PARAMETER,
            f"config body names {len(props)} keys, over {MAX_UPDATE_KEYS}; nothing was changed",
        )
    return props


def named(items: Iterable[str], sep: str = ", ", width: int = MAX_NAME_CHARS) -> str:
    """At most ``MAX_KEYS_NAMED`` of ``items``, each cut to ``width`` characters (shown with
    ``!r`` escapes when not printable), then how many more: a remark never echoes a body."""
    shown: list[str] = []
    more = 0
    for item in items:
        if len(shown) < MAX_KEYS_NAMED:
            cut = item if len(item) <= width else item[:width] + "..."
            shown.append(cut if cut.isprintable() else repr(cut))
        else:
            more += 1
    return sep.join(shown) + (f" and {more} more" if more else "")


def updated_config(config: NamesrvConfig, props: dict[str, str]) -> NamesrvConfig:
    """``config`` with ``props`` (upstream or dotted keys) applied; raises :class:`ConfigRefused`
    naming every key that is unknown, fixed until restart, or given a bad value, so a body
    mixing accepted and refused keys changes nothing."""
    if not props:
        raise ConfigRefused(ResponseCode.INVALID_PARAMETER, "no key=value lines in the body")
    unknown: list[str] = []
    fixed: list[str] = []
    invalid: list[str] = []
    changes: dict[str, dict[str, Any]] = {}
    for key, value in props.items():
        known = resolve_key(key)
        if known is None:
            unknown.append(key)
        elif not known.runtime:
            fixed.append(key)
        else:
            try:
                parsed = known.parse(key, value)
            except ConfigError as exc:
                invalid.append(str(exc).removeprefix("namesrv.properties: "))
                continue
            section = changes.setdefault(known.section, {})
            if section.get(known.field, parsed) != parsed:
                invalid.append(f"{key} contradicts another key for {known.section}.{known.field}")
            section[known.field] = parsed
    reasons = []
    if fixed:
        reasons.append(f"cannot change at run time (edit the config file): {named(fixed)}")
    if unknown:
        reasons.append(f"unknown config keys: {named(unknown)}")
    if invalid:
        reasons.append(named(invalid, sep="; ", width=MAX_REASON_CHARS))
    if reasons:
        code = ResponseCode.NO_PERMISSION if fixed else ResponseCode.INVALID_PARAMETER
        raise ConfigRefused(code, "; ".join(reasons) + "; nothing was changed")
    replaced = {
        name: dataclasses.replace(getattr(config, name), **fields)
        for name, fields in changes.items()
    }
    try:
        return dataclasses.replace(config, **replaced)
    except ConfigError as exc:
        raise ConfigRefused(ResponseCode.INVALID_PARAMETER, f"{exc}; nothing was changed") from None


def config_properties(config: NamesrvConfig, listening: str | None = None) -> str:
    """The config as upstream's properties text (``key=value`` lines): upstream's keys with
    their upstream meaning first, then every key of ours, sections dotted. ``listening`` is
    the address the server is bound to, shown instead of a configured port 0."""
    if listening is not None:
        config = dataclasses.replace(
            config, server=dataclasses.replace(config.server, listen=listening)
        )
    lines = [f"{key}={value}" for key, value in upstream_properties(config)]

    def walk(prefix: str, obj: Any) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.metadata.get("tuning"):
                continue  # built-in limits: not keys of the config file
            if dataclasses.is_dataclass(value):
                walk(f"{prefix}{f.name}.", value)
            elif f.metadata.get("secret"):
                # A secret (the metrics page's token or password) never leaves the server:
                # only whether it is set.
                lines.append(f"{prefix}{f.name}={'<set>' if value else ''}")
            elif f.metadata.get("item") is not None:
                # Accounts carry secrets: only their access keys leave the server.
                keys = ",".join(getattr(item, "access_key", "") for item in value)
                lines.append(f"{prefix}{f.name}={keys}")
            else:
                # Booleans as upstream's keys spell them (``true``), for every key alike.
                text = ",".join(value) if isinstance(value, list) else show_value(value)
                lines.append(f"{prefix}{f.name}={text}")

    walk("", config)
    return "\n".join(lines) + "\n"
