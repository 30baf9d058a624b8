"""Reads of routes and topics: a topic's route, the cluster, and the topic lists."""

from __future__ import annotations

from namesrv.requests.context import Connection, Services, ok
from namesrv.routes.zones import requested_zone
from protocol import bodies, headers
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
            return req.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {h.topic}",
                ext,
            )
        return ok(req, ext, body)

    def get_broker_cluster_info(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return ok(req, body=bodies.encode_cluster_info(self.s.registry.cluster_info()))

    def get_all_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        if not self.s.config.registry.enable_all_topic_list:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        return ok(req, body=bodies.encode_topic_list(self.s.registry.all_topics()))

    def get_topics_by_cluster(
        self, conn: Connection, req: RemotingCommand, h: headers.GetTopicsByClusterRequestHeader
    ) -> RemotingCommand:
        return ok(req, body=bodies.encode_topic_list(self.s.registry.topics_by_cluster(h.cluster)))

    def get_system_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return ok(req, body=bodies.encode_topic_list(self.s.registry.system_topics()))

    def get_unit_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return ok(req, body=bodies.encode_topic_list(self.s.registry.unit_topics()))

    def get_has_unit_sub_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return ok(req, body=bodies.encode_topic_list(self.s.registry.has_unit_sub_topics()))

    def get_has_unit_sub_ununit_topic_list(
        self, conn: Connection, req: RemotingCommand, h: None
    ) -> RemotingCommand:
        return ok(req, body=bodies.encode_topic_list(self.s.registry.has_unit_sub_ununit_topics()))
