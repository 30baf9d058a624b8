"""A small name server that speaks the frames over loopback, and helpers that drive a
RouteClient against it.

It follows the contract of docs/protocol-extension.md "Restarts and absence": while
``warming`` (a server that just started) a lookup of a topic it has no route for and did not
see deleted is answered SYSTEM_ERROR with ``warmingUp=true``, and its SubscribeAck says so;
a topic deleted here (``delete``) is answered TOPIC_NOT_EXIST with ``topicDeleted=true`` and
acknowledged ``deleted``; one whose brokers left (``unroute``) is just absent.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

from twisted.internet import defer, protocol, reactor, task

from client_push.config import ClientConfig
from client_push.routes.client import RouteClient
from client_push.routes.events import RouteEvent
from protocol import bodies
from protocol.codes import Perm, RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command
from protocol.push_codec import (
    decode_subscribe,
    decode_unsubscribe,
    encode_go_away,
    encode_notification,
    encode_subscribe_ack,
)
from protocol.route_model import BrokerData, QueueData, TopicRouteData
from support.loopback_wait import until

RW = int(Perm.READ | Perm.WRITE)


def make_route(perm: int = RW, queues: int = 4, broker: str = "broker-a") -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(broker, queues, queues, perm)],
        broker_datas=[BrokerData("DefaultCluster", broker, {0: "10.0.0.1:10911"})],
    )


class FakeConn(protocol.Protocol):
    def __init__(self, ns: FakeNamesrv) -> None:
        self.ns = ns
        self.decoder = FrameDecoder(1 << 24)
        self.topics: set[str] = set()
        self.sequence = 0

    def connectionMade(self) -> None:
        self.ns.conns.append(self)

    def connectionLost(self, reason: Any = None) -> None:
        if self in self.ns.conns:
            self.ns.conns.remove(self)

    def dataReceived(self, data: bytes) -> None:
        for cmd in self.decoder.feed(data):
            if cmd.is_response:
                continue
            self.ns.requests.append(cmd)
            response = self.ns.answer(self, cmd)
            if response is not None and not cmd.is_oneway:
                self.transport.write(encode_command(response))  # type: ignore[union-attr]

    def push(self, cmd: RemotingCommand) -> None:
        self.transport.write(encode_command(cmd))  # type: ignore[union-attr]


class FakeNamesrv(protocol.Factory):
    """Answers GET_ROUTEINFO_BY_TOPIC, SUBSCRIBE and UNSUBSCRIBE like ours; records requests."""

    def __init__(
        self,
        epoch: str = "e1",
        push: bool = True,
        *,
        warming: bool = False,
        uptime_ms: int = 0,
        network: Any = None,
    ) -> None:
        """``network``: the reactor it listens on (default the real one; a world's in
        memory)."""
        self.network = network if network is not None else reactor
        self.epoch = epoch
        self.push = push
        self.warming = warming
        """In the start-up window: "not heard of" is not absence."""
        self.warm_in_ms = 45_000
        self.uptime_ms = uptime_ms
        """What its SubscribeAck says (0: says nothing, as a server of another version)."""
        self.deleted: set[str] = set()
        """Topics deleted here since it started (``topicDeleted``, an ack's ``deleted``)."""
        self.routes: dict[str, tuple[TopicRouteData, int]] = {}
        self.versions: Counter[str] = Counter()
        self.requests: list[RemotingCommand] = []
        self.conns: list[FakeConn] = []
        self.go_away_gets = 0
        self.held_gets: list[tuple[FakeConn, RemotingCommand]] = []
        self.hold_gets = False
        self.drop_subscribes = 0
        """SUBSCRIBE requests left unanswered from now on (as a stalled server would)."""
        self.port = 0
        self._listening: Any = None

    def buildProtocol(self, addr: object) -> FakeConn:
        return FakeConn(self)

    def listen(self, port: int = 0) -> str:
        self._listening = self.network.listenTCP(port, self, interface="127.0.0.1")
        self.port = self._listening.getHost().port
        return self.addr

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> defer.Deferred[Any]:
        for conn in list(self.conns):
            conn.transport.loseConnection()  # type: ignore[union-attr]
        return defer.maybeDeferred(self._listening.stopListening)

    # route table
    def set_route(self, topic: str, route: TopicRouteData) -> int:
        self.versions[topic] += 1
        self.routes[topic] = (route, self.versions[topic])
        self.deleted.discard(topic)
        return self.versions[topic]

    def delete(self, topic: str) -> int:
        """An operator's delete: clients are told it is gone."""
        self.versions[topic] += 1
        self.routes.pop(topic, None)
        self.deleted.add(topic)
        return self.versions[topic]

    def unroute(self, topic: str) -> int:
        """Its brokers left (or never registered here): no route, and no deletion either."""
        self.versions[topic] += 1
        self.routes.pop(topic, None)
        return self.versions[topic]

    def count(self, code: int, topic: str | None = None) -> int:
        return sum(
            1
            for r in self.requests
            if r.code == code and (topic is None or r.ext_fields.get("topic") == topic)
        )

    def answer(self, conn: FakeConn, cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            if self.go_away_gets:
                self.go_away_gets -= 1
                return cmd.make_response(ResponseCode.GO_AWAY, "going away")
            if self.hold_gets:
                self.held_gets.append((conn, cmd))
                return None
            return self.route_answer(cmd)
        if cmd.code in (
            RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
            RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED,
        ):
            if not self.push:
                return cmd.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "no push here")
            if cmd.code == RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED:
                conn.topics.difference_update(decode_unsubscribe(cmd.body).topics)
                return cmd.make_response(ResponseCode.SUCCESS)
            if self.drop_subscribes:
                self.drop_subscribes -= 1
                return None
            topics = list(decode_subscribe(cmd.body).topics)
            conn.topics.update(topics)
            acks = [(t, self.versions[t], t in self.routes, t in self.deleted) for t in topics]
            body = encode_subscribe_ack(
                acks,
                self.epoch,
                warming_up=self.warming,
                warm_in_ms=self.warm_in_ms if self.warming else 0,
                uptime_ms=self.uptime_ms,
            )
            return cmd.make_response(ResponseCode.SUCCESS, body=body)
        return cmd.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "unknown")

    def route_answer(self, cmd: RemotingCommand) -> RemotingCommand:
        topic = cmd.ext_fields["topic"]
        ext = {"routeVersion": str(self.versions[topic])}
        if topic in self.deleted:
            ext["topicDeleted"] = "true"
        elif topic not in self.routes and self.warming:
            remark = f"name server not ready: warming up, {self.warm_in_ms} ms left"
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, remark, {"warmingUp": "true"})
        if topic not in self.routes:
            return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, f"no route of {topic}", ext)
        route, _version = self.routes[topic]
        body = bodies.encode_route(route, standard_json=True)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=ext, body=body)

    def release_gets(self) -> None:
        held, self.held_gets = self.held_gets, []
        for conn, cmd in held:
            conn.push(self.route_answer(cmd))

    def notify(
        self,
        changes: list[tuple[str, int, int]],
        *,
        conn: FakeConn | None = None,
        sequence: int | None = None,
        epoch: str | None = None,
        emitted_at_ms: int = 1_000,
    ) -> None:
        for c in [conn] if conn else list(self.conns):
            c.sequence = sequence if sequence is not None else c.sequence + 1
            body = encode_notification(changes, c.sequence, emitted_at_ms, epoch or self.epoch)
            c.push(
                RemotingCommand.request(
                    RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED, body=body, oneway=True
                )
            )

    def go_away(self, alternatives: list[str]) -> None:
        body = encode_go_away(5_000, alternatives, "test")
        for c in self.conns:
            c.push(RemotingCommand.request(RequestCode.GO_AWAY, body=body, oneway=True))

    def subscribed(self) -> set[str]:
        return set().union(*(c.topics for c in self.conns)) if self.conns else set()


class Harness:
    def __init__(self, ns: FakeNamesrv, client: RouteClient, clock: task.Clock) -> None:
        self.ns = ns
        self.client = client
        self.clock = clock
        self.events: list[RouteEvent] = []

    def listen(self, topic: str) -> None:
        self.client.add_listener(topic, self.events.append)

    async def connected(self) -> None:
        await until(lambda: self.client.connected and bool(self.ns.conns))


def make_client(addrs: list[str], clock: task.Clock, **overrides: Any) -> RouteClient:
    cfg = ClientConfig(namesrv_addrs=tuple(addrs), **overrides)
    return RouteClient(cfg, reactor, random.Random(7), clock=clock)


def get(client: RouteClient, topic: str) -> defer.Deferred[Any]:
    return defer.ensureDeferred(client.get_route(topic))


async def held(h: Harness, topic: str) -> None:
    h.ns.set_route(topic, make_route())
    await get(h.client, topic)
    await until(lambda: topic in h.ns.subscribed() and h.client.push_active)


def started_client(tmp_path: Path) -> tuple[FakeNamesrv, task.Clock, Path, RouteClient]:
    """A fake name server, and a route client on a fake clock writing telemetry to a file."""
    ns = FakeNamesrv()
    ns.listen()
    clock = task.Clock()
    path = tmp_path / "telemetry.jsonl"
    client = make_client([ns.addr], clock, telemetry_path=str(path))
    client.start()
    return ns, clock, path, client
