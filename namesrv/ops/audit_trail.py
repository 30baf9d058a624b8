"""The operator's audit trail: one INFO line per change an operator may have to account for
after an incident, under the one logger :data:`AUDIT_LOGGER`, so it can be routed to a file of
its own.

What is written is a typed event (a broker registered, unregistered, expired or whose
connection closed; a topic deleted or left unlisted; a write perm changed; a KV entry put or
deleted; the config changed) and :class:`Who` caused it: the connection's peer address and,
with access control on, the access key that signed the request. The code that knows who asked
records the event: the request handlers for requests, the server for what no request did
(expiry, a closed connection: :class:`BrokerDepartures`, which also counts and logs expiry
scans). Steady heartbeats of a known broker are no event.

Lines are paced per kind and per peer host (:class:`~protocol.paced_log.PacedLog`):
a peer that registers thousands of made-up brokers gets :data:`AUDIT_BURST` lines of each
kind per :data:`AUDIT_PERIOD_S`, then one line counting the rest, and cannot crowd out
another host's lines. Every string of a line is a peer's and passes through
:func:`protocol.peer_text.printable` (escaped, cut): no peer can start or forge a line.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol

from namesrv.ops.audit_events import AuditEvent, BrokerChange, BrokerLeft, Who
from namesrv.ops.clock import Clock
from protocol.paced_log import MAX_KINDS, PacedLog

AUDIT_LOGGER = "namesrv.audit"
"""The logger every audit line is written to."""
AUDIT_BURST = 20
"""Lines of one kind from one peer host per period; the rest are counted."""
AUDIT_PERIOD_S = 10.0
"""The pace's period, in seconds."""


class AuditTrail:
    """Writes audit events, paced per kind and peer host, to the :data:`AUDIT_LOGGER`."""

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        logger: logging.Logger | None = None,
        burst: int = AUDIT_BURST,
        period_s: float = AUDIT_PERIOD_S,
        max_kinds: int = MAX_KINDS,
    ) -> None:
        """``clock`` has ``seconds()`` (the reactor or a ``task.Clock``)."""
        self._paced = PacedLog(
            logger or logging.getLogger(AUDIT_LOGGER),
            None if clock is None else clock.seconds,
            period_s=period_s,
            burst=burst,
            max_kinds=max_kinds,
        )

    def record(self, event: AuditEvent, who: Who) -> bool:
        """One line for ``event`` and who caused it; False when its pace held it back."""
        msg, args = event.line()
        msg += " peer=%s"
        args += (who.peer or "-",)
        if who.access_key is not None:
            msg += " key=%s"
            args += (who.access_key,)
        host = who.host
        kind = f"{event.kind} from {host}" if host else event.kind
        return self._paced.log(logging.INFO, kind, msg, *args)

    def release(self) -> int:
        """Tell the lines held back in periods that are over (see ``PacedLog.release``)."""
        return self._paced.release()

    @property
    def dropped(self) -> int:
        """Lines held back by the pace, in all."""
        return self._paced.dropped


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
    """Brokers that left with no request to charge it to (an expiry: heartbeats stopped; or a
    closed connection), audited as the doing of the broker's connection and, with access
    control on, of the access key its name is bound to; an expiry scan is counted
    (``brokers_expired``) and logged, paced. An UNREGISTER_BROKER is audited by its handler,
    which knows who asked."""

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
