"""What the push session asks its glue to do: small frozen values, carried out in order.

Pure. Wire actions (``SendSubscribe``, ``SendUnsubscribe``, ``MoveTo``) go to the connection
the event came from; with no connection they are dropped, since the next connection subscribes
every held topic anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from client_push.routes.events import BrokerEvent, RouteEvent
from protocol.route_model import TopicRouteData


@dataclass(frozen=True, slots=True)
class Refetch:
    """Fetch ``topic`` now, or join the fetch in flight (remembering why)."""

    topic: str
    cause: str
    wanted_version: int | None = None
    """The version that made the fetch worth it; None for causes that ask whatever is held."""
    notified_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class InstallRoute:
    """Hold ``route`` as ``topic``'s route at ``version`` now, with no request: it came inline
    in a notification, already checked against the held version. Learned with cause
    ``inline`` (``HeldRoutes.learn_route``: telemetry record, listeners told when it changed);
    a route over the client's queue bounds is refused as a fetched one would be."""

    topic: str
    route: TopicRouteData
    version: int
    """The notified version the route is exactly the route of."""
    notified_at_ms: int | None
    """The notification's ``emitted_at_ms`` (None when the server sent 0)."""


@dataclass(frozen=True, slots=True)
class FollowUp:
    """A fetch of ``topic`` in flight may be answered from before a change: when it ends,
    fetch again if the held version is still older than ``wanted_version``."""

    topic: str
    cause: str
    wanted_version: int
    notified_at_ms: int | None


@dataclass(frozen=True, slots=True)
class SendSubscribe:
    """SUBSCRIBE ``topics`` (in batches); the answers come back as ``subscribe_*`` events."""

    topics: tuple[str, ...]
    cause: str


@dataclass(frozen=True, slots=True)
class SendUnsubscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetPushHealthy:
    """Push became (un)healthy: poll at ``PushSession.poll_interval_ms`` from now on."""

    healthy: bool


@dataclass(frozen=True, slots=True)
class MoveTo:
    """Leave this name server, preferring ``alternatives``; ``still_serving`` when it keeps
    answering for a grace period (a oneway GO_AWAY), not when it refused a request."""

    alternatives: tuple[str, ...]
    still_serving: bool


@dataclass(frozen=True, slots=True)
class ServerUp:
    """The current name server has been up ``uptime_ms`` and says whether it is still
    ``warming_up`` (its SubscribeAck): a client with other servers may prefer one up longer."""

    uptime_ms: int
    warming_up: bool


@dataclass(frozen=True, slots=True)
class Announce:
    """Tell the listeners of ``event``."""

    event: RouteEvent | BrokerEvent


@dataclass(frozen=True, slots=True)
class WakeAt:
    """Call ``PushSession.spread_due`` at ``due_ms`` (clock milliseconds) or earlier."""

    due_ms: float


Action: TypeAlias = (
    Refetch
    | InstallRoute
    | FollowUp
    | SendSubscribe
    | SendUnsubscribe
    | SetPushHealthy
    | MoveTo
    | ServerUp
    | Announce
    | WakeAt
)
