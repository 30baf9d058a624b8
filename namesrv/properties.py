"""Upstream's ``namesrv.properties``: the keys that mean something here, mapped onto our config.

Operators moving from Apache's name server can start this one with their file unchanged. Keys
with a counterpart are honoured; the rest (thread pools, Netty buffers, controller settings...)
are listed once in a warning, never silently.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import Any

from namesrv.config import ConfigError

log = logging.getLogger(__name__)


def parse_properties(text: str) -> dict[str, str]:
    """``java.util.Properties`` text: ``#``/``!`` comments, ``=``, ``:`` or space separators,
    backslash line continuations and ``\\t \\n \\uXXXX`` escapes."""
    out: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        match = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line)
        if match is None:  # pragma: no cover - the pattern matches any line
            continue
        out[_unescape(match.group(1))] = _unescape(match.group(2))
    return out


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        c = m.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text)


def _bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"namesrv.properties: {key} must be true or false, got {value!r}")
    return lowered == "true"


def _int(key: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"namesrv.properties: {key} must be an integer, got {value!r}") from None


def _path(key: str, value: str) -> str:
    return os.path.expanduser(value.strip().replace("${user.home}", "~"))


def _tls_mode(key: str, value: str) -> str:
    return value.strip().lower()


# upstream key -> (section, our key, converter)
_MAPPED: dict[str, tuple[str, str, Callable[[str, str], Any]]] = {
    "scanNotActiveBrokerInterval": ("registry", "scan_interval_ms", _int),
    "orderMessageEnable": ("registry", "order_message_enable", _bool),
    "kvConfigPath": ("registry", "kv_config_path", _path),
    "deleteTopicWithBrokerRegistration": (
        "registry",
        "delete_topic_with_broker_registration",
        _bool,
    ),
    "enableAllTopicList": ("registry", "enable_all_topic_list", _bool),
    "tls.server.mode": ("server", "tls", _tls_mode),
    "tls.server.certPath": ("server", "tls_cert_file", _path),
    "tls.server.keyPath": ("server", "tls_key_file", _path),
}
_ACCEPTED_AS_IS = {
    # Upstream defaults that are also ours: set to them, they change nothing here.
    "tls.server.need.client.auth": "none",
}


def to_mapping(props: dict[str, str]) -> dict[str, Any]:
    """The TOML-shaped mapping for :func:`namesrv.config.from_mapping`; warns of unused keys."""
    raw: dict[str, dict[str, Any]] = {}
    unknown: list[str] = []
    for key, value in props.items():
        if key in _MAPPED:
            section, name, convert = _MAPPED[key]
            raw.setdefault(section, {})[name] = convert(key, value)
        elif key in ("listenPort", "bindAddress") or _ACCEPTED_AS_IS.get(key) == value.strip():
            continue
        else:
            unknown.append(key)
    if "listenPort" in props or "bindAddress" in props:
        port = _int("listenPort", props.get("listenPort", "9876"))
        host = props.get("bindAddress", "0.0.0.0").strip() or "0.0.0.0"
        raw.setdefault("server", {})["listen"] = f"{host}:{port}"
    if unknown:
        log.warning(
            "namesrv.properties keys with no meaning for this name server, ignored: %s",
            ", ".join(sorted(unknown)),
        )
    return raw


def looks_like_properties(path: str, text: str) -> bool:
    """``.properties`` files, or text with no TOML table header (our config always has one)."""
    if path.endswith(".properties"):
        return True
    if path.endswith(".toml"):
        return False
    return not any(line.lstrip().startswith("[") for line in text.splitlines())
