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
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.departures import Departures
from namesrv.routes.events import Announcer, BrokerEvent
from namesrv.routes.register_jobs import RegisterJob, RegisterJobs, RegistryStats
from namesrv.routes.tables import (
    MASTER_ID,
    AddrKey,
    BrokerGroup,
    Clock,
    LiveBroker,
    QueueSpec,
    RouteTables,
    now_ms,
)
from protocol.push_events import BrokerChangeKind
from protocol.register.chunk_cache import TablePart
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
        delete_topic_with_broker_registration: bool,
    ) -> None:
        self._t = tables
        self._jobs = jobs
        self._departures = departures
        self._announce = announce
        self._stats = stats
        self._clock = clock
        self._expiry_ms = broker_expiry_ms
        self._delete_with_registration = delete_topic_with_broker_registration

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_configs: Mapping[str, QueueSpec] | None,
        data_version: DataVersion,
        filter_server_list: list[str],
        heartbeat_timeout_ms: int | None,
        enable_acting_master: bool,
        channel: object,
        topic_queue_mapping_info: Mapping[str, Any],
        body_digest: bytes | None = None,
        table_parts: Sequence[TablePart] | None = None,
        zone_name: str | None = None,
        table_key: Hashable | None = None,
        same_table: bool = False,
    ) -> RegisterResult:
        """REGISTER_BROKER, as upstream's ``registerBroker``; also the broker's heartbeat.

        ``topic_configs`` None says the body is the very one of this address's last register
        (see :meth:`body_unchanged`): data version, table and filter servers are taken from
        then, and the table costs no per-topic work. With ``same_table`` (see
        :meth:`table_unchanged`) only the data version is new: the table written from that
        body is still whole, so rewriting it, as a new version asks, would change nothing. A
        body with the same data version but other bytes is checked topic by topic for topics
        we lack, as upstream does. ``table_key`` is the body's identity but for its version.

        ``table_parts``, the table's chunks as read, lets a master's register skip the chunks
        its table already holds as they are (the usual re-register after one topic changed).
        """
        t = self._t
        key = (cluster_name, broker_addr)
        previous = t.live.get(key)
        table_given = topic_configs is not None
        if topic_configs is None:
            topic_configs = {}
            if previous is not None:  # the body of the last register: take it from then
                filter_server_list = t.filters.get(key, [])
                table_key = previous.table_key
                if not same_table:
                    data_version = previous.data_version
                    body_digest = previous.body_digest
        group = t.brokers.get(broker_name)
        if group is not None and self._stale_claim(group, key, broker_id, data_version):
            return RegisterResult(None, None, [])

        touched: set[str] = set()
        if previous is not None and previous.broker_name != broker_name:
            touched = self._leave_other_name(previous.broker_name, broker_addr)
        group, first_registration, group_changed = self._join_group(
            cluster_name, broker_name, broker_id, broker_addr, enable_acting_master, zone_name
        )
        if group_changed:
            touched.update(t.tables.get(broker_name, ()))
        cause = register_cause(previous, topic_configs)
        job: RegisterJob | None = None
        is_master = broker_id == MASTER_ID
        is_prime_slave = prime_slave(group, broker_id, enable_acting_master)
        if is_master or is_prime_slave:
            written, job = self._write_table(
                broker_name,
                topic_configs if table_given else None,
                topic_queue_mapping_info,
                table_parts,
                rewrite_all=(
                    first_registration
                    or previous is None
                    or previous.data_version != data_version
                    or broker_name in t.unsettled
                ),
                read_only=is_prime_slave,
                data_version=data_version,
                cause=cause,
                same_table=same_table,
            )
            touched.update(written)

        t.set_live(
            key,
            LiveBroker(
                broker_name=broker_name,
                last_update_ms=now_ms(self._clock),
                timeout_ms=(
                    heartbeat_timeout_ms  # the broker's own, when it gives one
                    if heartbeat_timeout_ms is not None and heartbeat_timeout_ms > 0
                    else self._expiry_ms
                ),
                data_version=data_version,
                channel=channel,
                ha_server_addr=ha_server_addr,
                body_digest=body_digest,
                table_key=table_key,
            ),
        )
        if t.filters.get(key, _NO_SERVERS) != filter_server_list:
            touched |= self._set_filters(key, filter_server_list)
        master_addr, ha_addr = (None, None) if is_master else self._master_of(group, cluster_name)

        changed = self._announce.topics(touched, cause)
        if first_registration and self._announce.broker_listener is not None:
            # A table applied in slices reports its topics later: they are the event's too.
            topics = tuple(changed) if job is None else (*changed, *topic_configs)
            arrived = ((broker_id, broker_addr),)
            self._announce.broker(
                BrokerEvent(
                    BrokerChangeKind.ARRIVED, cause, cluster_name, broker_name, arrived, topics
                )
            )
        return RegisterResult(ha_addr, master_addr, changed, job)

    def _leave_other_name(self, old_name: str, broker_addr: str) -> set[str]:
        """One address serves one broker name: registering under another one moves it out of
        ``old_name``. Returns the topics whose route its leaving changed now (a large table's
        topics are reported by the slices that unlist it)."""
        return self._departures.leave_group(old_name, broker_addr, ChangeCause.REGISTER).touched

    def _join_group(
        self,
        cluster: str,
        broker_name: str,
        broker_id: int,
        addr: str,
        acting_master: bool,
        zone_name: str | None,
    ) -> tuple[BrokerGroup, bool, bool]:
        """Put ``addr`` in its broker group as ``broker_id``; returns the group, whether the id
        is new to this address (a first registration) and whether the group changed. Like
        upstream, every register sets the group's acting-master flag and zone to its own."""
        t = self._t
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
        self,
        broker_name: str,
        table: Mapping[str, QueueSpec] | None,
        mapping_info: Mapping[str, Any],
        parts: Sequence[TablePart] | None,
        *,
        rewrite_all: bool,
        read_only: bool,
        data_version: DataVersion,
        cause: ChangeCause,
        same_table: bool = False,
    ) -> tuple[set[str], RegisterJob | None]:
        """A master's (or prime slave's) table, ``table`` None for the last register's body
        (``same_table``: with a new data version, the table it wrote still whole).

        As upstream: every topic when ``rewrite_all`` (data version moved, first registration,
        the last table not fully applied), otherwise only topics the broker lacks. Returns the
        topics changed now, and the job still applying a large table.
        """
        t = self._t
        memo = t.applied_parts.get(broker_name)
        touched: set[str] = set()
        if self._delete_with_registration and table is not None and not mapping_info:
            touched = self._drop_unlisted(broker_name, table)
        lacking = broker_name in t.lacking
        self._jobs.supersede(broker_name)
        if not (rewrite_all or lacking or table) or (same_table and not lacking):
            self._stats.register_fast_paths += 1
            return touched, None
        topic_configs: Mapping[str, QueueSpec] = {} if table is None else table
        names, specs = self._jobs.unapplied_columns(topic_configs, parts, memo, read_only, lacking)
        t.applied_parts.pop(broker_name, None)  # until this table is applied
        job = RegisterJob(
            broker_name,
            names,
            specs,
            rewrite_all=rewrite_all,
            read_only=read_only,
            mapping=mapping_info if rewrite_all else {},
            data_version=data_version,
            cause=cause,
        )
        if parts is not None:
            job.memo = (frozenset(part.key for part in parts), read_only)
        t.lacking.discard(broker_name)
        touched.update(self._jobs.submit(job))
        return touched, None if job.done else job

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

    def _stale_claim(
        self, group: BrokerGroup, key: AddrKey, broker_id: int, data_version: DataVersion
    ) -> bool:
        """Whether a live broker with a newer state version holds this id (upstream refuses).

        The refused address, if it was registered, is removed as its register would otherwise
        have moved it (upstream drops its live entry and its other id).
        """
        cluster, addr = key
        holder = group.addrs.get(broker_id)
        if holder is None or holder == addr:
            return False
        holder_live = self._t.live.get((cluster, holder))
        if holder_live is None or holder_live.data_version.state_version <= (
            data_version.state_version
        ):
            return False
        log.warning(
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

    def body_unchanged(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        body_digest: bytes,
    ) -> bool:
        """Whether a register body with this digest may skip reading its table: it is the very
        body this address last registered, that register's table is fully applied, and no
        topic was deleted under the broker since (DELETE_TOPIC: the table must be read to put
        it back, as upstream's heartbeat does)."""
        t = self._t
        live = t.live.get((cluster_name, broker_addr))
        group = t.brokers.get(broker_name)
        return (
            live is not None
            and group is not None
            and group.addrs.get(broker_id) == broker_addr
            and live.body_digest == body_digest
            and live.broker_name == broker_name
            and broker_name not in t.unsettled
            and broker_name not in t.lacking
        )

    def table_unchanged(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        table_key: Hashable,
        enable_acting_master: bool,
    ) -> bool:
        """Whether a register body whose identity but for its data version is ``table_key`` may
        skip reading its table: the body this address last registered had the same key, and the
        table written from it is still whole (its chunk memo stands: no wipe, deletion or topic
        written since, nothing pending, written for the same read-only state)."""
        t = self._t
        live = t.live.get((cluster_name, broker_addr))
        group = t.brokers.get(broker_name)
        if (
            live is None
            or group is None
            or live.table_key != table_key
            or live.broker_name != broker_name
            or group.addrs.get(broker_id) != broker_addr
            or broker_name in t.unsettled
            or broker_name in t.lacking
        ):
            return False
        is_prime_slave = prime_slave(group, broker_id, enable_acting_master)
        if not (broker_id == MASTER_ID or is_prime_slave):
            return True  # a slave's table is not written
        memo = t.applied_parts.get(broker_name)
        return memo is not None and memo[1] == is_prime_slave

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
