"""What a producer's connections to brokers send and meet besides messages: the detector's
probe and a broker's GoAway.

Pure. A probe is a GET_MAX_OFFSET of queue 0 of a topic the broker serves, the request
upstream's detector sends: any answer within the timeout, error codes included, means the
broker is reachable, except a GO_AWAY answer (1500). A broker stopping gracefully sends
GO_AWAY (7004, oneway) on every client connection, its body carrying the grace period; an
unreadable body is logged and counted and taken as no grace (the broker is leaving either
way). A response with code 1500 to a request is the same announcement without a grace period.
"""

from __future__ import annotations

import logging
from collections import Counter

from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.push_codec import decode_go_away

log = logging.getLogger("client_push.producer.broker_conns")


def is_go_away(cmd: RemotingCommand) -> bool:
    """Whether a request a broker sent on a producer's connection is its GoAway."""
    return cmd.code == RequestCode.GO_AWAY


def go_away_grace(cmd: RemotingCommand, label: str, counters: Counter[str]) -> int:
    """The grace period (ms) a GO_AWAY request announces; 0 when its body is unreadable."""
    try:
        return decode_go_away(cmd.body).grace_period_ms
    except ProtocolError as exc:
        counters["go_away_malformed"] += 1
        log.warning("malformed GoAway from broker %s (%s): taken as no grace", label, exc)
        return 0


def probe_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"})


def probe_says_going_away(response: RemotingCommand) -> bool:
    """A probe's answer: reachable, unless it is a GO_AWAY answer (the broker is stopping)."""
    return response.code == ResponseCode.GO_AWAY
