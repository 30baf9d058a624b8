"""What a broker's answer to SEND_MESSAGE_V2 means to a producer, as upstream's producer reads it.

Response codes 0/10/12/11 are the four stored statuses (``processSendResponse``), whose header
(``protocol.message.SendMessageResponseHeader``) names where the message went; overload codes
and flow-control remarks mean "try another broker"; upstream's ``retryResponseCodes`` may
succeed elsewhere; anything else refuses the message itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum

from protocol.codes import ResponseCode
from protocol.errors import HeaderError
from protocol.message import SendMessageResponseHeader


class SendStatus(Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


STORED_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
"""Upstream's ``processSendResponse``: each of these means the broker stored the message."""


class Answer(Enum):
    STORED = "stored"
    BUSY = "busy"
    """The broker is overloaded (SYSTEM_BUSY, FLOW_CONTROL, a busy remark): try another."""
    GO_AWAY = "go_away"
    """The broker is shutting down and took nothing (1500)."""
    RETRY = "retry"
    """Upstream's ``retryResponseCodes``: another broker may take it."""
    REFUSED = "refused"
    """The message itself is wrong; no broker will take it."""


BUSY_REMARKS = (
    "[REJECTREQUEST]",
    "[TOO_MANY_REQUESTS]",
    "[PC_SYNCHRONIZED]",
    "[PCBUSY_CLEAN_QUEUE]",
    "[TIMEOUT_CLEAN_QUEUE]",
)
"""Remark prefixes of a broker's flow control (BrokerFastFailure, the send thread pool)."""

_RETRY_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)


def classify(code: int, remark: str | None) -> Answer:
    if code in STORED_STATUS:
        return Answer.STORED
    if code == ResponseCode.GO_AWAY:
        return Answer.GO_AWAY
    if code in (ResponseCode.SYSTEM_BUSY, ResponseCode.FLOW_CONTROL):
        return Answer.BUSY
    text = (remark or "").lstrip()
    if text.startswith(BUSY_REMARKS) or "too many requests" in text.lower():
        return Answer.BUSY
    if code in _RETRY_CODES:
        return Answer.RETRY
    return Answer.REFUSED


@dataclasses.dataclass(frozen=True, slots=True)
class StoredAnswer:
    status: SendStatus
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None


def parse_stored(code: int, ext_fields: Mapping[str, str] | None) -> StoredAnswer:
    """The send response of a stored message; ``HeaderError`` when its header is malformed."""
    status = STORED_STATUS.get(ResponseCode(code)) if code in STORED_STATUS else None
    if status is None:
        raise HeaderError(f"response code {code} is not a stored status")
    header = SendMessageResponseHeader.from_wire(dict(ext_fields or {}))
    return StoredAnswer(
        status, header.msg_id, header.queue_id, header.queue_offset, header.transaction_id
    )
