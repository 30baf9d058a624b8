"""Routes held by a client and the broker-departure notifications that change them.

Imports no Twisted, so the sans-I/O push-session tests share these routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.codes import Perm, RequestCode
from protocol.frame import RemotingCommand
from protocol.push_codec import BrokerChangeKind, encode_notification
from protocol.route_model import BrokerData, QueueData, TopicRouteData

if TYPE_CHECKING:
    from support.fake_namesrv import FakeNamesrv

RW = int(Perm.READ | Perm.WRITE)

TWO = TopicRouteData(
    queue_datas=[QueueData("broker-a", 4, 4, RW), QueueData("broker-b", 4, 4, RW)],
    broker_datas=[
        BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"}),
        BrokerData("DefaultCluster", "broker-b", {0: "10.0.0.2:10911"}),
    ],
)


ONLY_B = TopicRouteData(queue_datas=[TWO.queue_datas[1]], broker_datas=[TWO.broker_datas[1]])


def departure(
    ns: FakeNamesrv, steps: tuple[tuple[str, int, int], ...], sequence: int | None = None
):
    entry = (
        int(BrokerChangeKind.DEPARTED),
        "broker-a",
        "DefaultCluster",
        ((0, "10.0.0.1:10911"),),
        "unregister",
        True,
        False,
        steps,
        0,
    )
    for conn in ns.conns:
        conn.sequence = sequence if sequence is not None else conn.sequence + 1
        body = encode_notification([], conn.sequence, 1_000, ns.epoch, [entry])
        conn.push(
            RemotingCommand.request(
                RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, body=body, oneway=True
            )
        )
