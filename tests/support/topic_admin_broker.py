"""A broker stand-in that also serves topic administration, as a RocketMQ broker does:
UPDATE_AND_CREATE_TOPIC adds or replaces a topic and DELETE_TOPIC_IN_BROKER removes it, each
followed by a register with a new data version, so the name server's routes follow."""

from __future__ import annotations

from typing import Any

from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.headers import CreateTopicRequestHeader, DeleteTopicRequestHeader
from protocol.route_model import DataVersion
from support.broker_standin import BrokerStandIn


class TopicAdminBroker(BrokerStandIn):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.created: list[CreateTopicRequestHeader] = []
        self.deleted: list[str] = []
        self.admin_fields: list[dict[str, str]] = []
        """The extFields of every topic admin request, as received (signature fields included)."""
        self.refusal: tuple[int, str] | None = None
        """Topic admin requests are answered with this code and remark while set."""

    def refuse_topic_admin(self, code: int, remark: str) -> None:
        self.refusal = (code, remark)

    def _answer(self, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code not in (
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            RequestCode.DELETE_TOPIC_IN_BROKER,
        ):
            return super()._answer(cmd)
        self.admin_fields.append(dict(cmd.ext_fields))
        if self.refusal is not None:
            return cmd.make_response(*self.refusal)
        if cmd.code == RequestCode.UPDATE_AND_CREATE_TOPIC:
            header = CreateTopicRequestHeader.from_wire(cmd.ext_fields)
            self.created.append(header)
            self.topics[header.topic] = header.write_queue_nums
        else:
            topic = DeleteTopicRequestHeader.from_wire(cmd.ext_fields).topic
            self.deleted.append(topic)
            self.topics.pop(topic, None)
        old = self._data_version
        self._data_version = DataVersion(old.state_version, old.timestamp, old.counter + 1)
        self._register_all()
        return cmd.make_response(ResponseCode.SUCCESS)
