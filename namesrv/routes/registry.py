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

from collections.abc import Callable, Hashable, Iterable

from namesrv.ops.clock import Clock
from namesrv.routes.change_cause import ChangeCause
from namesrv.routes.departures import Departures
from namesrv.routes.events import Announcer, BrokerEvent, BrokerListener, Listener
from namesrv.routes.queries import RouteQueries
from namesrv.routes.register_jobs import DEFAULT_SLICE_TOPICS, RegisterJobs, RegistryStats
from namesrv.routes.register_request import Origin, RegisterRequest
from namesrv.routes.registration import RegisterResult, Registration
from namesrv.routes.tables import RouteTables
from namesrv.routes.topic_admin import TopicAdmin
from protocol.route_model import ClusterInfo, DataVersion, QueueData, TopicRouteData


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

    Each request method hands the request to the part for its job (the table above), so a
    reader, the type checker and the structure tools follow a request from here to its code.
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
        self._departures = Departures(self.tables, self._jobs, self._announce, clock)
        self._registration = Registration(
            self.tables,
            self._jobs,
            self._departures,
            self._announce,
            self.stats,
            clock,
            broker_expiry_ms=broker_expiry_ms,
            min_heartbeat_timeout_ms=min_heartbeat_timeout_ms,
            delete_topic_with_broker_registration=delete_topic_with_broker_registration,
        )
        self._admin = TopicAdmin(self.tables, self._announce, clock)
        self._queries = RouteQueries(self.tables)

    # The requests that change the tables, each handed to the part that does it.

    def register_broker(self, request: RegisterRequest) -> RegisterResult:
        """REGISTER_BROKER (see :meth:`Registration.register_broker`)."""
        return self._registration.register_broker(request)

    def body_unchanged(self, request: Origin, body_digest: bytes) -> bool:
        """Whether a register body with this digest is the address's last one, its table
        standing as applied (see :meth:`Registration.body_unchanged`)."""
        return self._registration.body_unchanged(request, body_digest)

    def table_unchanged(self, request: Origin, table_key: Hashable) -> bool:
        """Whether a body that is the last one but for its data version may skip reading its
        table (see :meth:`Registration.table_unchanged`)."""
        return self._registration.table_unchanged(request, table_key)

    def broker_heartbeat(self, *, cluster_name: str, broker_addr: str) -> None:
        """BROKER_HEARTBEAT: refresh the live entry, if there is one."""
        self._registration.broker_heartbeat(cluster_name=cluster_name, broker_addr=broker_addr)

    def query_data_version_changed(
        self, *, cluster_name: str, broker_addr: str, data_version: DataVersion
    ) -> bool:
        """QUERY_DATA_VERSION: whether the broker must re-register; counts as a heartbeat."""
        return self._registration.query_data_version_changed(
            cluster_name=cluster_name, broker_addr=broker_addr, data_version=data_version
        )

    def run_jobs(self, budget: int | None = None) -> bool:
        """A slice of the pending register tables, departures and reports (see
        :meth:`RegisterJobs.run`); returns whether work remains."""
        return self._jobs.run(budget)

    def report_later(self, switch: str, topics: list[str], cause: ChangeCause) -> None:
        """Report the routes a run-time switch moved, a slice per call of :meth:`run_jobs`."""
        self._jobs.report_later(switch, topics, cause)

    def unregister_broker(
        self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> list[BrokerEvent]:
        """UNREGISTER_BROKER; returns the departures it caused."""
        return self._departures.unregister_broker(
            cluster_name=cluster_name,
            broker_addr=broker_addr,
            broker_name=broker_name,
            broker_id=broker_id,
        )

    def on_channel_close(self, channel: object) -> list[BrokerEvent]:
        """A broker's connection closed: its addresses leave."""
        return self._departures.on_channel_close(channel)

    def scan_not_active_brokers(self) -> list[str]:
        """Expire the brokers past their heartbeat timeout; returns their addresses."""
        return self._departures.scan_not_active_brokers()

    def wipe_write_perm(self, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER; returns the topics holding the broker's queues."""
        return self._admin.wipe_write_perm(broker_name)

    def add_write_perm(self, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER; returns the topics holding the broker's queues."""
        return self._admin.add_write_perm(broker_name)

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> list[str]:
        """DELETE_TOPIC_IN_NAMESRV; returns the brokers that held it."""
        return self._admin.delete_topic(topic, cluster_name)

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV."""
        self._admin.register_topic(topic, queue_datas)

    # The requests that only read the tables.

    def get_route(self, topic: str) -> TopicRouteData | None:
        """The assembled route, or None when no broker holds queues of ``topic``."""
        return self._queries.get_route(topic)

    def route_exists(self, topic: str) -> bool:
        return self._queries.route_exists(topic)

    def route_exists_check(self) -> Callable[[str], bool]:
        """:meth:`route_exists` as one C call, for a caller that asks per topic."""
        return self._queries.route_exists_check()

    def zone_names(self) -> set[str]:
        return self._queries.zone_names()

    def has_cluster(self, cluster: str) -> bool:
        return self._queries.has_cluster(cluster)

    def all_topics(self) -> list[str]:
        return self._queries.all_topics()

    def topics_by_cluster(self, cluster: str) -> list[str]:
        return self._queries.topics_by_cluster(cluster)

    def system_topics(self) -> list[str]:
        return self._queries.system_topics()

    def unit_topics(self) -> list[str]:
        return self._queries.unit_topics()

    def has_unit_sub_topics(self) -> list[str]:
        return self._queries.has_unit_sub_topics()

    def has_unit_sub_ununit_topics(self) -> list[str]:
        return self._queries.has_unit_sub_ununit_topics()

    def cluster_info(self) -> ClusterInfo:
        return self._queries.cluster_info()

    def broker_member_group(self, cluster_name: str, broker_name: str) -> dict[int, str]:
        return self._queries.broker_member_group(cluster_name, broker_name)

    def topics_of_broker(self, broker_name: str) -> set[str]:
        return self._queries.topics_of_broker(broker_name)

    def has_channel(self, channel: object) -> bool:
        """Whether a live broker registered on ``channel``."""
        return self.tables.has_channel(channel)

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
