"""What a request handler is given and what it may hand back.

A handler sees the peer only through :class:`Connection` and the server's pure cores only
through :class:`Services`; it answers with a response command, or with a
:class:`PendingResponse` for work the server spreads over several reactor turns.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

from namesrv.config import NamesrvConfig
from namesrv.ops.audit_events import AuditEvent, Who
from namesrv.ops.audit_trail import AuditTrail
from namesrv.ops.clock import Clock
from namesrv.ops.events import EventSink
from namesrv.push.change_detector import ChangeDetector
from namesrv.push.subscriber import Subscriber
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.requests.acl import ACCESS_KEY, AccessControl
from namesrv.requests.startup_window import StartupWindow
from namesrv.routes.kv_config import KVConfig
from namesrv.routes.listings import Listings
from namesrv.routes.registry import RouteRegistry
from namesrv.routes.route_bodies import RouteBodies
from protocol.codes import ResponseCode, SerializeType
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand


class Connection(Subscriber, Protocol):
    """What the requests layer may know of a peer and tell it: a subscriber to route push.

    ``conn_id`` names it to the registries, ``peer`` to the log. The layer never writes a
    connection's fields: it tells the connection what a request showed about it.
    """

    def note_extension(self, serialize_type: SerializeType | None) -> None:
        """The peer sent a push-extension request: it may be sent GoAway. A serialize type
        (given by a SUBSCRIBE) is also the one its notifications are encoded in from now on;
        None leaves that as it was."""


@dataclass(frozen=True, slots=True)
class ConfigControl:
    """The server's config as the config handlers may see and change it, and nothing more."""

    apply: Callable[[NamesrvConfig], None]
    """Runs the server with a new config that differs from the current one in run-time keys
    only (``namesrv.properties.UpstreamKey.runtime``); it becomes ``Services.config`` and
    every part that uses a changed key acts on it (routes re-encoded, subscribers told)."""
    listening: Callable[[], str | None]
    """``HOST:PORT`` the server is bound to (the config may say port 0); None before listen."""


@dataclass(slots=True)
class Services:
    """The pure cores the handlers call, built and owned by the server."""

    config: NamesrvConfig
    registry: RouteRegistry
    kv: KVConfig
    routes: RouteBodies
    subscriptions: SubscriptionRegistry
    detector: ChangeDetector
    listings: Listings
    """The whole-registry answers (topic lists, cluster info), encoded once per change."""
    clock: Clock
    """Paces the refusal log (``seconds()``)."""
    events: EventSink | None = None
    """Hears the topics a connection subscribed to or gave up."""
    acl: AccessControl | None = None
    operations: Callable[[int, RemotingCommand], RemotingCommand] | None = None
    """Answers the operations extension (push status, subscriptions); None: unsupported."""
    config_control: ConfigControl | None = None
    """Reads and changes the running config; None: UPDATE_NAMESRV_CONFIG is refused."""
    startup: StartupWindow | None = None
    """The start-up window: while it lasts a topic not heard of is not called absent. None:
    no window (never warming up, up 0 ms)."""
    audit: AuditTrail | None = None
    """The operator's audit trail: what a request changed, and who asked. None: not kept."""


@dataclass(slots=True)
class PendingResponse:
    """A register answered over several reactor turns: the server calls
    :meth:`RequestProcessor.step` once per turn until it returns the response."""

    steps: Generator[str | None, None, RemotingCommand]
    """The register's stages: each ``next`` a step (see ``namesrv.requests.register``)."""
    key: tuple[str, str]
    """(cluster, broker address): registers of one address are applied in arrival order."""
    started: bool = False
    last: str = ""
    """What the last step did: ``"read"`` (a slice of body) or ``"wait"`` (for the registry)."""
    request: Any = None
    signer: str | None = None
    """The ACL access key that signed the register, bound to the broker once it succeeds."""


def who_asked(services: Services, conn: Connection, request: RemotingCommand) -> Who:
    """The peer a request came from and, with access control on, the access key it was signed
    with (checked before any handler runs)."""
    acl = services.acl
    key = request.ext_fields.get(ACCESS_KEY) if acl is not None and acl.enabled else None
    return Who(conn.peer, key)


def audit(
    services: Services, event: AuditEvent, conn: Connection, request: RemotingCommand
) -> None:
    """Write ``event`` to the audit trail as the doing of the request's sender."""
    if services.audit is not None:
        services.audit.record(event, who_asked(services, conn, request))


def ok(
    request: RemotingCommand, ext: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, None, ext, body)


def require_push(config: NamesrvConfig) -> None:
    """With push off this server is, to a client, an upstream one: the extension's codes are
    unsupported."""
    if not config.push.enabled:
        raise ProtocolError(
            "route push is disabled on this name server",
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        )
