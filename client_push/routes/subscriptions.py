"""Which held topics the current name server notifies us of, and whether push works at all.

Pure, events in and actions out, beside the ``PushSession`` it hands the news of an answer to:
a new connection subscribes every held topic, topics that become held are subscribed in one
batch per loop turn, an acknowledged SUBSCRIBE makes push healthy (polling then becomes rare),
a refused or lost one makes it unhealthy, a server that does not know SUBSCRIBE leaves the
client polling. Topics no longer held are unsubscribed; a server left for good is told to
stop notifying.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterable, Sequence

from client_push.config import ClientConfig
from client_push.routes.events import POLL, RECONNECT, SUBSCRIBE, VERSION_CHECK, log
from client_push.routes.negative_cache import NegativeCache
from client_push.routes.push_actions import (
    Action,
    KeepStale,
    MoveTo,
    Refetch,
    SendSubscribe,
    SendUnsubscribe,
    ServerUp,
    SetPushHealthy,
)
from client_push.routes.push_session import HeldView, PushSession, needs_refetch
from protocol.codes import ResponseCode
from protocol.push_events import SubscribeAck, TopicVersion


class Subscriptions:
    """The subscribed topics, the ones waiting for a SUBSCRIBE, and push's health."""

    def __init__(
        self,
        config: ClientConfig,
        session: PushSession,
        held: HeldView,
        negative: NegativeCache,
        scheduled: Container[str],
        *,
        clock: Callable[[], float],
        counters: Counter[str],
    ) -> None:
        self._config = config
        self._session = session
        self._held = held
        self._negative = negative
        self._scheduled = scheduled
        """Topics with a refetch already scheduled (``RefetchSchedule``), read only."""
        self._clock = clock
        self._counters = counters
        self._subscribed: set[str] = set()
        self._to_subscribe: set[str] = set()
        self._unsupported = False
        self._healthy = False
        self._connected_before = False
        self._warm_until_ms: int | None = None
        """While the current server's start-up window lasts (its SubscribeAck said so)."""

    @property
    def push_healthy(self) -> bool:
        """True while the current name server has acknowledged our subscriptions."""
        return self._healthy

    @property
    def push_unsupported(self) -> bool:
        """True when the current name server does not know SUBSCRIBE: polling only."""
        return self._unsupported

    @property
    def count(self) -> int:
        return len(self._subscribed)

    @property
    def server_warming(self) -> bool:
        """Whether the current name server is in its start-up window: its absences and errors
        say nothing about a topic."""
        until = self._warm_until_ms
        return until is not None and self._now_ms() < until

    @property
    def poll_interval_ms(self) -> int:
        """Polling is the safety net: rare while push is healthy, the only news otherwise."""
        cfg = self._config
        return cfg.poll_interval_with_push_ms if self._healthy else cfg.poll_interval_ms

    # -- the connection ------------------------------------------------------------------------

    def connected(self) -> list[Action]:
        """A new connection is up: sequences restart and every held topic is subscribed."""
        self._session.connected()
        self._subscribed.clear()
        self._to_subscribe.clear()
        self._unsupported = False
        self._warm_until_ms = None
        out: list[Action] = []
        self._set_healthy(False, out)
        cause = RECONNECT if self._connected_before else SUBSCRIBE
        self._connected_before = True
        held = self._held.held()
        if held:
            out.append(SendSubscribe(tuple(held), cause))
        return out

    def disconnected(self) -> list[Action]:
        self._subscribed.clear()
        out: list[Action] = []
        self._set_healthy(False, out)
        return out

    def switching(self, *, going_away: bool, old_connected: bool) -> list[Action]:
        """The current connection is left for another one; a server going away drops its
        subscriptions itself."""
        out: list[Action] = []
        if not going_away and old_connected and self._subscribed and not self._unsupported:
            out.append(SendUnsubscribe(tuple(sorted(self._subscribed))))
        self._subscribed.clear()
        self._set_healthy(False, out)
        return out

    # -- subscribing ---------------------------------------------------------------------------

    def want(self, topic: str) -> bool:
        """A topic became held; True when a SUBSCRIBE of it should follow (``flush``)."""
        if self._unsupported:
            return False
        self._to_subscribe.add(topic)
        return True

    def flush(self) -> list[Action]:
        """One SUBSCRIBE for the topics that became held since the last flush."""
        topics = [
            t for t in self._to_subscribe if self._held.is_held(t) and t not in self._subscribed
        ]
        self._to_subscribe.clear()
        if not topics or self._unsupported:
            return []
        return [SendSubscribe(tuple(sorted(topics)), SUBSCRIBE)]

    def acked(self, batch: Sequence[str], cause: str, ack: SubscribeAck) -> list[Action]:
        """The server now notifies changes of ``batch``; its versions show what we missed."""
        out: list[Action] = []
        held = [t for t in batch if self._held.is_held(t)]
        self._subscribed.update(held)
        gone = sorted(set(batch) - set(held))
        if gone:  # expired while the request was in flight
            out.append(SendUnsubscribe(tuple(gone)))
        self._set_healthy(True, out)
        self._warm_until_ms = self._now_ms() + max(0, ack.warm_in_ms) if ack.warming_up else None
        if ack.warming_up or ack.uptime_ms > 0:
            # First: a move to a server up longer sends the refetches below there.
            out.append(ServerUp(max(0, ack.uptime_ms), ack.warming_up))
        refetch_all = self._session.epoch_acked(ack.epoch, cause)
        if refetch_all is not None:
            out.extend(refetch_all)
            return out
        for version in ack.topics:
            out.extend(self._acked_version(version, cause, ack.warming_up))
        return out

    def _acked_version(self, tv: TopicVersion, cause: str, warming: bool) -> list[Action]:
        """What the version an ack names for one topic says push did not deliver."""
        topic = tv.topic
        if not self._held.is_held(topic):
            return []
        if tv.deleted:
            return self._session.deleted(topic, tv.version, cause)
        if cause == VERSION_CHECK and topic in self._scheduled:
            return []  # a spread refetch is already on its way
        held = self._held.peek(topic)
        if tv.exists:
            wanted = needs_refetch(held.version if held else None, tv.version)
            return [Refetch(topic, cause, tv.version)] if wanted else []
        if held is None:
            return []
        # No broker serves it now, or a warming server has not heard of it yet.
        retry = self._session.untrusted(topic) if warming else [Refetch(topic, cause)]
        return [KeepStale(topic, cause), *retry]

    def refused(
        self, server: str, batch: Sequence[str], cause: str, code: int, remark: str | None
    ) -> list[Action]:
        """A SUBSCRIBE answered with ``code`` other than SUCCESS."""
        out: list[Action] = []
        if code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            if not self._unsupported:
                log.info(
                    "name server %s does not support route push (%s); polling every %d ms",
                    server,
                    remark or "",
                    self._config.poll_interval_ms,
                )
            self._unsupported = True
            self._set_healthy(False, out)
            if cause == RECONNECT:
                out.extend(self._session.refetch_all(RECONNECT))
            return out
        if code == ResponseCode.GO_AWAY:
            return [MoveTo((), still_serving=False)]
        self._counters["subscribe_refused"] += 1
        log.warning(
            "name server %s refused SUBSCRIBE of %d topics: code %d, %s",
            server,
            len(batch),
            code,
            remark or "",
        )
        return self.failed(batch, cause)

    def unreadable(self, server: str, remark: str) -> list[Action]:
        """A SUBSCRIBE ack whose body cannot be read."""
        self._counters["subscribe_refused"] += 1
        self._session.paced.warning("ack", "malformed SUBSCRIBE ack from %s: %s", server, remark)
        out: list[Action] = []
        self._set_healthy(False, out)
        return out

    def failed(self, batch: Sequence[str], cause: str) -> list[Action]:
        """A SUBSCRIBE that got no answer (timeout, connection lost) or was refused."""
        out: list[Action] = []
        self._set_healthy(False, out)
        if cause == RECONNECT:
            is_held = self._held.is_held
            out.extend(Refetch(topic, RECONNECT) for topic in batch if is_held(topic))
        return out

    # -- timers --------------------------------------------------------------------------------

    def version_check(self) -> list[Action]:
        """Re-SUBSCRIBE held topics: the ack's versions reveal changes push did not deliver."""
        if not self._healthy or self._unsupported:
            return []
        held = self._held.held()
        if not held:
            return []
        self._counters["version_checks"] += 1
        return [SendSubscribe(tuple(sorted(held)), VERSION_CHECK)]

    def poll(self) -> list[Action]:
        """The safety net, on a connection: refetch every held topic (absences only once
        their TTL is over) and subscribe what a failed SUBSCRIBE left out.

        While push is not known to work (a SUBSCRIBE, a version check included, timed out or
        was refused), every held topic is subscribed again, not only those never
        acknowledged: whether the server still holds the others is unknown, and only an
        acknowledged SUBSCRIBE makes push healthy again (and version checks run again)."""
        self._counters["polls"] += 1
        now = self._now_ms()
        absent = self._negative.is_absent
        held = self._held.held()
        out: list[Action] = [Refetch(t, POLL) for t in held if not absent(t, now)]
        if not self._unsupported:
            again = held if not self._healthy else [t for t in held if t not in self._subscribed]
            if again:
                out.append(SendSubscribe(tuple(sorted(again)), SUBSCRIBE))
        return out

    def dropped(self, gone: Iterable[str]) -> list[Action]:
        """Topics no longer held (expired or released): unsubscribe the subscribed ones."""
        gone = list(gone)
        self._to_subscribe.difference_update(gone)
        subscribed = [t for t in gone if t in self._subscribed]
        self._subscribed.difference_update(subscribed)
        return [SendUnsubscribe(tuple(sorted(subscribed)))] if subscribed else []

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _set_healthy(self, healthy: bool, out: list[Action]) -> None:
        if healthy != self._healthy:
            self._healthy = healthy
            out.append(SetPushHealthy(healthy))
