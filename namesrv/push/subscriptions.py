"""Which connection wants route-change notifications for which topic.

Pure bookkeeping, both directions indexed so a change finds its subscribers and a closing
connection releases its topics without scanning anything else. Connections are opaque hashable keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet

from namesrv.push.subscriber import Subscriber
from protocol.codes import ResponseCode
from protocol.errors import ProtocolError
from protocol.topic_name import topic_name_problem

_EMPTY: frozenset = frozenset()


class SubscriptionError(ProtocolError):
    """A subscribe request that cannot be honoured; nothing of it was applied."""

    def __init__(self, remark: str, code: int = ResponseCode.INVALID_PARAMETER) -> None:
        super().__init__(remark, code)


def validate_topic_name(topic: str) -> None:
    """Raise ``SubscriptionError`` unless ``topic`` is a name upstream would accept."""
    problem = topic_name_problem(topic)
    if problem is not None:
        raise SubscriptionError(problem)


class SubscriptionRegistry:
    """Topic <-> connection subscriptions, bounded per connection, per remote host and in total.

    The per-host bound is what keeps the total a shared budget: without it one client could
    open connections until the total is spent and every other client's SUBSCRIBE is refused.
    """

    def __init__(
        self,
        max_topics_per_connection: int,
        max_total_subscriptions: int,
        max_subscriptions_per_host: int | None = None,
    ) -> None:
        self._max_per_connection = max_topics_per_connection
        self._max_total = max_total_subscriptions
        self._max_per_host = max_subscriptions_per_host or max_total_subscriptions
        self._by_topic: dict[str, set[Subscriber]] = {}
        self._by_connection: dict[Subscriber, set[str]] = {}
        self._host_of: dict[Subscriber, str] = {}
        self._by_host: dict[str, int] = {}
        self._total = 0
        self._inline: dict[Subscriber, tuple[bool, bool]] = {}
        """connection → the body form of the inline routes it asked for (standard JSON, 4.9.x
        shape); one entry per connection at most, dropped with the connection."""

    def subscribe(
        self, conn: Subscriber, topics: Iterable[str], host: str | None = None
    ) -> list[str]:
        """Add ``topics`` for ``conn`` (from remote ``host``); returns the new ones, in order.

        Idempotent, and topics need not exist yet. Every name and every bound is checked before
        anything changes, so a refused request leaves the connection's subscriptions as they were.
        """
        requested = list(dict.fromkeys(topics))
        if not requested:
            raise SubscriptionError("subscribe names no topic")
        for topic in requested:
            validate_topic_name(topic)
        held = self._by_connection.get(conn, _EMPTY)
        added = [topic for topic in requested if topic not in held]
        if len(held) + len(added) > self._max_per_connection:
            raise SubscriptionError(
                f"subscribing {len(added)} more topics would give this connection "
                f"{len(held) + len(added)}, over max_topics_per_connection="
                f"{self._max_per_connection}"
            )
        if self._total + len(added) > self._max_total:
            raise SubscriptionError(
                f"subscribing {len(added)} more topics would make {self._total + len(added)} "
                f"subscriptions in total, over max_total_subscriptions={self._max_total}"
            )
        host = self._host_of.get(conn, host)
        if host is not None:
            on_host = self._by_host.get(host, 0)
            if on_host + len(added) > self._max_per_host:
                raise SubscriptionError(
                    f"subscribing {len(added)} more topics would give host {host} "
                    f"{on_host + len(added)} subscriptions, over max_subscriptions_per_host="
                    f"{self._max_per_host}"
                )
        if not added:
            return added
        mine = self._by_connection.setdefault(conn, set())
        for topic in added:
            mine.add(topic)
            self._by_topic.setdefault(topic, set()).add(conn)
        self._total += len(added)
        if host is not None:
            self._host_of[conn] = host
            self._by_host[host] = self._by_host.get(host, 0) + len(added)
        return added

    def host_total(self, host: str) -> int:
        """Subscriptions held by the connections of ``host``."""
        return self._by_host.get(host, 0)

    def unsubscribe(self, conn: Subscriber, topics: Iterable[str]) -> list[str]:
        """Remove ``topics`` for ``conn``; returns the ones it actually held."""
        mine = self._by_connection.get(conn)
        if mine is None:
            return []
        removed = [topic for topic in dict.fromkeys(topics) if topic in mine]
        for topic in removed:
            mine.discard(topic)
            self._release(conn, topic)
        self._release_host(conn, len(removed), forget=not mine)
        if not mine:
            del self._by_connection[conn]
        return removed

    def set_inline(self, conn: Subscriber, form: tuple[bool, bool] | None) -> None:
        """Whether ``conn`` gets inline routes, and in which body form (standard JSON, 4.9.x
        shape) as GET_ROUTEINFO would answer it; None: plain notifications only."""
        if form is None:
            self._inline.pop(conn, None)
        else:
            self._inline[conn] = form

    def inline_form(self, conn: Subscriber) -> tuple[bool, bool] | None:
        return self._inline.get(conn)

    @property
    def inline_connections(self) -> int:
        """Connections that asked for inline routes."""
        return len(self._inline)

    def drop_connection(self, conn: Subscriber) -> list[str]:
        """Forget every subscription of a closed connection; returns the topics it held."""
        self._inline.pop(conn, None)
        mine = self._by_connection.pop(conn, None)
        if mine is None:
            return []
        for topic in mine:
            self._release(conn, topic)
        self._release_host(conn, len(mine), forget=True)
        return sorted(mine)

    def subscribers(self, topic: str) -> AbstractSet[Subscriber]:
        """The connections subscribed to ``topic``: a live view, copy it before mutating."""
        return self._by_topic.get(topic, _EMPTY)

    def subscribed_among(self, topics: Iterable[str]) -> set[str]:
        """Those of ``topics`` somebody subscribes to (a C-level intersection)."""
        return self._by_topic.keys() & topics if self._by_topic else set()

    def topics_of(self, conn: Subscriber) -> AbstractSet[str]:
        """The topics ``conn`` is subscribed to: a live view, copy it before mutating."""
        return self._by_connection.get(conn, _EMPTY)

    def is_subscribed(self, conn: Subscriber, topic: str) -> bool:
        return topic in self._by_connection.get(conn, _EMPTY)

    def figures(self) -> dict[str, int]:
        """The subscriptions' figures for the server's stats."""
        return {"subscriptions": self._total, "subscribed_connections": self.connection_count}

    @property
    def total(self) -> int:
        """(connection, topic) pairs."""
        return self._total

    @property
    def connection_count(self) -> int:
        return len(self._by_connection)

    @property
    def topic_count(self) -> int:
        return len(self._by_topic)

    def _release_host(self, conn: Subscriber, count: int, *, forget: bool) -> None:
        host = self._host_of.pop(conn, None) if forget else self._host_of.get(conn)
        if host is None:
            return
        left = self._by_host.get(host, 0) - count
        if left > 0:
            self._by_host[host] = left
        else:
            self._by_host.pop(host, None)

    def _release(self, conn: Subscriber, topic: str) -> None:
        conns = self._by_topic[topic]
        conns.discard(conn)
        if not conns:
            del self._by_topic[topic]
        self._total -= 1
