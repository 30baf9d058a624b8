"""The route client, written once for every event loop: cached routes kept fresh by push,
with polling as the safety net.

This class is the client's face over the runtime (``client_push.runtime.interface``): lookups,
listeners, ``changes()`` streams, inspection. Keeping the routes fresh is ``PushRunner``'s: it
holds the link, hands what the name server says to the sans-I/O ``PushSession`` and
``Subscriptions`` (route-push contract v1, docs/protocol-extension.md) and carries out the
actions they return. Twisted's ``client_push.routes.client.RouteClient`` and
``client_push.aio.RouteClient`` are this class with their loop's adapter and public face.
"""

from __future__ import annotations

import os
import random
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from client_push.config import ClientConfig
from client_push.errors import ClientStoppedError, RouteClientError
from client_push.routes.changes import RouteChanges
from client_push.routes.events import (
    CACHED,
    FIRST,
    BrokerListener,
    Listeners,
    RouteListener,
)
from client_push.routes.push_runner import PushRunner, UnknownActionError
from client_push.routes.route_cache import CachedRoute, PublishInfo
from client_push.routes.telemetry import TelemetrySink, open_telemetry
from client_push.runtime.interface import Runtime
from client_push.wire.remoting import Deadline

__all__ = ["RouteClientCore", "UnknownActionError", "client_identity"]


def client_identity(config: ClientConfig) -> dict[str, str]:
    """What every telemetry line names the client by (docs/telemetry.md)."""
    host = socket.gethostname()
    return {"client_id": config.client_id or f"{host}@{os.getpid()}", "host": host}


class RouteClientCore:
    """Holds topic routes for the producers and consumers of one process."""

    def __init__(
        self,
        config: ClientConfig,
        runtime: Runtime,
        rng: random.Random | None = None,
        telemetry: TelemetrySink | None = None,
        *,
        must_start: bool = False,
    ) -> None:
        """``must_start``: lookups before ``start`` are an error (asyncio) rather than waiting
        for it (Twisted)."""
        self.config = config
        self._runtime = runtime
        self._must_start = must_start
        self._rng = rng or random.Random()
        self.counters: Counter[str] = Counter()
        identity = client_identity(config)
        self._telemetry = (
            telemetry
            if telemetry is not None
            else open_telemetry(config.telemetry_path, config.telemetry_memory_bytes, identity)
        )
        self._listeners = Listeners(self.counters)
        self._streams: set[RouteChanges] = set()
        self._push = push = PushRunner(
            config,
            runtime,
            self._rng,
            self._telemetry,
            self._listeners,
            counters=self.counters,
            client_id=identity["client_id"],
        )
        # What lookups read and start, named once.
        self._link = push.link
        self._routes = push.routes
        self._cache = push.routes.cache
        self._negative = push.routes.negative
        self._fetches = push.fetches
        self._subscriptions = push.subscriptions
        self._run = push.run
        self._started = False
        self._stopped = False

    @property
    def runtime(self) -> Runtime:
        """The event loop and clock the client runs on (a producer's default)."""
        return self._runtime

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Connect and start the poll, expiry and version-check timers; lookups made earlier
        (where the loop allows them) are fetched now."""
        if self._started:
            return
        self._started = True
        self._push.start()
        for topic in self._cache.held():
            if topic not in self._cache and topic not in self._routes.absent:
                self._fetches.fetch(topic, FIRST)

    async def _close(self) -> None:
        """Stop timers, fail waiting lookups with ``ClientStoppedError``, end every
        ``changes()`` stream and close connections, within ``close_timeout_ms``."""
        if self._stopped:
            return
        self._stopped = True
        deadline = Deadline(self._runtime, self.config.close_timeout_ms)
        for stream in list(self._streams):
            stream.close()
        try:
            await self._push.stop(deadline)
        finally:
            self._telemetry.close()

    # -- lookups -------------------------------------------------------------------------------

    async def get_route(self, topic: str) -> CachedRoute:
        """The held route of ``topic``, fetched on first use.

        Concurrent first lookups share one request (upstream #4561). A topic remembered as
        absent raises ``TopicNotExistError`` at once, without a request, until its TTL ends.
        A lookup cancelled while the first fetch is in flight takes back what it started:
        with no other caller its request is dropped and the topic is not held any more.
        """
        entry = self._cached(topic)
        if entry is not None:
            return entry
        made_held = self._miss(topic)
        fetch = self._fetches.fetch(topic, FIRST)
        try:
            return await self._fetches.wait(fetch)
        except self._runtime.cancelled_error:
            self.counters["lookups_cancelled"] += 1
            if (
                made_held
                and not fetch.waiters
                and self._cache.peek(topic) is None
                and topic not in self._routes.absent
                and topic not in self._listeners.topics()
            ):
                self._push.release([topic])
            self._fetches.drop_if_unwanted(fetch)
            raise

    async def get_publish_info(self, topic: str) -> PublishInfo:
        """The queues a producer may send ``topic`` to (write perm and a master required)."""
        return (await self.get_route(topic)).publish_info

    def changes(self, topics: Iterable[str]) -> RouteChanges:
        """An async iterator of the route states learned for ``topics`` from now on, starting
        with the ones already held; at most one unread state per topic (the newest)."""
        self._check_started()
        wanted = list(dict.fromkeys(topics))
        for topic in wanted:
            self._check_usable(topic)
        removers: list[Callable[[], None]] = []
        made_held: dict[str, int | None] = {}

        def close() -> None:
            self._streams.discard(stream)
            for remove in removers:
                remove()
            if self._stopped:
                return
            listened = self._listeners.topics()
            alone = [
                t
                for t, at in made_held.items()
                if t not in listened and self._cache.last_access_ms(t) == at
            ]
            if alone:
                self._push.release(alone)

        stream = RouteChanges(self._runtime, close)
        self._streams.add(stream)
        for topic in wanted:
            new = not self._cache.is_held(topic)
            removers.append(self.add_listener(topic, stream.offer))
            if new:
                made_held[topic] = self._cache.last_access_ms(topic)
        return stream

    def add_listener(self, topic: str, callback: RouteListener) -> Callable[[], None]:
        """Call ``callback`` with every route state learned for ``topic``; returns a remover.

        The state already held is replayed at once (cause ``cached``); a topic not held yet is
        fetched. A topic with listeners never expires.
        """
        self._check_started()
        remove, unknown = self._listen(topic, callback)
        if unknown and self._started:
            self._fetches.fetch(topic, FIRST)
        return remove

    def add_broker_listener(self, callback: BrokerListener) -> Callable[[], None]:
        """Call ``callback`` with every broker arrival or departure announced; returns a remover.

        Departures are reported after every held route has dropped the broker, so a producer
        reacting to one already sees routes without it.
        """
        return self._listeners.add_broker(callback)

    def update_namesrv_addrs(self, addrs: Sequence[str]) -> None:
        """Replace the name-server list; a changed list picks a server afresh and moves there."""
        self._check_started()
        self._link.update_addrs(addrs)

    def outstanding(self) -> dict[str, int]:
        """What the client has in flight or armed, table by table (for tests and debugging):
        a cancelled lookup or a closed stream leaves none of it behind."""
        link = self._link
        return {
            "requests": sum(conn.pending for conn in link.connections),
            "request_bytes": sum(conn.pending_bytes for conn in link.connections),
            "held_back_writes": sum(conn.held_back for conn in link.connections),
            "waiting_for_connection": link.waiting,
            "fetches": len(self._fetches.inflight),
            "fetch_tasks": len(self._fetches.requests),
            "fetch_waiters": sum(len(f.waiters) for f in self._fetches.inflight.values()),
            "push_requests": len(self._push.requests.tasks),
            "route_listeners": len(self._listeners.topics()),
            "streams": len(self._streams),
            "held_topics": len(self._cache.held()),
            "subscribed": self._subscriptions.count,
            "timers": sum(timer.active for timer in self._push.timers) + link.reconnect_pending,
        }

    def _check_started(self) -> None:
        if self._must_start and not self._started:
            raise RouteClientError("route client not started: use `async with RouteClient(...)`")

    def _now_ms(self) -> int:
        if self._must_start and not self._started:
            self._check_started()
        return int(self._runtime.clock.time() * 1000)

    # -- lookups and listeners -------------------------------------------------------------

    def _cached(self, topic: str) -> CachedRoute | None:
        """The held route of ``topic``, counted as a hit; None when it must be fetched (then
        ``_miss``). The hot path: no more calls than it needs."""
        if self._stopped or not topic:
            self._check_usable(topic)
        entry = self._cache.get(topic, self._now_ms())
        if entry is not None:
            self.counters["lookup_hits"] += 1
        return entry

    def _miss(self, topic: str) -> bool:
        """A lookup found no route: hold the topic; True when this lookup made it held.
        ``TopicNotExistError`` while an absence is believed."""
        now = self._now_ms()
        made_held = self._cache.touch(topic, now)
        if made_held:
            self._push.requests.want(topic)
        self._negative.check(topic, now)
        self.counters["lookup_misses"] += 1
        return made_held

    def _listen(self, topic: str, callback: RouteListener) -> tuple[Callable[[], None], bool]:
        """Add a listener and replay the state held (cause ``cached``); (the remover, whether
        the topic's state is unknown and must be fetched)."""
        self._check_usable(topic)
        remove = self._listeners.add_route(topic, callback)
        now = self._now_ms()
        if self._cache.touch(topic, now):
            self._push.requests.want(topic)
        entry = self._cache.peek(topic)
        if entry is not None:
            callback(self._routes.event(topic, True, entry.version, entry, CACHED, now))
        elif topic in self._routes.absent:
            callback(self._routes.event(topic, False, 0, None, CACHED, now))
        else:
            return remove, True
        return remove, False

    def _check_usable(self, topic: str) -> None:
        if self._stopped:
            raise ClientStoppedError("route client stopped")
        if not topic:
            raise ValueError("topic must not be empty")

    # -- inspection ----------------------------------------------------------------------------

    @property
    def namesrv(self) -> str:
        return self._link.addr

    @property
    def connected(self) -> bool:
        return self._link.current is not None

    @property
    def push_active(self) -> bool:
        """True while the current name server has acknowledged our subscriptions."""
        return self._subscriptions.push_healthy

    def held_topics(self) -> list[str]:
        return self._cache.held()

    def cached_route(self, topic: str) -> CachedRoute | None:
        """The held route without counting an access (for inspection, not for sending)."""
        return self._cache.peek(topic)

    def stats(self) -> dict[str, int | str | bool]:
        out: dict[str, int | str | bool] = dict(self.counters)
        out.update(
            held_topics=len(self._cache.held()),
            cached_routes=len(self._cache),
            negative_entries=len(self._negative),
            negative_hits=self._negative.hits,
            stale_routes=self._routes.stale_count,
            untrusted_retries_pending=self._push.schedule.backing_off,
            namesrv_warming=self._subscriptions.server_warming,
            subscribed=self._subscriptions.count,
            push_active=self._subscriptions.push_healthy,
            namesrv=self._link.addr,
            connects=self._link.connects,
            connect_failures=self._link.connect_failures,
        )
        out.update({f"wire.{k}": v for k, v in self._link.counters.items()})
        return out
