"""What a broker's answer to a send means: upstream's stored statuses, busy codes and remarks,
retry codes, and a stored answer's header."""

from __future__ import annotations

import pytest

from client_push.producer.send_answer import Answer, SendStatus, classify, parse_stored
from protocol.codes import ResponseCode
from protocol.errors import HeaderError


@pytest.mark.parametrize(
    ("code", "remark", "answer"),
    [
        (0, None, Answer.STORED),
        (10, None, Answer.STORED),
        (2, "[PCBUSY_CLEAN_QUEUE]broker busy", Answer.BUSY),
        (215, "flow control", Answer.BUSY),
        (1, "[TOO_MANY_REQUESTS]too many requests and system thread pool busy", Answer.BUSY),
        (1, "store error", Answer.RETRY),
        (17, "topic not exist", Answer.RETRY),
        (1500, None, Answer.GO_AWAY),
        (13, "message illegal", Answer.REFUSED),
        (29, "bad header", Answer.REFUSED),
    ],
)
def test_answers_are_classified_as_upstream_codes_and_busy_remarks_say(code, remark, answer):
    assert classify(code, remark) is answer


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (0, "SEND_OK"),
        (10, "FLUSH_DISK_TIMEOUT"),
        (12, "FLUSH_SLAVE_TIMEOUT"),
        (11, "SLAVE_NOT_AVAILABLE"),
    ],
)
def test_stored_statuses_map_from_their_response_codes(code, status):
    got = parse_stored(code, {"msgId": "7F0000", "queueId": "2", "queueOffset": "99"})
    assert got.status is SendStatus(status)
    assert (got.offset_msg_id, got.queue_id, got.queue_offset) == ("7F0000", 2, 99)


def test_a_stored_answer_without_its_header_is_a_header_error():
    with pytest.raises(HeaderError, match="queueOffset"):
        parse_stored(ResponseCode.SUCCESS, {"msgId": "7F", "queueId": "1"})
