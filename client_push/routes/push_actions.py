"""What the push session asks its glue to do: small frozen values, carried out in order.

Pure. Wire actions (``SendSubscribe``, ``SendUnsubscribe``, ``MoveTo``) go to the connection
the event came from; with no connection they are dropped, since the next connection subscribes
every held topic anyway. Held-route actions (``AdoptRoute``, ``KeepStale``, ``DropRoute``,
``ClearAbsence``, ``ForgetVersions``) are the only way the session changes the held routes:
the glue applies them through ``HeldRoutes`` and tells the listeners what changed.
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
class AdoptRoute:
    """Hold ``route`` at ``version`` for ``topic``: a departed broker dropped locally, with no
    request (``HeldRoutes.adopt``: nothing recorded, listeners told when it changed)."""

    topic: str
    route: TopicRouteData
    version: int


@dataclass(frozen=True, slots=True)
class KeepStale:
    """News that would leave held ``topic`` with no broker: keep its route, marked stale
    (``HeldRoutes.keep_stale``); counted ``routes_kept_stale`` and told when it was not stale."""

    topic: str
    cause: str


@dataclass(frozen=True, slots=True)
class DropRoute:
    """``topic`` was deleted: drop its route and remember it absent (``HeldRoutes.learn_absent``
    with ``deleted``); listeners told when it was not absent already."""

    topic: str
    version: int
    cause: str
    notified_at_ms: int | None


@dataclass(frozen=True, slots=True)
class ClearAbsence:
    """Forget a remembered absence of ``topic``: a lookup should ask rather than trust it."""

    topic: str


@dataclass(frozen=True, slots=True)
class ForgetVersions:
    """Hold every route at version 0: its version came from another name-server process."""


@dataclass(frozen=True, slots=True)
class AwaitVersion:
    """A departure changed ``topic``'s route here toward ``version``: an answer to a fetch sent
    before now and older than that predates the change and must not undo it."""

    topic: str
    version: int


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
    """Push became (un)healthy: poll at ``Subscriptions.poll_interval_ms`` from now on."""

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
class SpreadRefetch:
    """Refetch ``topics`` ((topic, wanted version or None) each) spread evenly over
    ``window_ms`` after ``delay_ms`` (``RefetchSchedule.spread``); a topic already scheduled
    keeps its time."""

    topics: tuple[tuple[str, int | None], ...]
    cause: str
    delay_ms: int
    window_ms: int


@dataclass(frozen=True, slots=True)
class BackOff:
    """The last answer for ``topic`` could not be trusted: refetch it after a backoff that
    grows per such answer in a row (``RefetchSchedule.back_off_ms``), cause ``retry``."""

    topic: str


Action: TypeAlias = (
    Refetch
    | InstallRoute
    | AdoptRoute
    | KeepStale
    | DropRoute
    | ClearAbsence
    | ForgetVersions
    | AwaitVersion
    | FollowUp
    | SendSubscribe
    | SendUnsubscribe
    | SetPushHealthy
    | MoveTo
    | ServerUp
    | Announce
    | SpreadRefetch
    | BackOff
)

HeldRouteAction: TypeAlias = AdoptRoute | KeepStale | DropRoute | ClearAbsence | ForgetVersions
"""The actions ``HeldRoutes.apply`` carries out."""

ScheduleAction: TypeAlias = SpreadRefetch | BackOff
"""The actions ``RefetchSchedule.apply`` carries out."""
