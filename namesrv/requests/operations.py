"""The operations extension: GET_PUSH_STATUS (7005) and GET_SUBSCRIPTIONS (7006).

Both answer with a JSON body (docs/protocol-extension.md) so any tool can read them without
the protobuf schema. They only read state; with ACL on they are admin requests, since the
subscription list names client addresses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from namesrv.push.change_detector import ChangeDetector
from namesrv.push.subscriber import Subscriber
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.requests.startup_window import StartupWindow
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import HeaderError
from protocol.frame import RemotingCommand

DEFAULT_SUBSCRIPTION_LIMIT = 1_000
MAX_SUBSCRIPTION_LIMIT = 100_000
"""Connections listed per GET_SUBSCRIPTIONS answer: bounds the body a request can cause."""
TOPICS_LISTED_PER_CONNECTION = 100


@dataclass(slots=True)
class PushStatusSource:
    """What the status answer reads; the server passes its own parts."""

    epoch: str
    push_enabled: bool
    tick_interval_ms: int
    detector: ChangeDetector
    subscriptions: SubscriptionRegistry
    degraded: Callable[[], bool]
    recovering: Callable[[], bool]
    stats: Callable[[], Mapping[str, int]]
    connections: Callable[[], Iterable[Subscriber]]
    startup: StartupWindow | None = None
    """The start-up window; None: none (never warming up)."""


def push_status(src: PushStatusSource) -> dict[str, Any]:
    d = src.detector
    startup = src.startup
    return {
        "epoch": src.epoch,
        "warmingUp": startup is not None and startup.warming_up,
        "warmInMs": startup.left_ms() if startup is not None else 0,
        "uptimeMs": startup.uptime_ms() if startup is not None else 0,
        "pushEnabled": src.push_enabled,
        "tickIntervalMs": src.tick_interval_ms,
        "ticks": d.stats.ticks,
        "degraded": src.degraded(),
        "recovering": src.recovering(),
        "debt": {
            "connections": d.pending_connections,
            "topics": d.pending_topic_count,
            "dirtyTopics": d.dirty_count,
        },
        "subscriptions": src.subscriptions.total,
        "subscribedConnections": src.subscriptions.connection_count,
        "counters": dict(sorted(src.stats().items())),
    }


def subscriptions(src: PushStatusSource, ext: Mapping[str, str]) -> dict[str, Any]:
    """Connections with subscriptions, most topics first; ``topic`` filters, ``limit`` bounds."""
    limit_text = ext.get("limit", "")
    limit = DEFAULT_SUBSCRIPTION_LIMIT
    if limit_text:
        if not limit_text.isdigit() or not 0 < int(limit_text) <= MAX_SUBSCRIPTION_LIMIT:
            raise HeaderError(
                f"header field limit must be 1..{MAX_SUBSCRIPTION_LIMIT}, got {limit_text!r}"
            )
        limit = int(limit_text)
    topic = ext.get("topic") or None
    subs = src.subscriptions
    rows: list[dict[str, Any]] = []
    for conn in src.connections():
        topics = subs.topics_of(conn)
        if not topics or (topic is not None and topic not in topics):
            continue
        rows.append(
            {
                "conn": conn.conn_id,
                "peer": conn.peer,
                "topicCount": len(topics),
                "topics": sorted(topics)[:TOPICS_LISTED_PER_CONNECTION],
                "pendingTopics": src.detector.pending_topics_of(conn),
            }
        )
    rows.sort(key=lambda r: (-r["topicCount"], r["conn"]))
    return {
        "connections": rows[:limit],
        "total": len(rows),
        "truncated": len(rows) > limit,
    }


def answer(src: PushStatusSource, code: int, request: RemotingCommand) -> RemotingCommand:
    if code == RequestCode.GET_PUSH_STATUS:
        body = push_status(src)
    else:
        body = subscriptions(src, request.ext_fields)
    return request.make_response(
        ResponseCode.SUCCESS, None, None, json.dumps(body, separators=(",", ":")).encode()
    )
