"""The route tables of the name server, as upstream's ``RouteInfoManager`` keeps them.

Pure logic with an injected clock: no sockets, no timers (the server calls
:meth:`RouteRegistry.scan_not_active_brokers` on its own schedule). Every mutation reports the
topics whose assembled route (:meth:`RouteRegistry.get_route`) may have changed to the listener,
with the cause, right after it happens. That report invalidates cached route bodies and drives
change detection: a reported topic gets a new route version without its route being compared, so
the registry reports exactly the topics whose assembled route changed, never one it left as it was.

:class:`RouteRegistry` is the one object the server calls. It is built of one part per job, all
sharing one :class:`~namesrv.routes.tables.RouteTables`:

========================  ====================================================================
part                      requests
========================  ====================================================================
``Registration``          REGISTER_BROKER, BROKER_HEARTBEAT, QUERY_DATA_VERSION
``RegisterJobs``          large register tables applied (departed ones dropped, switches'
                          moved routes reported) in slices
``Departures``            UNREGISTER_BROKER, a closed channel, expiry
``TopicAdmin``            write perms, DELETE_TOPIC / REGISTER_TOPIC_IN_NAMESRV
``RouteQueries``          routes, topic lists, cluster info, broker member groups
========================  ====================================================================
"""

from __future__ import annotations

from namesrv.routes.departures import Departures
from namesrv.routes.events import Announcer, BrokerListener, Listener
from namesrv.routes.queries import RouteQueries
from namesrv.routes.register_jobs import DEFAULT_SLICE_TOPICS, RegisterJobs, RegistryStats
from namesrv.routes.registration import Registration
from namesrv.routes.tables import Clock, RouteTables
from namesrv.routes.topic_admin import TopicAdmin


class RouteRegistry:
    """Topic routes, broker membership and broker liveness of one name server.

    A register's ``channel`` (see :class:`~namesrv.routes.registration.RegisterRequest`) must be
    hashable (the server passes a connection id); None means the broker has no channel to
    close. Methods never raise on unknown names: they change nothing and return 0 or empty.

    ``delete_topic_with_broker_registration`` mirrors upstream's NamesrvConfig switch of that
    name (default off there too): when on, a master's register removes its queue data from
    topics absent from the table it reports. It is off by default because 5.x brokers also send
    *incremental* registers carrying only the topics just created, which would otherwise drop
    every other topic of that broker until its next full register.

    Each request method is the bound method of the part for its job, taken once here: a lookup
    or a register goes straight to the code that does it, through no forwarding call.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        broker_expiry_ms: int = 120_000,
        min_heartbeat_timeout_ms: int = 1_000,
        listener: Listener | None = None,
        delete_topic_with_broker_registration: bool = False,
        slice_topics: int = DEFAULT_SLICE_TOPICS,
        broker_listener: BrokerListener | None = None,
    ) -> None:
        self.tables = RouteTables()
        """The shared tables: read them in checks; write them only through the requests."""
        self.stats = RegistryStats()
        self._announce = Announcer(listener, broker_listener)
        self._jobs = RegisterJobs(self.tables, self._announce, self.stats, slice_topics)
        departures = Departures(self.tables, self._jobs, self._announce, clock)
        registration = Registration(
            self.tables,
            self._jobs,
            departures,
            self._announce,
            self.stats,
            clock,
            broker_expiry_ms=broker_expiry_ms,
            min_heartbeat_timeout_ms=min_heartbeat_timeout_ms,
            delete_topic_with_broker_registration=delete_topic_with_broker_registration,
        )
        self._take_requests(
            registration, departures, TopicAdmin(self.tables, self._announce, clock)
        )
        self._take_queries(RouteQueries(self.tables))

    def _take_requests(
        self, registration: Registration, departures: Departures, admin: TopicAdmin
    ) -> None:
        """The requests that change the tables, each the bound method of its part."""
        self.register_broker = registration.register_broker
        self.body_unchanged = registration.body_unchanged
        self.table_unchanged = registration.table_unchanged
        self.broker_heartbeat = registration.broker_heartbeat
        self.query_data_version_changed = registration.query_data_version_changed

        self.run_jobs = self._jobs.run
        self.report_later = self._jobs.report_later

        self.unregister_broker = departures.unregister_broker
        self.on_channel_close = departures.on_channel_close
        self.scan_not_active_brokers = departures.scan_not_active_brokers

        self.wipe_write_perm = admin.wipe_write_perm
        self.add_write_perm = admin.add_write_perm
        self.delete_topic = admin.delete_topic
        self.register_topic = admin.register_topic

    def _take_queries(self, queries: RouteQueries) -> None:
        """The requests that only read the tables."""
        self.get_route = queries.get_route
        self.route_exists = queries.route_exists
        self.zone_names = queries.zone_names
        self.route_exists_check = queries.route_exists_check
        self.has_cluster = queries.has_cluster
        self.all_topics = queries.all_topics
        self.topics_by_cluster = queries.topics_by_cluster
        self.system_topics = queries.system_topics
        self.unit_topics = queries.unit_topics
        self.has_unit_sub_topics = queries.has_unit_sub_topics
        self.has_unit_sub_ununit_topics = queries.has_unit_sub_ununit_topics
        self.cluster_info = queries.cluster_info
        self.broker_member_group = queries.broker_member_group
        self.topics_of_broker = queries.topics_of_broker
        self.has_channel = self.tables.has_channel

    @property
    def broker_listener(self) -> BrokerListener | None:
        """Told of every address leaving or joining a broker name, after ``listener``."""
        return self._announce.broker_listener

    @property
    def generation(self) -> int:
        """Moves on every change of topics, broker groups or clusters: what is derived from
        the whole registry stays valid while it stands."""
        return self._announce.generation

    @property
    def slice_topics(self) -> int:
        """Topic writes per slice of a large register."""
        return self._jobs.slice_topics

    @property
    def pending_jobs(self) -> int:
        """Registers whose topic table is still being applied, and departed brokers whose
        queue data is still being dropped."""
        return self._jobs.pending

    @property
    def broker_count(self) -> int:
        """Live broker addresses."""
        return len(self.tables.live)

    @property
    def topic_count(self) -> int:
        return len(self.tables.holders)

    def unknown_topics(self, names: list[str]) -> int:
        """How many of ``names`` (distinct) the registry holds no route of (in C)."""
        return len(names) - sum(map(self.tables.holders.__contains__, names))
