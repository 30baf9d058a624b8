"""Which connections are let in: the per-server and per-host bounds, and running out of
file descriptors.

The bounds are checked when a connection is made; a refused one is counted and logged
(paced) and closes itself. The kernel refuses connections on its own once the process has
no file descriptors left, and Twisted reports that only to its own log: an observer of that
log (:meth:`Admission.twisted_log_event`) gives the operator one error per episode, and one
line when connections are accepted again.
"""

from __future__ import annotations

import logging
import resource
from collections import Counter
from typing import TYPE_CHECKING, Any, cast

from twisted.logger import ILogObserver, globalLogPublisher

from namesrv.config import ServerConfig
from namesrv.ops.log_limit import RateLimitedLog

if TYPE_CHECKING:
    from namesrv.net.connection import NamesrvConnection

log = logging.getLogger(__name__)

FD_HEADROOM = 64
"""File descriptors the process needs besides its connections (files, the journal, ports)."""


class Admission:
    """The open connections, by id, and the bounds on how many there may be."""

    def __init__(self, config: ServerConfig, counters: Counter[str], peer_log: RateLimitedLog):
        self._config = config
        self._counters = counters
        self._peer_log = peer_log
        self.connections: dict[int, NamesrvConnection] = {}
        """Admitted connections not lost yet, in the order they were admitted."""
        self._of_host: dict[str, int] = {}
        self._fd_episode_refused = 0
        """Connections the kernel or Twisted refused since file descriptors ran out; 0: none."""
        self._fd_episode_ends_below = 1
        """Open connections below which an accepted one ends the episode."""
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
            log.warning(
                "accepting connections again; %d were refused while file descriptors ran out",
                self._fd_episode_refused,
            )
            self._fd_episode_refused = 0
        cfg = self._config
        on_host = self._of_host.get(conn.host, 0)
        if len(self.connections) >= cfg.max_connections:
            bound = f"server.max_connections={cfg.max_connections}"
        elif on_host >= cfg.max_connections_per_host:
            bound = f"server.max_connections_per_host={cfg.max_connections_per_host}"
        else:
            self.connections[conn.conn_id] = conn
            self._of_host[conn.host] = on_host + 1
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
        left = self._of_host.get(conn.host, 0) - 1
        if left > 0:
            self._of_host[conn.host] = left
        else:
            self._of_host.pop(conn.host, None)
        self._counters["connections_closed"] += 1
        return True

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
            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            log.error(
                "cannot accept new connections: this process is out of file descriptors "
                "(limit %d, %d connections open); they are refused until some close. "
                "Raise `ulimit -n` or lower server.max_connections",
                soft,
                len(self.connections),
            )
        self._fd_episode_refused += 1
