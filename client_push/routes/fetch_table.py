"""Route requests in flight: one GET_ROUTEINFO_BY_TOPIC per topic, shared by every caller.

Pure: no I/O, no event loop. A fetch asked for while one of the same topic is in flight joins
it (upstream #4561) and remembers why, so a reason that arrives while the answer may already be
on its way fetches once more after it. Answers are taken through ``HeldRoutes`` and checked
against the push session's local changes.

An answer that would leave a held topic with no broker keeps its route, stale, and is returned
as if it were the answer (``HeldRoutes.keep_stale``): only ``topicDeleted=true`` drops it. An
answer that cannot be trusted (an error, a failed request, an absence from a name server
warming up) marks its fetch ``untrusted``; the glue then asks the session to retry it with
backoff (``PushSession.untrusted``); a trusted one ends the topic's backoff
(``RefetchSchedule.trusted``). The glue (Twisted's ``RouteFetches``, asyncio's
``client_push.aio.fetches``) sends the request this table asks for and settles the waiters it
hands back; a waiter is whatever the glue waits on (a Deferred, a Future).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from client_push.errors import (
    NameServerError,
    RouteClientError,
    TopicNotExistError,
)
from client_push.routes.events import UNCONDITIONAL, Listeners, log
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.push_actions import Refetch
from client_push.routes.push_session import PushSession, needs_refetch
from client_push.routes.refetch_schedule import RefetchSchedule
from client_push.routes.route_cache import CachedRoute, RouteTooLargeError
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand

W = TypeVar("W")


class Fetch(Generic[W]):
    """One GET_ROUTEINFO_BY_TOPIC in flight, shared by every caller that wants that topic."""

    __slots__ = (
        "cause",
        "done",
        "follow_up",
        "notified_at_ms",
        "outcome",
        "requested_at_ms",
        "started",
        "topic",
        "untrusted",
        "waiters",
    )

    def __init__(
        self, topic: str, cause: str, notified_at_ms: int | None, now_ms: int, started: int
    ) -> None:
        self.started = started
        """Order of creation: tells a fetch sent before a local change from one sent after."""
        self.topic = topic
        self.cause = cause
        self.notified_at_ms = notified_at_ms
        self.requested_at_ms = now_ms
        self.waiters: list[W] = []
        self.done = False
        self.outcome: CachedRoute | Exception | None = None
        self.untrusted = False
        """The answer said nothing about the topic: ask again after a backoff."""
        self.follow_up: tuple[str, int | None, int | None] | None = None
        """(cause, notified_at_ms, wanted version or None for "always") of a reason to fetch
        again that arrived while this fetch was in flight, whose answer may predate it."""

    def add_reason(self, cause: str, notified_at_ms: int | None, wanted: int | None) -> None:
        if cause in UNCONDITIONAL:
            self.follow_up = (cause, notified_at_ms, None)
        elif wanted is not None:
            current = self.follow_up
            if current is None or (current[2] is not None and wanted > current[2]):
                self.follow_up = (cause, notified_at_ms, wanted)


def route_request(topic: str) -> RemotingCommand:
    """The GET_ROUTEINFO_BY_TOPIC a fetch sends (standard JSON asked for, as upstream 5.x)."""
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": topic, "acceptStandardJsonOnly": "true"},
    )


class FetchTable(Generic[W]):
    """The fetches in flight (``inflight``: topic → ``Fetch``) and what their answers do."""

    def __init__(
        self,
        routes: HeldRoutes,
        session: PushSession,
        schedule: RefetchSchedule,
        listeners: Listeners,
        *,
        counters: Counter[str],
        marks: Iterator[int],
        warming: Callable[[], bool],
    ) -> None:
        """``warming``: whether the current name server is in its start-up window."""
        self._routes = routes
        self._cache = routes.cache
        self._session = session
        self._schedule = schedule
        self._warming = warming
        self._listeners = listeners
        self._counters = counters
        self._marks = marks
        self._paced = session.paced
        self.inflight: dict[str, Fetch[W]] = {}
        self._awaited: dict[str, tuple[int, int]] = {}
        """topic → (version a fetch must reach, mark at the change) for routes changed here
        by a departure: an answer to a fetch sent earlier and older than that is stale."""
        self.stopped = False

    def begin(
        self,
        topic: str,
        cause: str,
        now_ms: int,
        *,
        notified_at_ms: int | None = None,
        wanted_version: int | None = None,
    ) -> tuple[Fetch[W], bool]:
        """The fetch of ``topic``: (a new one, True) whose request the caller must send, or
        (the one in flight, False), which now remembers this reason too."""
        running = self.inflight.get(topic)
        if running is not None:
            self._counters["fetch_joined"] += 1
            running.add_reason(cause, notified_at_ms, wanted_version)
            return running, False
        fetch: Fetch[W] = Fetch(topic, cause, notified_at_ms, now_ms, next(self._marks))
        self.inflight[topic] = fetch
        self._counters[f"fetch.{cause}"] += 1
        return fetch, True

    def follow_up(
        self, topic: str, cause: str, notified_at_ms: int | None, wanted_version: int
    ) -> None:
        """A change the fetch of ``topic`` in flight (if any) may be answered from before."""
        running = self.inflight.get(topic)
        if running is not None:
            running.add_reason(cause, notified_at_ms, wanted_version)

    def await_version(self, topic: str, version: int) -> None:
        """A departure changed ``topic``'s route here toward ``version`` (``AwaitVersion``)."""
        self._awaited[topic] = (version, next(self._marks))

    def forget_awaited(self, topics: Iterable[str] | None = None) -> None:
        """Versions awaited for ``topics`` (all: a new connection or epoch) no longer hold."""
        if topics is None:
            self._awaited.clear()
        for topic in topics or ():
            self._awaited.pop(topic, None)

    def _answer_is_current(self, topic: str, fetch_mark: int, version: int) -> bool:
        """Whether a route answer may be taken: not when its fetch was sent before a local
        change (``fetch_mark`` earlier) and answered from before it (an older version)."""
        awaited = self._awaited.get(topic)
        if awaited is None:
            return True
        required, since = awaited
        if fetch_mark < since and version < required:
            self._counters["fetch_older_than_local"] += 1
            return False
        del self._awaited[topic]
        return True

    def stop(self) -> list[Fetch[W]]:
        """No follow-ups from now on; the fetches in flight, for the glue to fail."""
        self.stopped = True
        return list(self.inflight.values())

    def abandon(self, fetch: Fetch[W]) -> bool:
        """Drop a fetch nobody waits for any more whose topic is no longer held; True if
        dropped (its request may then be cancelled: its answer would be discarded anyway)."""
        if fetch.done or fetch.waiters or self._cache.is_held(fetch.topic):
            return False
        fetch.done = True
        fetch.outcome = RouteClientError(f"fetch of {fetch.topic} abandoned")
        if self.inflight.get(fetch.topic) is fetch:
            del self.inflight[fetch.topic]
        self._counters["fetch_abandoned"] += 1
        return True

    # -- answers -------------------------------------------------------------------------------

    def answered(
        self, fetch: Fetch[W], response: RemotingCommand, now_ms: int
    ) -> CachedRoute | Exception:
        """What a route answer makes of the fetch; whatever goes wrong here is its error,
        never a stranded fetch."""
        if fetch.done:  # stopped or abandoned meanwhile: the outcome stands
            return fetch.outcome or RouteClientError(f"fetch of {fetch.topic} ended")
        try:
            return self._take_route(response, fetch, now_ms)
        except Exception as exc:
            self._counters["internal_errors"] += 1
            log.error(
                "error handling the route of %s: %s: %s", fetch.topic, type(exc).__name__, exc
            )
            return RouteClientError(
                f"route of {fetch.topic} could not be handled: {type(exc).__name__}: {exc}"
            )

    def failed(
        self, error: Exception, fetch: Fetch[W] | None = None, now_ms: int = 0
    ) -> CachedRoute | Exception:
        """A request that got no answer (timeout, connection lost): a held route of the
        fetch's topic is kept, stale, and asked for again after a backoff."""
        self._counters["fetch_failed"] += 1
        if fetch is None or fetch.done:
            return error
        return self._unconfirmed(fetch, now_ms) or error

    def finish(
        self, fetch: Fetch[W], outcome: CachedRoute | Exception
    ) -> tuple[list[W], Refetch | None]:
        """End ``fetch``: the waiters to settle with ``outcome`` and, when a reason arrived
        meanwhile that the answer may predate, the fetch to start next (after the waiters)."""
        if fetch.done:
            return [], None
        fetch.done = True
        fetch.outcome = outcome
        if self.inflight.get(fetch.topic) is fetch:
            del self.inflight[fetch.topic]
        waiters, fetch.waiters = fetch.waiters, []
        if isinstance(outcome, Exception) and not waiters and not self.stopped:
            what = "background fetch of %s (%s) failed: %s"
            if isinstance(outcome, TopicNotExistError):
                log.debug(what, fetch.topic, fetch.cause, outcome)
            else:  # a server can fail every fetch: paced, each one counted (fetch_failed)
                self._paced.warning("fetch", what, fetch.topic[:200], fetch.cause, outcome)
        follow_up = fetch.follow_up
        if follow_up is None or self.stopped or not self._cache.is_held(fetch.topic):
            return waiters, None
        cause, notified_at, wanted = follow_up
        held = self._cache.peek(fetch.topic)
        if wanted is None or needs_refetch(held.version if held else None, wanted):
            self._counters["fetch_follow_up"] += 1
            return waiters, Refetch(fetch.topic, cause, None, notified_at)
        return waiters, None

    def _take_route(
        self, response: RemotingCommand, fetch: Fetch[W], now: int
    ) -> CachedRoute | Exception:
        topic = fetch.topic
        version = route_version(response)
        if not self._answer_is_current(topic, fetch.started, version):
            # Sent before a departure was applied locally and answered from before it.
            held = self._cache.peek(topic)
            return held or RouteClientError(f"{topic} changed while fetched")
        fields = response.ext_fields or {}
        warming = self._warming() or fields.get("warmingUp") == "true"
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return self._absent(fetch, version, now, fields.get("topicDeleted") == "true", warming)
        if response.code != ResponseCode.SUCCESS:
            what = f"GET_ROUTEINFO_BY_TOPIC {topic}"
            error = NameServerError(response.code, response.remark, what)
            kept = self._unconfirmed(fetch, now)
            if kept is None and warming:
                fetch.untrusted = True
            return kept or error
        limit = self._session.config.max_route_body_bytes
        if len(response.body or b"") > limit:
            # Refused by size before decoding: decoding runs on the event loop.
            self._counters["routes_refused"] += 1
            return RouteClientError(
                f"route of {topic} refused: its body of {len(response.body)} bytes is over "
                f"max_route_body_bytes ({limit})"
            )
        try:
            route = _decode_route(response.body)
        except ProtocolError as exc:
            return RouteClientError(f"malformed route of {topic}: {exc.remark}")
        if not self._cache.is_held(topic) and not fetch.waiters:
            self._counters["fetch_discarded_expired"] += 1
            return RouteClientError(f"topic {topic} expired while fetched")
        try:
            entry, changed = self._routes.learn_route(
                topic, route, version, fetch.cause, fetch.notified_at_ms, fetch.requested_at_ms, now
            )
        except RouteTooLargeError as exc:
            self._counters["routes_refused"] += 1
            return RouteClientError(f"route of {topic} refused: {exc}")
        if changed is not None:
            self._listeners.tell(changed)
        if entry.stale:  # an empty route, the held one kept
            self._counters["routes_kept_stale"] += changed is not None
            fetch.untrusted = warming
        else:
            self._schedule.trusted(topic)
        return entry

    def _absent(
        self, fetch: Fetch[W], version: int, now: int, deleted: bool, warming: bool
    ) -> CachedRoute | Exception:
        """TOPIC_NOT_EXIST: a held route is kept (stale) unless the topic was deleted; an
        absence is remembered only for a topic without a route, and not from a warming server."""
        topic = fetch.topic
        held = self._cache.peek(topic)
        if held is not None and not deleted:
            event = self._routes.keep_stale(topic, fetch.cause, now)
            if event is not None:
                self._counters["routes_kept_stale"] += 1
                self._listeners.tell(event)
            if warming:
                fetch.untrusted = True
            else:
                self._schedule.trusted(topic)
            return self._cache.peek(topic) or held
        if warming and not deleted:
            fetch.untrusted = True  # "not heard of yet": nothing learned
            return TopicNotExistError(topic, None, now_ms=now)
        if deleted:
            self._schedule.trusted(topic)
            self._counters["routes_dropped_deleted"] += held is not None
        event = self._routes.learn_absent(
            topic,
            version,
            fetch.cause,
            fetch.notified_at_ms,
            fetch.requested_at_ms,
            now,
            deleted=deleted,
        )
        if event is not None:
            self._listeners.tell(event)
        retry_at = self._routes.negative.retry_at(topic)
        return TopicNotExistError(topic, retry_at, now_ms=now)

    def _unconfirmed(self, fetch: Fetch[W], now: int) -> CachedRoute | None:
        """An answer that says nothing about a held topic: keep its route (stale) and ask
        again after a backoff; None when no route is held."""
        topic = fetch.topic
        if self._cache.peek(topic) is None:
            return None
        event = self._routes.keep_stale(topic, fetch.cause, now)
        if event is not None:
            self._counters["routes_kept_stale"] += 1
            self._listeners.tell(event)
        fetch.untrusted = True
        return self._cache.peek(topic)


def route_version(response: RemotingCommand) -> int:
    """``routeVersion`` of a route answer; upstream name servers send none (unknown: 0)."""
    text = (response.ext_fields or {}).get("routeVersion", "")
    try:
        return max(0, int(text))
    except ValueError:
        return 0


def _decode_route(body: bytes) -> Any:
    from protocol.bodies import decode_route

    return decode_route(body)
