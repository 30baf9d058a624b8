"""What a producer's connections to brokers send and meet besides messages: the detector's
probe and a broker's GoAway.

Pure. A probe is a GET_MAX_OFFSET of queue 0 of a topic the broker serves, the request
upstream's detector sends: any answer within the timeout, error codes included, means the
broker is reachable, except a GO_AWAY answer (1500). A broker stopping gracefully sends
GO_AWAY (7004, oneway) on every client connection, its body carrying the grace period; an
unreadable body is logged and counted and taken as no grace (the broker is leaving either
way). A response with code 1500 to a request is the same announcement without a grace period.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Generic, TypeVar

from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.push_codec import decode_go_away

log = logging.getLogger("client_push.producer.broker_conns")

GoAwayHandler = Callable[[str, int], None]
"""Called with the broker address and the grace period it announced (ms)."""


def is_go_away(cmd: RemotingCommand) -> bool:
    """Whether a request a broker sent on a producer's connection is its GoAway."""
    return cmd.code == RequestCode.GO_AWAY


def go_away_grace(cmd: RemotingCommand, label: str, counters: Counter[str]) -> int:
    """The grace period (ms) a GO_AWAY request announces; 0 when its body is unreadable."""
    try:
        return decode_go_away(cmd.body).grace_period_ms
    except ProtocolError as exc:
        counters["go_away_malformed"] += 1
        log.warning("malformed GoAway from broker %s (%s): taken as no grace", label, exc)
        return 0


def probe_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"})


def probe_says_going_away(response: RemotingCommand) -> bool:
    """A probe's answer: reachable, unless it is a GO_AWAY answer (the broker is stopping)."""
    return response.code == ResponseCode.GO_AWAY


C = TypeVar("C")
"""The connection type kept: bookkeeping only, never called."""


class KeptConnections(Generic[C]):
    """One kept connection per broker address, as the producer keeps its send connections and
    its probe connections. Pure bookkeeping: the owner opens and closes; this says which
    connection serves an address and which to close."""

    def __init__(self) -> None:
        self._by_addr: dict[str, C] = {}
        self.stopped = False

    def __len__(self) -> int:
        return len(self._by_addr)

    def get(self, addr: str) -> C | None:
        return self._by_addr.get(addr)

    def values(self) -> list[C]:
        return list(self._by_addr.values())

    def keep(self, addr: str, conn: C) -> None:
        self._by_addr[addr] = conn

    def forget(self, addr: str, conn: C) -> bool:
        """``conn`` closed or is being left: it no longer serves ``addr`` (True when it did)."""
        if self._by_addr.get(addr) is conn:
            del self._by_addr[addr]
            return True
        return False

    def not_in(self, addrs: set[str]) -> list[C]:
        """Forget the connections of addresses not in ``addrs``; the caller closes them."""
        gone = [addr for addr in self._by_addr if addr not in addrs]
        return [self._by_addr.pop(addr) for addr in gone]

    def stop(self) -> list[C]:
        """No more connections; every kept one, to close."""
        self.stopped = True
        conns, self._by_addr = list(self._by_addr.values()), {}
        return conns


class ProbesInFlight:
    """At most one probe per broker address at a time, counted."""

    def __init__(self, counters: Counter[str]) -> None:
        self._addrs: set[str] = set()
        self._counters = counters

    def __len__(self) -> int:
        return len(self._addrs)

    def begin(self, addr: str, stopped: bool) -> bool:
        """Whether a probe of ``addr`` may start now (False: skip it, it fails)."""
        if stopped or addr in self._addrs:
            self._counters["probes_skipped"] += 1
            return False
        self._addrs.add(addr)
        self._counters["probes_sent"] += 1
        return True

    def end(self, addr: str, ok: bool) -> bool:
        self._addrs.discard(addr)
        self._counters["probes_answered" if ok else "probes_failed"] += 1
        return ok
