"""REGISTER_BROKER and the requests by which a live broker keeps its entry (heartbeat, data
version query), as upstream's ``registerBroker``, ``updateBrokerInfoUpdateTimestamp`` and
``isBrokerTopicConfigChanged``.

A register is taken in named steps: the stale-claim check, leaving another broker name, joining
the group, writing the table (now, or as a sliced :class:`RegisterJob`), the live entry, the
filter servers, the master's addresses; then one report of every topic the steps changed and,
for an address new to its group, one arrival event.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from namesrv.ops.clock import Clock, now_ms
from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.departures import Departures
from namesrv.routes.events import Announcer, BrokerEvent
from namesrv.routes.register_jobs import RegisterJob, RegisterJobs, RegistryStats
from namesrv.routes.register_request import Origin, RegisterRequest
from namesrv.routes.tables import (
    MASTER_ID,
    AddrKey,
    BrokerGroup,
    LiveBroker,
    QueueSpec,
    RouteTables,
)
from protocol.paced_log import PacedLog
from protocol.push_events import BrokerChangeKind
from protocol.route_model import DataVersion

log = logging.getLogger(__name__)

_NO_SERVERS: list[str] = []
"""The filter servers of an address that has none (never mutated)."""


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What REGISTER_BROKER answers: for a slave, its master's address and HA address."""

    ha_server_addr: str | None
    master_addr: str | None
    changed_topics: list[str]
    """Topics whose route this register changed (what the listener was told so far)."""
    job: RegisterJob | None = None
    """Set when the topic table is applied in slices: answer once it is done."""
    arrived: BrokerEvent | None = None
    """The address is new to its (broker name, id): the arrival the listener was told."""
    unlisted: tuple[str, ...] = ()
    """Topics this master's register no longer lists, dropped from it
    (``delete_topic_with_broker_registration``)."""


def _as_last_register(
    request: RegisterRequest, previous: LiveBroker, filter_servers: list[str]
) -> RegisterRequest:
    """A register carrying the body of the address's last one: its filter servers, identity
    and (unless only the data version is new) data version and digest are taken from then."""
    if request.same_table:
        return request.evolve(filter_server_list=filter_servers, table_key=previous.table_key)
    return request.evolve(
        filter_server_list=filter_servers,
        table_key=previous.table_key,
        data_version=previous.data_version,
        body_digest=previous.body_digest,
    )


def register_cause(previous: LiveBroker | None, topic_configs: Mapping[str, Any]) -> ChangeCause:
    """A first register carrying several topics is a broker starting up; anything else is a
    plain register."""
    if previous is None and len(topic_configs) > 1:
        return ChangeCause.BROKER_STARTUP
    return ChangeCause.REGISTER


def prime_slave(group: BrokerGroup, broker_id: int, enable_acting_master: bool) -> bool:
    """upstream's prime slave: with acting master on, the lowest id stands in for a master and
    writes the group's table (read-only)."""
    return enable_acting_master and broker_id != MASTER_ID and broker_id == min(group.addrs)


class Registration:
    """Registers brokers and refreshes their liveness."""

    def __init__(
        self,
        tables: RouteTables,
        jobs: RegisterJobs,
        departures: Departures,
        announce: Announcer,
        stats: RegistryStats,
        clock: Clock,
        *,
        broker_expiry_ms: int,
        min_heartbeat_timeout_ms: int = 1_000,
        delete_topic_with_broker_registration: bool,
    ) -> None:
        self._t = tables
        self._jobs = jobs
        self._departures = departures
        self._announce = announce
        self._stats = stats
        self._clock = clock
        self._expiry_ms = broker_expiry_ms
        self._min_timeout_ms = min_heartbeat_timeout_ms
        self._log = PacedLog(log, clock.seconds)
        self._delete_with_registration = delete_topic_with_broker_registration

    def register_broker(self, request: RegisterRequest) -> RegisterResult:
        """REGISTER_BROKER, as upstream's ``registerBroker``; also the broker's heartbeat.

        ``request.topic_configs`` None says the body is the very one of this address's last
        register (see :meth:`body_unchanged`): data version, table and filter servers are taken
        from then, and the table costs no per-topic work. With ``same_table`` (see
        :meth:`table_unchanged`) only the data version is new: the table written from that
        body is still whole, so rewriting it, as a new version asks, would change nothing. A
        body with the same data version but other bytes is checked topic by topic for topics
        we lack, as upstream does.
        """
        t = self._t
        key = (request.cluster_name, request.broker_addr)
        previous = t.live.get(key)
        if request.topic_configs is None and previous is not None:
            request = _as_last_register(request, previous, t.filters.get(key, []))
        name = request.broker_name
        group = t.brokers.get(name)
        if group is not None and self._stale_claim(group, key, request):
            return RegisterResult(None, None, [])
        held = group.addrs.get(request.broker_id) if group is not None else None

        touched: set[str] = set()
        if previous is not None and previous.broker_name != name:
            touched = self._leave_other_name(previous.broker_name, request.broker_addr)
        group, first_registration, group_changed = self._join_group(request)
        if group_changed:
            touched.update(t.tables.get(name, ()))
        cause = register_cause(previous, request.topic_configs or {})
        job: RegisterJob | None = None
        unlisted: list[str] = []
        is_master = request.broker_id == MASTER_ID
        is_prime_slave = prime_slave(group, request.broker_id, request.enable_acting_master)
        if is_master or is_prime_slave:
            rewrite_all = (
                first_registration
                or previous is None
                or previous.data_version != request.data_version
                or name in t.unsettled
            )
            written, unlisted, job = self._write_table(request, rewrite_all, is_prime_slave, cause)
            touched.update(written)

        t.set_live(key, self._live_entry(request))
        if t.filters.get(key, _NO_SERVERS) != request.filter_server_list:
            touched |= self._set_filters(key, request.filter_server_list)
        cluster = request.cluster_name
        master_addr, ha_addr = (None, None) if is_master else self._master_of(group, cluster)

        changed = self._announce.topics(touched.difference(unlisted), cause)
        if unlisted:
            changed = sorted({*changed, *unlisted})
        arrived = None
        if first_registration:
            replaced = held if held is not None and held != request.broker_addr else None
            arrived = self._announce_arrival(request, cause, changed, job, replaced)
        return RegisterResult(ha_addr, master_addr, changed, job, arrived, tuple(unlisted))

    def _live_entry(self, request: RegisterRequest) -> LiveBroker:
        timeout_ms = request.heartbeat_timeout_ms
        return LiveBroker(
            broker_name=request.broker_name,
            last_update_ms=now_ms(self._clock),
            timeout_ms=(
                # the broker's own, when it gives one, but never under the floor: a broker
                # that expires between its heartbeats churns routes, events and log lines
                max(timeout_ms, self._min_timeout_ms)
                if timeout_ms is not None and timeout_ms > 0
                else self._expiry_ms
            ),
            data_version=request.data_version,
            channel=request.channel,
            ha_server_addr=request.ha_server_addr,
            body_digest=request.body_digest,
            table_key=request.table_key,
        )

    def _announce_arrival(
        self,
        request: RegisterRequest,
        cause: ChangeCause,
        changed: list[str],
        job: RegisterJob | None,
        replaced: str | None,
    ) -> BrokerEvent:
        """One event for an address new to its group, told and returned. A table applied in
        slices reports its topics later: they are the event's too. ``replaced``: the address
        the id was registered at before."""
        topics = tuple(changed) if job is None else (*changed, *(request.topic_configs or {}))
        broker_id = request.broker_id
        event = BrokerEvent(
            BrokerChangeKind.ARRIVED,
            cause,
            request.cluster_name,
            request.broker_name,
            ((broker_id, request.broker_addr),),
            topics,
            replaced=((broker_id, replaced),) if replaced is not None else (),
            channel=request.channel,
            table=job,
        )
        if self._announce.broker_listener is not None:
            self._announce.broker(event)
        return event

    def _leave_other_name(self, old_name: str, broker_addr: str) -> set[str]:
        """One address serves one broker name: registering under another one moves it out of
        ``old_name``. Returns the topics whose route its leaving changed now (a large table's
        topics are reported by the slices that unlist it)."""
        return self._departures.leave_group(old_name, broker_addr, ChangeCause.REGISTER).touched

    def _join_group(self, request: RegisterRequest) -> tuple[BrokerGroup, bool, bool]:
        """Put the address in its broker group as its id; returns the group, whether the id
        is new to this address (a first registration) and whether the group changed. Like
        upstream, every register sets the group's acting-master flag and zone to its own."""
        t = self._t
        cluster, broker_name = request.cluster_name, request.broker_name
        broker_id = request.broker_id
        addr, acting_master = request.broker_addr, request.enable_acting_master
        zone_name = request.zone_name
        members = t.clusters.setdefault(cluster, set())
        if broker_name not in members:
            members.add(broker_name)
            self._announce.changed()
        group = t.brokers.get(broker_name)
        if group is None:
            group = t.brokers[broker_name] = BrokerGroup(cluster)
        before = (dict(group.addrs), group.enable_acting_master, group.zone_name)
        # The same address holds one id: a slave switched to master drops its old id.
        for bid in [b for b, a in group.addrs.items() if a == addr and b != broker_id]:
            del group.addrs[bid]
        first_registration = group.addrs.get(broker_id) != addr
        group.addrs[broker_id] = addr
        group.enable_acting_master = acting_master
        group.zone_name = zone_name
        after = (group.addrs, acting_master, zone_name)
        if before != after:
            self._announce.changed()
        return group, first_registration, before != after

    def _write_table(
        self, request: RegisterRequest, rewrite_all: bool, read_only: bool, cause: ChangeCause
    ) -> tuple[set[str], list[str], RegisterJob | None]:
        """A master's (or prime slave's) table, ``request.topic_configs`` None for the last
        register's body (``same_table``: with a new data version, the table it wrote still
        whole).

        As upstream: every topic when ``rewrite_all`` (data version moved, first registration,
        the last table not fully applied), otherwise only topics the broker lacks. Returns the
        topics changed now, those of them the table no longer lists (reported already, under
        ``ChangeCause.UNLISTED``), and the job still applying a large table.
        """
        t = self._t
        broker_name, table = request.broker_name, request.topic_configs
        mapping_info, parts = request.topic_queue_mapping_info, request.table_parts
        memo = t.applied_parts.get(broker_name)
        touched: set[str] = set()
        deleted: list[str] = []
        self._jobs.supersede(broker_name)
        if self._delete_with_registration and table is not None and not mapping_info:
            # Reported apart: a topic that leaves this way was deleted by a live broker, not
            # left by a departed one (clients drop the first and keep the second).
            unlisted = self._drop_unlisted(broker_name, table)
            deleted = self._announce.topics(unlisted, ChangeCause.UNLISTED)
        lacking = broker_name in t.lacking
        if not (rewrite_all or lacking or table) or (request.same_table and not lacking):
            self._stats.register_fast_paths += 1
            return touched, deleted, None
        topic_configs: Mapping[str, QueueSpec] = {} if table is None else table
        columns = self._jobs.unapplied_columns(topic_configs, parts, memo, read_only, lacking)
        t.applied_parts.pop(broker_name, None)  # until this table is applied
        job = RegisterJob(
            request, columns, rewrite_all=rewrite_all, read_only=read_only, cause=cause
        )
        if parts is not None:
            job.memo = (frozenset(part.key for part in parts), read_only)
        t.lacking.discard(broker_name)
        touched.update(self._jobs.submit(job))
        return touched, deleted, None if job.done else job

    def _drop_unlisted(self, broker_name: str, table: Mapping[str, QueueSpec]) -> set[str]:
        """``delete_topic_with_broker_registration``: drop the broker's queue data of topics
        its table no longer lists; returns them."""
        t = self._t
        dropped = [name for name in t.tables.get(broker_name, {}) if name not in table]
        for name in dropped:
            t.drop_queue_data(name, broker_name)
        return set(dropped)

    def _set_filters(self, key: AddrKey, filter_server_list: list[str]) -> set[str]:
        """Store the address's filter servers; returns the topics whose route lists them when
        they changed."""
        servers = list(filter_server_list)
        filters = self._t.filters
        if filters.get(key, []) == servers:
            return set()
        if servers:
            filters[key] = servers
        else:
            del filters[key]
        return self._t.topics_of_addr(key)

    def _master_of(self, group: BrokerGroup, cluster: str) -> tuple[str | None, str | None]:
        """(address, HA address) of the group's master when it is live, for a slave's answer."""
        master = group.addrs.get(MASTER_ID)
        live = self._t.live.get((cluster, master)) if master is not None else None
        if live is None:
            return None, None
        return master, live.ha_server_addr

    def _stale_claim(self, group: BrokerGroup, key: AddrKey, request: RegisterRequest) -> bool:
        """Whether a live broker with a newer state version holds this id (upstream refuses).

        The refused address, if it was registered, is removed as its register would otherwise
        have moved it (upstream drops its live entry and its other id).
        """
        cluster, addr = key
        broker_id, data_version = request.broker_id, request.data_version
        holder = group.addrs.get(broker_id)
        if holder is None or holder == addr:
            return False
        holder_live = self._t.live.get((cluster, holder))
        if holder_live is None or holder_live.data_version.state_version <= (
            data_version.state_version
        ):
            return False
        self._log.warning(
            "register_id_held",
            "refused register of %s as id %d of %s: %s holds that id with state version %d > %d",
            addr,
            broker_id,
            holder_live.broker_name,
            holder,
            holder_live.data_version.state_version,
            data_version.state_version,
        )
        if key in self._t.live:
            self._departures.remove_addr(key, (), ChangeCause.REGISTER)
        return True

    def body_unchanged(self, request: Origin, body_digest: bytes) -> bool:
        """Whether a register body with this digest may skip reading its table: it is the very
        body this address last registered, that register's table is fully applied, and no
        topic was deleted under the broker since (DELETE_TOPIC: the table must be read to put
        it back, as upstream's heartbeat does)."""
        live = self._last_entry(request)
        return live is not None and live.body_digest == body_digest

    def table_unchanged(self, request: Origin, table_key: Hashable) -> bool:
        """Whether a register body whose identity but for its data version is ``table_key`` may
        skip reading its table: the body this address last registered had the same key, and the
        table written from it is still whole (its chunk memo stands: no wipe, deletion or topic
        written since, nothing pending, written for the same read-only state)."""
        live = self._last_entry(request)
        if live is None or live.table_key != table_key:
            return False
        t = self._t
        broker_name, broker_id = request.broker_name, request.broker_id
        group = t.brokers[broker_name]
        is_prime_slave = prime_slave(group, broker_id, request.enable_acting_master)
        if not (broker_id == MASTER_ID or is_prime_slave):
            return True  # a slave's table is not written
        memo = t.applied_parts.get(broker_name)
        return memo is not None and memo[1] == is_prime_slave

    def _last_entry(self, request: Origin) -> LiveBroker | None:
        """The live entry of the register's address when its last register stands as it was
        applied: same broker name and id, its table fully applied, no topic deleted since."""
        t = self._t
        live = t.live.get((request.cluster_name, request.broker_addr))
        name = request.broker_name
        group = t.brokers.get(name)
        if (
            live is None
            or group is None
            or live.broker_name != name
            or group.addrs.get(request.broker_id) != request.broker_addr
            or name in t.unsettled
            or name in t.lacking
        ):
            return None
        return live

    def broker_heartbeat(self, *, cluster_name: str, broker_addr: str) -> None:
        """BROKER_HEARTBEAT: refresh the live entry, if there is one."""
        live = self._t.live.get((cluster_name, broker_addr))
        if live is not None:
            live.last_update_ms = now_ms(self._clock)

    def query_data_version_changed(
        self, *, cluster_name: str, broker_addr: str, data_version: DataVersion
    ) -> bool:
        """QUERY_DATA_VERSION: whether the broker must re-register; counts as a heartbeat."""
        live = self._t.live.get((cluster_name, broker_addr))
        if live is None:
            return True
        live.last_update_ms = now_ms(self._clock)
        return live.data_version != data_version
