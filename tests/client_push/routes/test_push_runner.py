"""The push session's glue on a fake clock, with no connection: what it serves of the name
server's requests, and topics released."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from twisted.internet import task

from client_push.config import ClientConfig
from client_push.routes.events import Listeners
from client_push.routes.push_runner import PushRunner
from client_push.routes.telemetry import NullTelemetry
from client_push.runtime.twisted_loop import TwistedRuntime
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand
from protocol.push_codec import ChangeKind, encode_notification


@dataclass
class LeftConnection:
    """A connection the link does not serve on (never its current one)."""

    label: str = "10.0.0.8:9876"
    connected: int = 1


def runner() -> tuple[PushRunner, Counter[str]]:
    counters: Counter[str] = Counter()
    push = PushRunner(
        ClientConfig(namesrv_addrs=("10.0.0.9:9876",)),
        TwistedRuntime(None, task.Clock()),
        random.Random(1),
        NullTelemetry(),
        Listeners(counters),
        counters=counters,
        client_id="c@1",
    )
    return push, counters


def test_a_notification_from_a_connection_being_left_is_served_and_changes_nothing():
    push, counters = runner()
    push.routes.cache.touch("T", 1_000)
    body = encode_notification([("T", 9, ChangeKind.UPDATED)], 1, 1_000, "e")
    code = RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED
    notify = RemotingCommand.request(code, body=body, oneway=True)
    assert push.server_request(LeftConnection(), notify)  # type: ignore[arg-type]
    assert counters["notify_from_old_connection"] == 1 and counters["notify_received"] == 0
    assert push.fetches.inflight == {}


def test_a_code_the_push_extension_does_not_define_is_not_served():
    push, counters = runner()
    other = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert not push.server_request(LeftConnection(), other)  # type: ignore[arg-type]
    assert not counters


def test_released_topics_are_no_longer_held_and_counted_once():
    push, counters = runner()
    push.routes.cache.touch("A", 1_000)
    push.routes.cache.touch("B", 1_000)
    push.release(["A", "B", "never-held"])
    assert push.routes.cache.held() == [] and counters["topics_released"] == 2
