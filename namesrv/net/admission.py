"""Which connections are let in: the per-server and per-host bounds, making room at the
total bound, and running out of file descriptors.

The bounds are checked when a connection is made; a refused one is counted and logged
(paced) and closes itself. At the total bound a few hosts must not lock every other out:
:meth:`Admission.make_room` names an idle connection of a busier host to close in the
newcomer's favour (the caller closes it), a subscribed one only when the busier hosts have no
other that may go: subscribing does not buy a host more than its share of the total.

The kernel refuses connections on its own once the process has no file descriptors left,
and Twisted reports that only to its own log: an observer of that log
(:meth:`Admission.twisted_log_event`) gives the operator one error per episode, and one line
when connections are accepted again. Connections the kernel queued meanwhile are accepted as
soon as some close and may run the descriptors out again at once: refusals within
:data:`FD_RELAPSE_S` of an episode's end resume it, with no second error.
"""

from __future__ import annotations

import logging
import resource
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from twisted.logger import ILogObserver, globalLogPublisher

from namesrv.config import ServerConfig
from protocol.paced_log import PacedLog

if TYPE_CHECKING:
    from namesrv.net.connection import NamesrvConnection

log = logging.getLogger(__name__)

FD_HEADROOM = 64
"""File descriptors the process needs besides its connections (files, the journal, ports)."""

FD_RELAPSE_S = 60.0
"""Refusals this soon after a file-descriptor episode ended resume it (see the module's text)."""

NO_ROOM_RETRY_MS = 1_000
"""After a search for a connection to close found none, newcomers from hosts holding as many
connections or more are refused without searching again for this long: a search reads every
connection of the busier hosts, and refused newcomers must not cost that each."""


class Admission:
    """The open connections, by id, and the bounds on how many there may be."""

    def __init__(
        self,
        config: ServerConfig,
        counters: Counter[str],
        peer_log: PacedLog,
        may_evict: Callable[[NamesrvConnection], bool] | None = None,
        subscribed: Callable[[NamesrvConnection], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        """``may_evict`` tells whether a connection may be closed to admit another at the
        total bound; None: none may (a newcomer past the bound is refused). A connection for
        which ``subscribed`` is true goes only after the others that may go. ``clock`` tells
        seconds."""
        self._config = config
        self._counters = counters
        self._peer_log = peer_log
        self._may_evict = may_evict
        self._subscribed = subscribed
        self.connections: dict[int, NamesrvConnection] = {}
        """Admitted connections not lost yet, in the order they were admitted."""
        self._of_host: dict[str, dict[int, NamesrvConnection]] = {}
        """host → its admitted connections (never empty)."""
        self._no_room: tuple[int, int] | None = None
        """(until ms, host count): the last search for room found none for newcomers whose
        host held that many connections."""
        self._fd_episode_refused = 0
        """Connections the kernel or Twisted refused since file descriptors ran out; 0: none."""
        self._fd_episode_ends_below = 1
        """Open connections below which an accepted one ends the episode."""
        self._fd_episode_ended_at: float | None = None
        """When the last episode ended (``clock`` seconds); None: none has."""
        self._fd_relapsed = False
        """The current episode resumed one that had ended: its end is a paced line."""
        self._clock = clock
        self._observer = cast(ILogObserver, self.twisted_log_event)

    def start(self) -> None:
        """Watch Twisted's log for refused accepts; warn when the descriptor limit is below
        what ``server.max_connections`` needs."""
        globalLogPublisher.addObserver(self._observer)
        limit = self._config.max_connections
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < limit + FD_HEADROOM:
            log.warning(
                "the file-descriptor limit (%d) is below server.max_connections=%d plus what "
                "the process needs: connections past it fail at accept, not at the bound; "
                "raise `ulimit -n` or lower server.max_connections",
                soft,
                limit,
            )

    def stop(self) -> None:
        globalLogPublisher.removeObserver(self._observer)

    def admit(self, conn: NamesrvConnection) -> bool:
        """Admit ``conn`` unless a connection bound is reached (then it is refused, counted)."""
        if self._fd_episode_refused and len(self.connections) < self._fd_episode_ends_below:
            self._fd_episode_ended()
        cfg = self._config
        hosted = self._of_host.get(conn.host)
        on_host = len(hosted) if hosted is not None else 0
        if len(self.connections) >= cfg.max_connections:
            bound = f"server.max_connections={cfg.max_connections}"
        elif on_host >= cfg.max_connections_per_host:
            bound = f"server.max_connections_per_host={cfg.max_connections_per_host}"
        else:
            self.connections[conn.conn_id] = conn
            if hosted is None:
                hosted = self._of_host[conn.host] = {}
            hosted[conn.conn_id] = conn
            self._counters["connections_opened"] += 1
            return True
        kind = bound.split("=")[0].split(".")[1]
        self._counters[f"connections_refused.{kind}"] += 1
        self._peer_log.warning(
            f"refused.{kind}", "refused a connection from %s: %s reached", conn.peer, bound
        )
        return False

    def release(self, conn: NamesrvConnection) -> bool:
        """Forget ``conn``; False when it was not admitted (or is forgotten already)."""
        if self.connections.pop(conn.conn_id, None) is None:
            return False
        hosted = self._of_host.get(conn.host)
        if hosted is not None:
            hosted.pop(conn.conn_id, None)
            if not hosted:
                del self._of_host[conn.host]
        self._counters["connections_closed"] += 1
        return True

    @property
    def full(self) -> bool:
        """The total bound is reached: a newcomer is admitted only if room is made."""
        return len(self.connections) >= self._config.max_connections

    def make_room(self, newcomer: NamesrvConnection, now_ms: int) -> NamesrvConnection | None:
        """At the total bound, the connection to close so that ``newcomer`` may be admitted,
        counted and logged; the caller closes and releases it. None: no room is made.

        The rule: among the hosts holding at least two connections more than the newcomer's
        (so that, once the newcomer is in, its host holds no more than the victim's), the
        busiest first (hosts holding as many together), the victim is the connection idle
        longest (oldest last request) for which ``may_evict`` holds, unsubscribed ones first,
        then subscribed ones (a subscriber owes no traffic, but holding subscriptions must not
        let a host keep more than its share). A newcomer whose host is at its per-host bound
        is never given room (it is refused for that bound)."""
        if self._may_evict is None or not self.full:
            return None
        hosted = self._of_host.get(newcomer.host)
        on_host = len(hosted) if hosted is not None else 0
        if on_host >= self._config.max_connections_per_host:
            return None
        no_room = self._no_room
        if no_room is not None and now_ms < no_room[0] and on_host >= no_room[1]:
            return None
        found = self._victim(on_host)
        if found is None:
            self._no_room = (now_ms + NO_ROOM_RETRY_MS, on_host)
            return None
        self._no_room = None
        victim, count = found
        self._evicted(victim, count, newcomer, on_host, now_ms)
        return victim

    def _victim(self, on_host: int) -> tuple[NamesrvConnection, int] | None:
        """The connection to evict for a newcomer whose host holds ``on_host``, with how many
        its host holds (``make_room``'s rule); None: no host may give one."""
        assert self._may_evict is not None
        # Hosts by how many they hold, the busiest first; hosts holding as many are one rank.
        busier: dict[int, list[dict[int, NamesrvConnection]]] = {}
        for conns in self._of_host.values():
            if len(conns) >= on_host + 2:
                busier.setdefault(len(conns), []).append(conns)
        may_evict = self._may_evict
        subscribed = self._subscribed

        def rank(conn: NamesrvConnection) -> tuple[bool, int]:
            held = subscribed is not None and bool(subscribed(conn))
            return held, conn.last_request_ms

        for count in sorted(busier, reverse=True):
            hosts = busier[count]
            victim = min(
                (c for conns in hosts for c in conns.values() if may_evict(c)),
                key=rank,
                default=None,
            )
            if victim is not None:
                return victim, count
        return None

    def _evicted(
        self,
        victim: NamesrvConnection,
        count: int,
        newcomer: NamesrvConnection,
        on_host: int,
        now_ms: int,
    ) -> None:
        """Count and log the eviction of ``victim`` (its host holds ``count``)."""
        self._counters["connections_evicted.max_connections"] += 1
        held = self._subscribed is not None and bool(self._subscribed(victim))
        if held:
            self._counters["subscribers_evicted"] += 1
        self._peer_log.warning(
            "evicted.max_connections",
            "closing connection %s from %s%s, idle %d ms, to admit one from %s: "
            "server.max_connections=%d reached and %s holds %d connections, %s holds %d",
            victim.conn_id,
            victim.peer,
            " (subscribed)" if held else "",
            now_ms - victim.last_request_ms,
            newcomer.peer,
            self._config.max_connections,
            victim.host,
            count,
            newcomer.host,
            on_host,
        )

    def twisted_log_event(self, event: dict[str, Any]) -> None:
        """Twisted reports accept() failures (file descriptors out) only to its own log."""
        text = str(event.get("log_format") or "")
        if not text.startswith(("EMFILE encountered", "Could not accept new connection")):
            return
        self._counters["accept_failures"] += 1
        if self._fd_episode_refused == 0:
            # The episode ends once a tenth of the connections it started with have gone: an
            # accept that squeezes through while the limit is still in reach starts no new one.
            self._fd_episode_ends_below = max(1, len(self.connections) * 9 // 10)
            ended = self._fd_episode_ended_at
            self._fd_relapsed = ended is not None and self._clock() - ended < FD_RELAPSE_S
            if not self._fd_relapsed:
                soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                log.error(
                    "cannot accept new connections: this process is out of file descriptors "
                    "(limit %d, %d connections open); they are refused until some close. "
                    "Raise `ulimit -n` or lower server.max_connections",
                    soft,
                    len(self.connections),
                )
        self._fd_episode_refused += 1

    def _fd_episode_ended(self) -> None:
        """One line per episode; the ends of relapses are paced, a storm's flapping shows as
        a count."""
        msg = "accepting connections again; %d were refused while file descriptors ran out"
        if self._fd_relapsed:
            self._peer_log.warning("accepting_again", msg, self._fd_episode_refused)
        else:
            log.warning(msg, self._fd_episode_refused)
        self._fd_episode_refused = 0
        self._fd_episode_ended_at = self._clock()
