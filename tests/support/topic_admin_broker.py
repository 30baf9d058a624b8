"""The sandbox's broker stand-in, recording the topic admin requests it gets and able to refuse
them, for the admin tool's tests."""

from __future__ import annotations

from typing import Any

from namesrv_sandbox.standin import BrokerStandIn
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand
from protocol.headers import CreateTopicRequestHeader, DeleteTopicRequestHeader


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
            self.created.append(CreateTopicRequestHeader.from_wire(cmd.ext_fields))
        else:
            self.deleted.append(DeleteTopicRequestHeader.from_wire(cmd.ext_fields).topic)
        return super()._answer(cmd)
