"""Admin writes: a broker's write permission, and topics registered or deleted by hand."""

from __future__ import annotations

from namesrv.ops.audit_events import TopicDeleted, WritePermChanged
from namesrv.requests.context import Connection, Services, audit, ok
from namesrv.requests.register import validation
from protocol import bodies, headers
from protocol.errors import BodyError
from protocol.frame import RemotingCommand
from protocol.peer_text import check_part_size


class AdminHandlers:
    def __init__(self, services: Services) -> None:
        """What an operator's write changed goes to the audit trail (``Services.audit``)."""
        self.s = services

    def wipe_write_perm_of_broker(
        self, conn: Connection, req: RemotingCommand, h: headers.WipeWritePermOfBrokerRequestHeader
    ) -> RemotingCommand:
        count = self.s.registry.wipe_write_perm(h.broker_name)
        audit(self.s, WritePermChanged(h.broker_name, True, count), conn, req)
        return ok(
            req, headers.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_wire()
        )

    def add_write_perm_of_broker(
        self, conn: Connection, req: RemotingCommand, h: headers.AddWritePermOfBrokerRequestHeader
    ) -> RemotingCommand:
        count = self.s.registry.add_write_perm(h.broker_name)
        audit(self.s, WritePermChanged(h.broker_name, False, count), conn, req)
        return ok(req, headers.AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_wire())

    def delete_topic_in_namesrv(
        self,
        conn: Connection,
        req: RemotingCommand,
        h: headers.DeleteTopicFromNamesrvRequestHeader,
    ) -> RemotingCommand:
        dropped = self.s.registry.delete_topic(h.topic, h.cluster_name)
        audit(self.s, TopicDeleted(h.topic, h.cluster_name, tuple(dropped)), conn, req)
        return ok(req)

    def register_topic_in_namesrv(
        self, conn: Connection, req: RemotingCommand, h: headers.RegisterTopicRequestHeader
    ) -> RemotingCommand:
        config = self.s.config.registry
        check_part_size(req.body, "REGISTER_TOPIC_IN_NAMESRV body", name="route_body_bytes")
        route = bodies.decode_route(req.body)
        if not route.queue_datas:
            raise BodyError(f"REGISTER_TOPIC_IN_NAMESRV for {h.topic} carries no queueDatas")
        validation.check_queue_datas(h.topic, route.queue_datas, config.max_queue_nums)
        validation.check_name_length("topic", h.topic, config.max_topic_name_bytes)
        registry = self.s.registry
        unknown = registry.unknown_topics([h.topic])
        validation.check_total_topics(registry.topic_count, unknown, config.max_total_topics)
        self.s.registry.register_topic(h.topic, route.queue_datas)
        return ok(req)
