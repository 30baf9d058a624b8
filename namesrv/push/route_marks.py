"""Where a touched route is heard: the answers derived from it are dropped, and the change
detector marks it.

The registry reports the topics each mutation touched, with its cause; an order conf in the
KV config is part of a route only while order messages are on, so its change touches the
topic then; switching order messages on or off at run time moves every topic with an order
conf, reported by the registry in slices as a large register's table is applied.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

from namesrv.push.change_detector import ChangeDetector
from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.registry import RouteRegistry
from namesrv.routes.route_bodies import ORDER_TOPIC_CONFIG_NAMESPACE, RouteBodies

ORDER_SWITCH = "order_message_enable"
"""The registry's name for the report of the topics the order-message switch moved."""


class DerivedAnswers(Protocol):
    """Answers kept per topic (route bodies, whole lookup answers)."""

    def invalidate(self, topics: Iterable[str]) -> None: ...


class RouteMarks:
    """Hears every touched route and tells the parts that keep something of it."""

    def __init__(
        self,
        detector: ChangeDetector,
        routes: RouteBodies,
        derived: Sequence[DerivedAnswers],
        registry: RouteRegistry,
        schedule_reports: Callable[[], None],
        *,
        order_message_enable: bool,
    ) -> None:
        """``derived`` are dropped for touched topics besides ``routes``;
        ``schedule_reports`` starts the turns that report a switch's topics in slices."""
        self._detector = detector
        self._routes = routes
        self._derived = (routes, *derived)
        self._registry = registry
        self._schedule_reports = schedule_reports
        self._order_message_enable = order_message_enable

    def touched(self, topics: Collection[str], cause: ChangeCause) -> None:
        """The registry's report: ``topics`` changed for ``cause``."""
        for answers in self._derived:
            answers.invalidate(topics)
        self._detector.mark(topics, cause)

    def kv_changed(self, namespace: str, key: str) -> None:
        """A KV entry was put or deleted: an order conf touches its topic's route while order
        messages are on."""
        if namespace == ORDER_TOPIC_CONFIG_NAMESPACE and self._order_message_enable:
            self.touched((key,), ChangeCause.ORDER_CONF)

    def order_messages_switched(self, enabled: bool) -> None:
        """``registry.order_message_enable`` as the running config now says; when it changed,
        every topic with an order conf moves."""
        if enabled == self._order_message_enable:
            return
        self._order_message_enable = enabled
        moved = self._routes.set_order_message_enable(enabled)
        self._registry.report_later(ORDER_SWITCH, moved, ChangeCause.ORDER_CONF)
        self._schedule_reports()
