"""Reads of routes and topics: a topic's route, the cluster, and the topic lists.

The cluster info and the topic lists come from :class:`~namesrv.routes.listings.Listings`:
encoded once per registry change and shared by every answer until the next. A listing cut at
``registry.max_listing_bytes`` is a SUCCESS in upstream's form whose remark says so, with the
``listed`` and ``total`` header fields.
"""

from __future__ import annotations

from namesrv.requests.context import Connection, Services, ok
from namesrv.routes.listings import Listing
from namesrv.routes.zones import requested_zone
from protocol import headers
from protocol.codes import ResponseCode, Version
from protocol.frame import RemotingCommand


class LookupHandlers:
    def __init__(self, services: Services) -> None:
        self.s = services

    def get_route_info_by_topic(
        self, conn: Connection, req: RemotingCommand, h: headers.GetRouteInfoRequestHeader
    ) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC, when the route-response cache could not answer it."""
        version, _exists = self.s.detector.version(h.topic)
        standard = h.accept_standard_json_only or req.version >= Version.V4_9_4
        legacy = req.version < Version.V5_0_0
        zone = requested_zone(h.zone_mode, h.zone_name)
        body = self.s.routes.body(h.topic, standard_json=standard, legacy=legacy, zone=zone)
        ext = {"routeVersion": str(version)}
        if body is None:
            return self._no_route(req, h.topic, version, ext)
        return ok(req, ext, body)

    def _no_route(
        self, req: RemotingCommand, topic: str, version: int, ext: dict[str, str]
    ) -> RemotingCommand:
        """A topic without a route: TOPIC_NOT_EXIST (``topicDeleted=true`` when it was deleted
        in this epoch), or, for a topic never heard of (version 0) while the server warms up,
        SYSTEM_ERROR "not ready" as upstream answers while ``waitSecondsForService`` runs:
        upstream clients keep the route they hold and ask again (a system topic clients create
        on absence excepted: ``server.wait_for_service_exempt_topics``)."""
        startup = self.s.startup
        if version == 0 and startup is not None and startup.not_ready_for(topic):
            return req.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"name server not ready: warming up, {startup.left_ms()} ms left",
                {"warmingUp": "true"},
            )
        if self.s.detector.deleted(topic):
            ext["topicDeleted"] = "true"
        return req.make_response(
            ResponseCode.TOPIC_NOT_EXIST,
            f"No topic route info in name server for the topic: {topic}",
            ext,
        )

    def _listed(self, req: RemotingCommand, listing: Listing, what: str) -> RemotingCommand:
        if not listing.cut:
            return ok(req, body=listing.body)
        limit = self.s.listings.max_bytes
        return req.make_response(
            ResponseCode.SUCCESS,
            f"{what} cut at registry.max_listing_bytes={limit}: the first {listing.listed} of "
            f"{listing.total} in sorted order",
            {"listed": str(listing.listed), "total": str(listing.total)},
            listing.body,
        )

    def get_broker_cluster_info(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return self._listed(req, self.s.listings.cluster_info(), "broker names")

    def get_all_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        if not self.s.config.registry.enable_all_topic_list:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        return self._listed(req, self.s.listings.topics("all"), "topics")

    def get_topics_by_cluster(
        self, conn: Connection, req: RemotingCommand, h: headers.GetTopicsByClusterRequestHeader
    ) -> RemotingCommand:
        return self._listed(req, self.s.listings.topics_by_cluster(h.cluster), "topics")

    def get_system_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return self._listed(req, self.s.listings.topics("system"), "topics")

    def get_unit_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return self._listed(req, self.s.listings.topics("unit"), "topics")

    def get_has_unit_sub_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return self._listed(req, self.s.listings.topics("unit_sub"), "topics")

    def get_has_unit_sub_ununit_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return self._listed(req, self.s.listings.topics("unit_sub_ununit"), "topics")
