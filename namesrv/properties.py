"""Upstream's ``namesrv.properties``: the keys that mean something here, mapped onto our config.

Operators moving from Apache's name server can start this one with their file unchanged. Keys
with a counterpart are honoured; upstream's other keys (thread pools, Netty buffers, controller
settings...) are listed once in a warning, never silently; any other key is refused, with the
closest known key suggested, as a typo in the TOML file is: a mistyped ``listenPort`` must not
leave a server on the default port. The same declaration gives GET_NAMESRV_CONFIG the upstream
keys it answers and UPDATE_NAMESRV_CONFIG the keys it may change at run time.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from namesrv.config import ConfigError, NamesrvConfig, parse_listen
from namesrv.config_setting import Setting, walk

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
    """A path as upstream writes it: ``${user.home}`` (and ``~``) is the home directory."""
    return os.path.expanduser(value.strip().replace("${user.home}", "~"))


def _lower(key: str, value: str) -> str:
    return value.strip().lower()


@dataclass(frozen=True, slots=True)
class UpstreamKey:
    """An upstream ``namesrv.properties`` key and the config field it stands for.

    One declaration serves both directions: a properties file read at start-up, and the
    upstream keys GET_NAMESRV_CONFIG answers with the values the server runs with.
    """

    section: str
    field: str
    parse: Callable[[str, str], Any]
    runtime: bool = False
    """UPDATE_NAMESRV_CONFIG may change it while the server runs (under either key form)."""


def _parser(f: dataclasses.Field[Any], s: Setting) -> Callable[[str, str], Any]:
    """How the properties text of a declared setting becomes its value."""
    if f.type in ("bool", bool):
        return _bool
    if f.type in ("int", int):
        return _int
    if s.path:
        return _path
    return _lower


UPSTREAM_KEYS: dict[str, UpstreamKey] = {
    s.upstream: UpstreamKey(
        key.partition(".")[0], key.partition(".")[2], _parser(f, s), runtime=s.runtime
    )
    for key, f, s in walk(NamesrvConfig)
    if s.upstream
}
"""The upstream keys declared on our settings (``setting(..., upstream=...)``)."""
LISTEN_KEYS = ("bindAddress", "listenPort")
"""Upstream's two halves of ``server.listen`` (``HOST:PORT``); never changed at run time."""
WAIT_KEYS = ("needWaitForService", "waitSecondsForService")
"""Upstream's two halves of ``server.wait_for_service_ms``: whether the start-up window is on,
and its length in seconds (45 when not given, as upstream); never changed at run time."""
UPSTREAM_WAIT_SECONDS = 45
_FIXED = UpstreamKey("", "", lambda key, value: value)
"""What :func:`resolve_key` gives for a known key that is no single field of ours."""
_ACCEPTED_AS_IS = {
    # Upstream defaults that are also ours: set to them, they change nothing here.
    "tls.server.need.client.auth": "none",
}
_BY_FIELD = {(k.section, k.field): k for k in UPSTREAM_KEYS.values()}
UPSTREAM_UNUSED_KEYS = frozenset(
    {
        # NamesrvConfig
        "rocketmqHome", "configStorePath", "productEnvName", "clusterTest",
        "returnOrderTopicConfigToBroker", "clientRequestThreadPoolNums", "defaultThreadPoolNums",
        "clientRequestThreadPoolQueueCapacity", "defaultThreadPoolQueueCapacity",
        "unRegisterBrokerQueueCapacity", "supportActingMaster", "enableTopicList",
        "notifyMinBrokerIdChanged", "enableControllerInNamesrv", "configBlackList",
        # NettyServerConfig
        "serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
        "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue",
        "serverChannelMaxIdleTimeSeconds", "serverSocketSndBufSize", "serverSocketRcvBufSize",
        "writeBufferHighWaterMark", "writeBufferLowWaterMark", "serverSocketBacklog",
        "serverPooledByteBufAllocatorEnable", "enableShutdownGracefully",
        "shutdownWaitTimeSeconds", "useEpollNativeSelector",
        # NettyClientConfig (the name server's client side, for the controller)
        "clientWorkerThreads", "clientCallbackExecutorThreads", "clientOnewaySemaphoreValue",
        "clientAsyncSemaphoreValue", "connectTimeoutMillis", "channelNotActiveInterval",
        "isScanAvailableNameSrv", "clientChannelMaxIdleTimeSeconds", "clientSocketSndBufSize",
        "clientSocketRcvBufSize", "clientPooledByteBufAllocatorEnable",
        "clientCloseSocketIfTimeout", "useTLS", "disableCallbackExecutor",
        "disableNettyWorkerGroup", "maxReconnectIntervalTimeSeconds",
        "enableReconnectForGoAway", "enableTransparentRetry",
        # ControllerConfig, read when the controller runs in the name server
        "controllerType", "controllerDLegerGroup", "controllerDLegerPeers",
        "controllerDLegerSelfId", "controllerStorePath", "mappedFileSize",
        "controllerThreadPoolNums", "controllerRequestThreadPoolQueueCapacity",
        "electMasterMaxRetryCount", "enableElectUncleanMaster", "isProcessReadEvent",
        "notifyBrokerRoleChanged", "scanInactiveMasterInterval",
        # TLS settings of upstream's client side and test mode
        "tls.test.mode.enable", "tls.config.file", "tls.server.keyPassword",
        "tls.server.trustCertPath", "tls.client.keyPath", "tls.client.keyPassword",
        "tls.client.certPath", "tls.client.authServer", "tls.client.trustCertPath",
    }
)  # fmt: skip
"""Upstream keys this server has no use for: warned once and ignored. Any other key that is
not declared above is refused (docs/config.md lists these)."""


def to_mapping(props: dict[str, str]) -> dict[str, Any]:
    """The TOML-shaped mapping for :func:`namesrv.config.from_mapping`; warns of unused keys."""
    raw: dict[str, dict[str, Any]] = {}
    unknown: list[str] = []
    typos: list[str] = []
    for key, value in props.items():
        known = UPSTREAM_KEYS.get(key)
        if known is not None:
            raw.setdefault(known.section, {})[known.field] = known.parse(key, value)
        elif key in _ACCEPTED_AS_IS:
            if _ACCEPTED_AS_IS[key] != value.strip():
                raise ConfigError(
                    f"namesrv.properties: {key}={value.strip()} is not supported here "
                    f"(only {_ACCEPTED_AS_IS[key]})"
                )
        elif key in LISTEN_KEYS or key in WAIT_KEYS:
            continue
        elif key in UPSTREAM_UNUSED_KEYS:
            unknown.append(key)
        else:
            typos.append(unknown_key(key))
    if typos:
        raise ConfigError("namesrv.properties: " + "; ".join(typos))
    if "listenPort" in props or "bindAddress" in props:
        port = _int("listenPort", props.get("listenPort", "9876"))
        host = props.get("bindAddress", "0.0.0.0").strip() or "0.0.0.0"
        raw.setdefault("server", {})["listen"] = f"{host}:{port}"
    wait_ms = _wait_for_service_ms(props)
    if wait_ms is not None:
        raw.setdefault("server", {})["wait_for_service_ms"] = wait_ms
    if unknown:
        log.warning(
            "namesrv.properties keys with no meaning for this name server, ignored: %s",
            ", ".join(sorted(unknown)),
        )
    return raw


def _wait_for_service_ms(props: dict[str, str]) -> int | None:
    """``server.wait_for_service_ms`` from upstream's pair: ``needWaitForService=false`` is
    off; ``true`` is ``waitSecondsForService`` (45 by default); ``waitSecondsForService`` alone
    sets the length of the window, which is on here by default. None: neither key given."""
    need_text = props.get("needWaitForService")
    seconds_text = props.get("waitSecondsForService")
    if need_text is None and seconds_text is None:
        return None
    if need_text is not None and not _bool("needWaitForService", need_text):
        return 0
    seconds = UPSTREAM_WAIT_SECONDS
    if seconds_text is not None:
        seconds = _int("waitSecondsForService", seconds_text)
        if not 0 <= seconds <= 86_400:
            raise ConfigError(
                f"namesrv.properties: waitSecondsForService must be between 0 and 86400, "
                f"got {seconds}"
            )
    return seconds * 1000


def unknown_key(key: str) -> str:
    """``unknown key K``, with the closest key this file may hold suggested: first among the
    keys with a meaning here, then among upstream's others."""
    meaningful = [*UPSTREAM_KEYS, *LISTEN_KEYS, *WAIT_KEYS, *_ACCEPTED_AS_IS]
    close = difflib.get_close_matches(key, meaningful, n=1) or difflib.get_close_matches(
        key, sorted(UPSTREAM_UNUSED_KEYS), n=1
    )
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown key {key}{hint}"


def upstream_properties(config: NamesrvConfig) -> list[tuple[str, str]]:
    """The upstream keys with their upstream meaning and ``config``'s values, as upstream
    prints them (booleans in lower case)."""
    host, port = parse_listen(config.server.listen)
    out = [("bindAddress", host), ("listenPort", str(port))]
    for key, known in UPSTREAM_KEYS.items():
        out.append((key, show_value(getattr(getattr(config, known.section), known.field))))
    wait_ms = config.server.wait_for_service_ms
    out.append(("needWaitForService", show_value(wait_ms > 0)))
    out.append(("waitSecondsForService", str(-(-wait_ms // 1000))))
    out.extend(_ACCEPTED_AS_IS.items())
    return out


def show_value(value: Any) -> str:
    """A config value as properties text: booleans as upstream spells them (``true``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def resolve_key(key: str) -> UpstreamKey | None:
    """The config field ``key`` names, as an upstream key or as our dotted ``section.field``
    (which shares its upstream key's declaration when it has one); None: it names none.
    A dotted key with no upstream counterpart is never a run-time key."""
    known = UPSTREAM_KEYS.get(key)
    if known is not None:
        return known
    if key in LISTEN_KEYS or key in WAIT_KEYS or key in _ACCEPTED_AS_IS:
        return _FIXED
    section, _, name = key.partition(".")
    known = _BY_FIELD.get((section, name))
    if known is not None:
        return known
    for dotted, _, setting in walk(NamesrvConfig):
        if dotted == key and not setting.tuning:
            return dataclasses.replace(_FIXED, section=section, field=name)
    return None  # a section, a tuning value, or nothing


def looks_like_properties(path: str, text: str) -> bool:
    """``.properties`` files, or text with no TOML table header (our config always has one)."""
    if path.endswith(".properties"):
        return True
    if path.endswith(".toml"):
        return False
    return not any(line.lstrip().startswith("[") for line in text.splitlines())
