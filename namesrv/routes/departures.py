"""Broker addresses leaving: UNREGISTER_BROKER, a closed channel, expiry, and an address
moving to another broker name.

An address leaving its broker group changes the route of every topic the group holds; the last
address leaving takes the broker name's queue data out of every topic, as upstream does. A
large table leaves in slices (:meth:`RegisterJobs.drop_later`): routes stop listing the broker
at once, since it has no group, and each topic's queue data leaves when its slice is reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from namesrv.ops.clock import Clock, now_ms
from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.events import Announcer, BrokerEvent
from namesrv.routes.register_jobs import RegisterJobs
from namesrv.routes.tables import AddrKey, RouteTables
from protocol.codes import Perm
from protocol.push_events import BrokerChangeKind

_Left = tuple[str, str, tuple[tuple[int, str], ...]]
"""(broker name, cluster, the (id, address) pairs that left it)."""


class Leaving(NamedTuple):
    """What an address leaving one broker group changed."""

    touched: set[str]
    """Topics whose route changed now: the caller reports them."""
    dropped_later: list[str]
    """Topics of the broker name's large table, unlisted in slices and reported then."""


class Departures:
    """Removes broker addresses and reports what their leaving changed."""

    def __init__(
        self, tables: RouteTables, jobs: RegisterJobs, announce: Announcer, clock: Clock
    ) -> None:
        self._t = tables
        self._jobs = jobs
        self._announce = announce
        self._clock = clock

    def unregister_broker(
        self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> list[BrokerEvent]:
        """UNREGISTER_BROKER: the address leaves ``broker_name`` (upstream removes it by value).
        Returns the departures (none when the address was not registered)."""
        return self.remove_addr((cluster_name, broker_addr), (broker_name,), ChangeCause.UNREGISTER)

    def on_channel_close(self, channel: object) -> list[BrokerEvent]:
        """The connection a broker registered over closed: remove it as an unregister would.
        Returns the departures."""
        if channel is None:
            return []
        departed: list[BrokerEvent] = []
        for key in self._t.live_on_channel(channel):
            departed += self.remove_addr(key, (), ChangeCause.CHANNEL_CLOSE)
        return departed

    def scan_not_active_brokers(self) -> list[str]:
        """Remove brokers silent past their timeout; returns their addresses (each departure
        is told to the broker listener, cause ``EXPIRY``)."""
        now = now_ms(self._clock)
        expired = [
            key for key, live in self._t.live.items() if now - live.last_update_ms > live.timeout_ms
        ]
        for key in expired:
            self.remove_addr(key, (), ChangeCause.EXPIRY)
        return [addr for _, addr in expired]

    def remove_addr(
        self, key: AddrKey, broker_names: Iterable[str], cause: ChangeCause
    ) -> list[BrokerEvent]:
        """Drop a broker address: its live entry, filter servers and broker-group membership.

        ``broker_names`` are the groups named by the request; the group its live entry names is
        always included, so no group keeps an address that can no longer expire. Returns one
        departure per group the address left, as the broker listener is told them.
        """
        t = self._t
        live = t.set_live(key, None)
        names = set(broker_names)
        if live is not None:
            names.add(live.broker_name)
        touched: set[str] = set()
        if t.filters.pop(key, None) is not None:
            touched |= t.topics_of_addr(key)
        left: list[_Left] = []
        later: list[str] = []
        for name in sorted(names):
            group = t.brokers.get(name)
            if group is not None:
                ids = tuple((bid, a) for bid, a in sorted(group.addrs.items()) if a == key[1])
                if ids:
                    left.append((name, group.cluster, ids))
            leaving = self.leave_group(name, key[1], cause)
            touched |= leaving.touched
            later.extend(leaving.dropped_later)
        changed = self._announce.topics(touched, cause)
        if later:  # left in slices: reported later, the event's topics now
            changed = [*changed, *later]
        channel = live.channel if live is not None else None
        departed = [
            self._departure(name, cluster, ids, cause, changed, channel)
            for name, cluster, ids in left
        ]
        if self._announce.broker_listener is not None:
            for event in departed:
                self._announce.broker(event)
        return departed

    def leave_group(self, broker_name: str, addr: str, cause: ChangeCause) -> Leaving:
        """Remove ``addr`` from a broker group."""
        t = self._t
        group = t.brokers.get(broker_name)
        if group is None:
            return Leaving(set(), [])
        ids = [bid for bid, a in group.addrs.items() if a == addr]
        if not ids:
            return Leaving(set(), [])
        for bid in ids:
            del group.addrs[bid]
        self._announce.changed()
        if group.addrs:
            if group.read_only():  # no master under acting master: read-only
                t.rewrite_perm(broker_name, lambda p: p & ~Perm.WRITE)
            return Leaving(set(t.tables.get(broker_name, ())), [])
        # The broker name is gone: as upstream, its queue data leaves every topic.
        table = t.forget_broker_name(broker_name)
        self._jobs.cancel(broker_name)
        if len(table) > self._jobs.slice_topics:
            topics = list(table)
            self._jobs.drop_later(broker_name, topics, cause)
            return Leaving(set(), topics)
        forget_holder = t.forget_holder
        for topic in table:
            forget_holder(topic, broker_name)
        return Leaving(set(table), [])

    def _departure(
        self,
        name: str,
        cluster: str,
        ids: tuple[tuple[int, str], ...],
        cause: ChangeCause,
        changed: list[str],
        channel: object,
    ) -> BrokerEvent:
        """The event for ``ids`` having left ``name``, as the group stands now."""
        group = self._t.brokers.get(name)
        return BrokerEvent(
            BrokerChangeKind.DEPARTED,
            cause,
            cluster,
            name,
            ids,
            tuple(changed),
            name_gone=group is None,
            read_only=group is not None and group.read_only(),
            channel=channel,
        )
