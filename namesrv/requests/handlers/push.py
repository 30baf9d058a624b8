"""The push extension's requests: subscribe and unsubscribe (7001/7002), and the operations
codes that report on push (7005/7006). With push off, all four are unsupported."""

from __future__ import annotations

from namesrv.ops.events import SubscriptionsChanged
from namesrv.requests.context import Connection, Services, ok, require_push
from protocol.codes import RequestCode, ResponseCode, Version
from protocol.errors import BodyError, ProtocolError
from protocol.frame import RemotingCommand
from protocol.push_codec import decode_subscribe, decode_unsubscribe, encode_subscribe_ack
from protocol.push_events import TopicVersion


class PushHandlers:
    def __init__(self, services: Services) -> None:
        self.s = services

    def subscribe(self, conn: Connection, req: RemotingCommand, h: None) -> RemotingCommand:
        require_push(self.s.config)
        msg = decode_subscribe(req.body)
        topics = list(dict.fromkeys(msg.topics))
        if not topics:
            raise BodyError("SubscribeTopicRoute names no topic")
        if len(topics) > self.s.config.push.max_topics_per_request:
            raise BodyError(
                f"SubscribeTopicRoute names {len(topics)} topics, over the per-request bound "
                f"push.max_topics_per_request={self.s.config.push.max_topics_per_request}"
            )
        # Settle first: a change pending now is then covered by the ack's version, not re-sent.
        detector = self.s.detector
        acks = [
            TopicVersion(topic, *detector.version(topic), detector.deleted(topic))
            for topic in topics
        ]
        added = self.s.subscriptions.subscribe(conn, topics, getattr(conn, "host", None))
        detector.subscribed(added)
        # The latest SUBSCRIBE decides; inline routes take the body form GET_ROUTEINFO would
        # answer a request like this one with (its version, its acceptStandardJsonOnly).
        self.s.subscriptions.set_inline(conn, _route_form(req) if msg.inline_routes else None)
        if added and self.s.events is not None:
            self.s.events.subscriptions_changed(SubscriptionsChanged(True, conn.conn_id, added))
        startup = self.s.startup
        body = encode_subscribe_ack(
            acks,
            detector.epoch,
            warming_up=startup is not None and startup.warming_up,
            warm_in_ms=startup.left_ms() if startup is not None else 0,
            uptime_ms=startup.uptime_ms() if startup is not None else 0,
        )
        return ok(req, body=body)

    def unsubscribe(self, conn: Connection, req: RemotingCommand, h: None) -> RemotingCommand:
        require_push(self.s.config)
        msg = decode_unsubscribe(req.body)
        topics = list(dict.fromkeys(msg.topics))
        if not topics:
            raise BodyError("UnsubscribeTopicRoute names no topic")
        removed = self.s.subscriptions.unsubscribe(conn, topics)
        self.s.detector.discard_debt(conn, removed)
        if removed and self.s.events is not None:
            self.s.events.subscriptions_changed(SubscriptionsChanged(False, conn.conn_id, removed))
        return ok(req)

    def get_push_status(self, conn: Connection, req: RemotingCommand, h: None) -> RemotingCommand:
        return self._operation(RequestCode.GET_PUSH_STATUS, req)

    def get_subscriptions(self, conn: Connection, req: RemotingCommand, h: None) -> RemotingCommand:
        return self._operation(RequestCode.GET_SUBSCRIPTIONS, req)

    def _operation(self, code: int, req: RemotingCommand) -> RemotingCommand:
        require_push(self.s.config)  # push off: the server looks upstream, extension included
        answer = self.s.operations
        if answer is None:  # not served then (``needs_operations``); refused all the same
            raise ProtocolError(
                f"request code {code} is not supported by this name server",
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            )
        return answer(code, req)


def _route_form(req: RemotingCommand) -> tuple[bool, bool]:
    """(standard JSON, 4.9.x shape) of the route body a lookup sent like ``req`` is answered
    with, as ``LookupHandlers.get_route_info_by_topic`` decides it."""
    accept_standard = (req.ext_fields or {}).get("acceptStandardJsonOnly", "").lower() == "true"
    return accept_standard or req.version >= Version.V4_9_4, req.version < Version.V5_0_0
