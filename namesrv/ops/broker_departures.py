"""What the operator is told of brokers that left with no request to charge it to: an expiry
(heartbeats stopped) or a closed connection.

Each is written to the audit trail as the doing of the broker's connection and, with access
control on, of the access key its name is bound to; a scan that expired brokers is counted
(``brokers_expired``) and logged, paced. A departure a request caused (UNREGISTER_BROKER) is
audited by its handler, which knows who asked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol

from namesrv.ops.audit_events import BrokerChange, BrokerLeft, Who
from namesrv.ops.audit_trail import AuditTrail
from protocol.paced_log import PacedLog

EXPIRY_CAUSE = "expiry"
"""``namesrv.routes.change_cause.ChangeCause.EXPIRY``'s value."""


class KeyOwners(Protocol):
    """Which access key a broker name is bound to (``namesrv.requests.acl.AccessControl``)."""

    @property
    def enabled(self) -> bool: ...

    def owner_of(self, broker_name: str) -> str | None: ...


class Departure(BrokerChange, Protocol):
    """A broker change with the connection id it was registered over, if any."""

    @property
    def channel(self) -> object: ...


class BrokerDepartures:
    """Audits expiries and closed connections, and reports expiry scans."""

    def __init__(
        self,
        trail: AuditTrail,
        keys: KeyOwners,
        peer_of: Callable[[object], str],
        counters: Counter[str],
        peer_log: PacedLog,
    ) -> None:
        """``peer_of`` gives ``HOST:PORT`` of the open connection a channel names ("" when
        it is gone); ``peer_log`` paces the expiry lines."""
        self._trail = trail
        self._keys = keys
        self._peer_of = peer_of
        self._counters = counters
        self._peer_log = peer_log

    def broker_changed(self, event: Departure) -> None:
        """The registry's broker event: an expiry is audited (no request did it)."""
        if event.cause == EXPIRY_CAUSE:
            self._audit(event, self._peer_of(event.channel))

    def channel_closed(self, departed: Iterable[BrokerChange], peer: str) -> None:
        """The brokers registered over a connection that closed, from ``peer``."""
        for event in departed:
            self._audit(event, peer)

    def scanned(self, expired: list[str]) -> None:
        """An expiry scan removed the brokers at ``expired`` addresses."""
        if not expired:
            return
        self._counters["brokers_expired"] += len(expired)
        self._peer_log.warning(
            "brokers_expired",
            "%d brokers expired after missing heartbeats (first: %s)",
            len(expired),
            expired[0],
        )

    def _audit(self, event: BrokerChange, peer: str) -> None:
        keys = self._keys
        key = keys.owner_of(event.broker_name) if keys.enabled else None
        self._trail.record(BrokerLeft.of(event), Who(peer, key))
