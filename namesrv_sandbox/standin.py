"""A broker stand-in: enough of a RocketMQ broker for a producer, an admin tool and a name
server to talk to. It is not a broker: it stores nothing, serves no consumer, and keeps only
counters and the last ``keep_messages`` messages in memory, at most ``keep_message_bytes`` of
them (a message's body, properties and names, with a fixed overhead each).

It registers its topics with the name servers on kept connections and re-registers every
``register_interval_s`` (upstream's 30 s), answers HEART_BEAT, UNREGISTER_CLIENT,
GET_MAX_OFFSET (the detector's probe), SEND_MESSAGE_V2 (decoding the message as a consumer
would, counting it, giving it a queue offset), UPDATE_AND_CREATE_TOPIC and
DELETE_TOPIC_IN_BROKER (each followed by a register with a new data version, as a broker
registers a topic change; a topic name upstream's ``TopicValidator`` refuses is refused at
creation, as a broker refuses it), GET_BROKER_RUNTIME_INFO (its put counters, for
``clusterList -m``) and QUERY_TOPIC_CONSUME_BY_WHO (no group: it serves no consumer). Each
register's outcome per name server is kept (``registers``) and told to ``on_register``, so a
refusal is reported as one. It can be told to misbehave:

* ``slow(ms)``: every answer waits that long;
* ``busy(code, remark)``: sends are answered with a busy code (probes still answered);
* ``black_hole()``: requests are read and never answered;
* ``freeze()``: hung, as a stalled broker process: no registers and no answers, every
  connection kept open, so a name server drops it only once its heartbeats are overdue (its
  broker expiry); ``normal()`` thaws it and it registers again at once;
* ``refuse()``: the port stops listening and open connections are dropped (``accept()`` undoes);
* ``shutdown(grace_ms)``: GoAway (7004, oneway) to every client connection, unregister from the
  name servers, serve on for the grace period, then close; ``kill()`` is the abrupt stop.

``namesrv-sandbox`` (``namesrv_sandbox.cli``) runs stand-ins as a process a user can drive.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet import defer, task
from twisted.internet.protocol import Factory, Protocol

from client_push.runtime.twisted_loop import TwistedRuntime, describe
from client_push.wire.remoting import ConnectionBounds, RemotingConnection
from namesrv_sandbox.broker_requests import register_request, topic_configs, unregister_request
from protocol.bodies import encode_group_list, encode_kv_table
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import FrameDecoder, RemotingCommand, encode_command
from protocol.headers import CreateTopicRequestHeader, DeleteTopicRequestHeader
from protocol.message import MessageError, ReceivedMessage, decode_send_request
from protocol.push_codec import encode_go_away
from protocol.route_model import DataVersion
from protocol.topic_name import topic_name_problem

log = logging.getLogger("namesrv_sandbox.standin")

NORMAL, SLOW, BUSY, BLACK_HOLE, FROZEN = "normal", "slow", "busy", "black-hole", "frozen"
BUSY_REMARK = "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while"


class _ClientConn(Protocol):
    def __init__(self, broker: BrokerStandIn) -> None:
        self.broker = broker
        self.decoder = FrameDecoder(broker.max_frame_size)
        self.open = False

    def connectionMade(self) -> None:
        self.open = True
        self.broker._conns.add(self)
        self.broker.counters["connections_accepted"] += 1

    def connectionLost(self, reason: Any = None) -> None:
        self.open = False
        self.broker._conns.discard(self)

    def dataReceived(self, data: bytes) -> None:
        try:
            commands = self.decoder.feed(data)
        except ProtocolError as exc:
            self.broker.counters["frames_refused"] += 1
            log.warning("dropping a client: %s", exc.remark)
            transport: Any = self.transport
            transport.abortConnection()
            return
        for cmd in commands:
            if not cmd.is_response:
                self.broker._request(self, cmd)

    def write(self, cmd: RemotingCommand) -> None:
        if self.open:
            transport: Any = self.transport
            transport.write(encode_command(cmd))


class _Factory(Factory):
    def __init__(self, broker: BrokerStandIn) -> None:
        self.broker = broker

    def buildProtocol(self, addr: Any) -> _ClientConn:
        return _ClientConn(self.broker)


MESSAGE_OVERHEAD = 512
"""What a kept message costs beyond its strings and body (its objects and dict)."""


def message_cost(msg: ReceivedMessage) -> int:
    """The bytes a kept message holds, counted for ``keep_message_bytes``."""
    strings = len(msg.producer_group) + len(msg.topic) + len(msg.broker_name or "")
    props = sum(len(k) + len(v) + 100 for k, v in msg.properties.items())
    return MESSAGE_OVERHEAD + len(msg.body) + strings + props


class BrokerStandIn:
    def __init__(
        self,
        broker_name: str,
        topics: dict[str, int],
        namesrv_addrs: Sequence[str] = (),
        *,
        reactor: Any = None,
        clock: Any = None,
        port: int = 0,
        cluster: str = "DefaultCluster",
        broker_id: int = 0,
        auto_create_topic_enable: bool = False,
        register_interval_s: float = 30.0,
        keep_messages: int = 1_000,
        keep_message_bytes: int = 16 * 1024 * 1024,
        max_frame_size: int = 16 * 1024 * 1024,
    ) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.broker_name = broker_name
        self.topics = dict(topics)
        self.perms: dict[str, int] = {}
        """Topic -> perm where not read-write (6); the default topic needs inherit (7)."""
        self.read_queues: dict[str, int] = {}
        """Topics whose read queue count is not their write queue count (``self.topics``)."""
        self.auto_create_topic_enable = auto_create_topic_enable
        """As upstream's broker setting: a send to an unknown topic creates it from the
        default topic named in its header when that one's perm includes inherit."""
        self.namesrv_addrs = list(namesrv_addrs)
        self.reactor = reactor
        self.clock = clock if clock is not None else reactor
        self.port = port
        self.cluster = cluster
        self.broker_id = broker_id
        """0: the group's master; a slave promoted by a controller re-registers with 0."""
        self.register_interval_s = register_interval_s
        self.max_frame_size = max_frame_size
        self.mode = NORMAL
        self.latency_ms = 0
        self.busy_code = int(ResponseCode.SYSTEM_BUSY)
        self.busy_remark = BUSY_REMARK
        self.answer_go_away = False
        """While shutting down, answer requests with 1500 (upstream's GoAway) instead."""
        self.messages: deque[ReceivedMessage] = deque(maxlen=keep_messages)
        self.keep_message_bytes = keep_message_bytes
        self.messages_bytes = 0
        """What ``messages`` holds, by :func:`message_cost`."""
        self.last_send_fields: dict[str, str] = {}
        """The header fields of the last SEND_MESSAGE_V2, as they came."""
        self.counters: Counter[str] = Counter()
        self.by_topic: Counter[str] = Counter()
        self._offsets: Counter[tuple[str, int]] = Counter()
        self._conns: set[_ClientConn] = set()
        self._listening: Any = None
        self._namesrv: dict[str, RemotingConnection] = {}
        self._register_loop: task.LoopingCall | None = None
        self._data_version = DataVersion(
            state_version=0, timestamp=int(self.clock.seconds() * 1000), counter=1
        )
        self.stopping = False
        self.stopped: defer.Deferred[None] = defer.Deferred()
        self.on_topic_change: Callable[[str, str], None] = lambda verb, topic: None
        """Told ``(verb, topic)`` after a topic admin request: created, updated or deleted."""
        self.registers: dict[str, str] = {}
        """Name-server address -> the last register's outcome: ``ok``, ``refused: REMARK`` or
        ``failed: WHY``."""
        self.on_register: Callable[[str, str], None] = lambda addr, outcome: None
        """Told ``(name-server address, outcome)`` after each register was answered."""

    def _keep(self, msg: ReceivedMessage) -> None:
        """Keep ``msg`` among the last messages, dropping the oldest past the count or bytes
        bound; one larger than the whole byte bound is counted, not kept."""
        cost = message_cost(msg)
        if cost > self.keep_message_bytes:
            self.counters["messages_not_kept"] += 1
            return
        messages = self.messages
        if messages.maxlen is not None and len(messages) == messages.maxlen and messages:
            self.messages_bytes -= message_cost(messages.popleft())
        while messages and self.messages_bytes + cost > self.keep_message_bytes:
            self.messages_bytes -= message_cost(messages.popleft())
        if messages.maxlen == 0:
            return
        messages.append(msg)
        self.messages_bytes += cost

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def received(self) -> int:
        return self.counters["messages_received"]

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> defer.Deferred[None]:
        """Listen, then register with every name server; fires once each registration has
        been answered (or failed: a missing name server is retried every interval)."""
        self.accept()
        if not self.namesrv_addrs:
            return defer.succeed(None)
        self._start_registering()
        return self._register_all()

    def _start_registering(self) -> None:
        self._register_loop = task.LoopingCall(self._register_all)
        self._register_loop.clock = self.clock
        self._register_loop.start(self.register_interval_s, now=False)

    def promote(self) -> defer.Deferred[None]:
        """Become the group's master (as a controller's election makes a slave) and say so to
        the name servers at once."""
        self.broker_id = 0
        return self._register_all()

    def accept(self) -> None:
        if self._listening is None:
            self._listening = self.reactor.listenTCP(
                self.port, _Factory(self), interface="127.0.0.1"
            )
            self.port = self._listening.getHost().port

    def refuse(self) -> defer.Deferred[None]:
        """Stop listening and drop every client connection: connects are refused."""
        self.counters["refuse"] += 1
        for conn in list(self._conns):
            transport: Any = conn.transport
            transport.abortConnection()
        listening, self._listening = self._listening, None
        if listening is None:
            return defer.succeed(None)
        return defer.maybeDeferred(listening.stopListening)

    def shutdown(self, grace_ms: int = 3_000, *, go_away: bool = True) -> defer.Deferred[None]:
        """Graceful stop: GoAway to clients, unregister, serve the grace period, close."""
        if self.stopping:
            return self.stopped
        self.stopping = True
        if go_away:
            frame = RemotingCommand.request(
                RequestCode.GO_AWAY,
                body=encode_go_away(grace_ms, [], f"broker {self.broker_name} shutting down"),
                oneway=True,
            )
            for conn in list(self._conns):
                conn.write(frame)
                self.counters["go_away_sent"] += 1
        if self._register_loop is not None and self._register_loop.running:
            self._register_loop.stop()
        unregistered = self._unregister_all()
        listening, self._listening = self._listening, None
        port_closed = (
            defer.maybeDeferred(listening.stopListening)
            if listening is not None
            else defer.succeed(None)
        )

        def close(_: Any) -> Any:
            if grace_ms <= 0:
                return self._close_all()
            return task.deferLater(self.clock, grace_ms / 1000.0, self._close_all)

        unregistered.addBoth(close)
        # Stopped means the port is free again: a broker started at once can bind it.
        unregistered.addBoth(lambda _: port_closed)
        unregistered.addBoth(lambda _: self.stopped.callback(None))
        return self.stopped

    def kill(self) -> defer.Deferred[None]:
        """Abrupt stop: no GoAway, no unregister, connections aborted."""
        self.stopping = True
        if self._register_loop is not None and self._register_loop.running:
            self._register_loop.stop()
        d = self.refuse()
        for proto in list(self._namesrv.values()):
            proto.abort()
        self._namesrv.clear()
        if not self.stopped.called:
            self.stopped.callback(None)
        return d

    def _close_all(self) -> None:
        for conn in list(self._conns):
            transport: Any = conn.transport
            transport.loseConnection()
        for proto in list(self._namesrv.values()):
            proto.close()
        self._namesrv.clear()

    # -- behaviour switches ---------------------------------------------------------------------

    def normal(self) -> None:
        thawed = self.mode == FROZEN
        self.mode, self.latency_ms = NORMAL, 0
        if thawed and not self.stopping and self.namesrv_addrs:
            # A name server has likely closed the connections of a broker it expired: the
            # thawed one registers on new connections, as a broker reconnects.
            for proto in self._namesrv.values():
                proto.close()
            self._namesrv.clear()
            self._start_registering()
            self._register_all()

    def slow(self, latency_ms: int) -> None:
        self.mode, self.latency_ms = SLOW, latency_ms

    def busy(self, code: int = ResponseCode.SYSTEM_BUSY, remark: str = BUSY_REMARK) -> None:
        self.mode, self.busy_code, self.busy_remark = BUSY, int(code), remark

    def black_hole(self) -> None:
        self.mode = BLACK_HOLE

    def freeze(self) -> None:
        """Hang: registers stop and requests go unanswered, connections stay open."""
        self.mode = FROZEN
        if self._register_loop is not None and self._register_loop.running:
            self._register_loop.stop()

    def stats(self) -> dict[str, Any]:
        return {
            "broker": self.broker_name,
            "addr": self.addr,
            "mode": self.mode,
            "connections": len(self._conns),
            "by_topic": dict(self.by_topic),
            **dict(self.counters),
        }

    # -- name servers ---------------------------------------------------------------------------

    def _register_all(self) -> defer.Deferred[None]:
        ds = [self._register(addr) for addr in self.namesrv_addrs]
        return defer.DeferredList(ds, consumeErrors=True).addCallback(lambda _: None)

    async def _namesrv_conn(self, addr: str) -> RemotingConnection:
        proto = self._namesrv.get(addr)
        if proto is not None and proto.connected:
            return proto
        runtime = TwistedRuntime(self.reactor, self.clock)
        bounds = ConnectionBounds(max_frame_size=self.max_frame_size)
        proto = await RemotingConnection(runtime, bounds, label=addr).open(addr, 3_000)
        self._namesrv[addr] = proto
        return proto

    def _register(self, addr: str) -> defer.Deferred[None]:
        async def go() -> None:
            try:
                proto = await self._namesrv_conn(addr)
                request = register_request(
                    topic_configs_for(self.topics, self.perms, self.read_queues),
                    cluster=self.cluster,
                    broker_name=self.broker_name,
                    broker_addr=self.addr,
                    broker_id=self.broker_id,
                    data_version=self._data_version,
                )
                response = await proto.request(request, 3_000)
            except Exception as exc:
                self.counters["register_failed"] += 1
                log.warning("register with %s failed: %s", addr, describe(exc))
                self._registered(addr, f"failed: {describe(exc)}")
                return
            if response.code == ResponseCode.SUCCESS:
                self.counters["registered"] += 1
                self._registered(addr, "ok")
            else:
                self.counters["register_refused"] += 1
                log.warning("name server %s refused register: %s", addr, response.remark)
                self._registered(addr, f"refused: {response.remark or response.code}")

        return defer.ensureDeferred(go())

    def _registered(self, addr: str, outcome: str) -> None:
        self.registers[addr] = outcome
        self.on_register(addr, outcome)

    def _unregister_all(self) -> defer.Deferred[None]:
        async def one(addr: str) -> None:
            try:
                proto = await self._namesrv_conn(addr)
                request = unregister_request(
                    cluster=self.cluster,
                    broker_name=self.broker_name,
                    broker_addr=self.addr,
                    broker_id=self.broker_id,
                )
                await proto.request(request, 3_000)
                self.counters["unregistered"] += 1
            except Exception as exc:
                self.counters["unregister_failed"] += 1
                log.warning("unregister at %s failed: %s", addr, describe(exc))

        ds = [defer.ensureDeferred(one(addr)) for addr in self.namesrv_addrs]
        return defer.DeferredList(ds, consumeErrors=True).addCallback(lambda _: None)

    # -- client requests ------------------------------------------------------------------------

    def _request(self, conn: _ClientConn, cmd: RemotingCommand) -> None:
        self.counters[f"requests.{cmd.code}"] += 1
        if self.mode in (BLACK_HOLE, FROZEN):
            self.counters["swallowed"] += 1
            return
        response = self._answer(cmd)
        if cmd.is_oneway:
            return
        if self.latency_ms > 0 and self.mode == SLOW:
            self.clock.callLater(self.latency_ms / 1000.0, conn.write, response)
        else:
            conn.write(response)

    def _answer(self, cmd: RemotingCommand) -> RemotingCommand:
        if self.stopping and self.answer_go_away:
            self.counters["answered_go_away"] += 1
            return cmd.make_response(ResponseCode.GO_AWAY, "broker is shutting down")
        code = cmd.code
        if code in (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT):
            return cmd.make_response(ResponseCode.SUCCESS)
        if code == RequestCode.GET_MAX_OFFSET:
            topic = cmd.ext_fields.get("topic", "")
            queue = _int(cmd.ext_fields.get("queueId"))
            offset = self._offsets[(topic, queue)]
            return cmd.make_response(ResponseCode.SUCCESS, None, {"offset": str(offset)})
        if code == RequestCode.SEND_MESSAGE_V2:
            return self._send(cmd)
        if code == RequestCode.UPDATE_AND_CREATE_TOPIC:
            return self._create_topic(cmd)
        if code == RequestCode.DELETE_TOPIC_IN_BROKER:
            return self._delete_topic(cmd)
        if code == RequestCode.GET_BROKER_RUNTIME_INFO:
            return cmd.make_response(ResponseCode.SUCCESS, body=encode_kv_table(self._runtime()))
        if code == RequestCode.QUERY_TOPIC_CONSUME_BY_WHO:
            return cmd.make_response(ResponseCode.SUCCESS, body=encode_group_list(()))
        return cmd.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {code} not supported"
        )

    def _send(self, cmd: RemotingCommand) -> RemotingCommand:
        if self.mode == BUSY:
            self.counters["answered_busy"] += 1
            return cmd.make_response(self.busy_code, self.busy_remark)
        self.last_send_fields = dict(cmd.ext_fields)
        try:
            msg = decode_send_request(cmd.ext_fields, cmd.body)
        except (ProtocolError, MessageError) as exc:
            self.counters["messages_refused"] += 1
            return cmd.make_response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        if msg.topic not in self.topics and not self._create_on_send(msg.topic, cmd.ext_fields):
            self.counters["messages_refused"] += 1
            return cmd.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{msg.topic}] not exist on this broker"
            )
        if not 0 <= msg.queue_id < self.topics[msg.topic]:
            self.counters["messages_refused"] += 1
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"queueId[{msg.queue_id}] is illegal"
            )
        key = (msg.topic, msg.queue_id)
        offset = self._offsets[key]
        self._offsets[key] = offset + 1
        self.counters["messages_received"] += 1
        self.by_topic[msg.topic] += 1
        self._keep(msg)
        return cmd.make_response(
            ResponseCode.SUCCESS,
            None,
            {
                "msgId": offset_msg_id(self.port, offset),
                "queueId": str(msg.queue_id),
                "queueOffset": str(offset),
            },
        )

    def _create_topic(self, cmd: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC: the topic added or replaced (its write queue count, its
        perm), then registered with the name servers at once."""
        try:
            header = CreateTopicRequestHeader.from_wire(cmd.ext_fields)
        except (ProtocolError, ValueError) as exc:
            return cmd.make_response(ResponseCode.INVALID_PARAMETER, str(exc))
        problem = topic_name_problem(header.topic)
        if problem is not None:
            # As upstream's broker (TopicValidator.validateTopic): refused before it exists.
            self.counters["topics_refused"] += 1
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"the topic is refused: {problem}")
        if header.write_queue_nums < 1 or header.read_queue_nums < 1:
            return cmd.make_response(
                ResponseCode.INVALID_PARAMETER,
                "a topic needs at least one read and one write queue",
            )
        verb = "updated" if header.topic in self.topics else "created"
        self.topics[header.topic] = header.write_queue_nums
        if header.read_queue_nums == header.write_queue_nums:
            self.read_queues.pop(header.topic, None)
        else:
            self.read_queues[header.topic] = header.read_queue_nums
        if header.perm == 6:
            self.perms.pop(header.topic, None)
        else:
            self.perms[header.topic] = header.perm
        self.counters["topics_created"] += 1
        self._topics_changed()
        self.on_topic_change(verb, header.topic)
        return cmd.make_response(ResponseCode.SUCCESS)

    def _delete_topic(self, cmd: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_BROKER: the topic dropped, as a broker answers even for a topic it
        does not hold, then the remaining topics registered."""
        try:
            topic = DeleteTopicRequestHeader.from_wire(cmd.ext_fields).topic
        except (ProtocolError, ValueError) as exc:
            return cmd.make_response(ResponseCode.INVALID_PARAMETER, str(exc))
        if self.topics.pop(topic, None) is not None:
            self.perms.pop(topic, None)
            self.read_queues.pop(topic, None)
            self.counters["topics_deleted"] += 1
            self._topics_changed()
            self.on_topic_change("deleted", topic)
        return cmd.make_response(ResponseCode.SUCCESS)

    def _runtime(self) -> dict[str, str]:
        """Upstream's runtime-info counters that ``clusterList -m`` reads: messages put since
        this stand-in started (all today), none got (it serves no consumer)."""
        put = str(self.counters["messages_received"])
        return {
            "msgPutTotalYesterdayMorning": "0",
            "msgPutTotalTodayMorning": "0",
            "msgPutTotalTodayNow": put,
            "msgGetTotalYesterdayMorning": "0",
            "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": "0",
        }

    def _topics_changed(self) -> None:
        """A new data version, registered with every name server at once."""
        self._data_version = DataVersion(
            state_version=0,
            timestamp=int(self.clock.seconds() * 1000),
            counter=self._data_version.counter + 1,
        )
        self._register_all()

    def _create_on_send(self, topic: str, fields: dict[str, str]) -> bool:
        """Upstream's ``createTopicInSendMessageMethod``: queues at most the default topic's,
        its perm without inherit; then registered with the name servers at once."""
        default = fields.get("c", "")
        perm = self.perms.get(default, 6)
        if not self.auto_create_topic_enable or default not in self.topics or not perm & 1:
            return False
        self.topics[topic] = min(_int(fields.get("d")), self.topics[default])
        self.perms[topic] = perm & ~1
        self.counters["topics_auto_created"] += 1
        self._topics_changed()
        return True


def topic_configs_for(
    topics: dict[str, int],
    perms: dict[str, int] | None = None,
    read_queues: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The register table of ``topics`` (name: write queues), with their perms and read queue
    counts where they differ from the defaults (6, the write queue count)."""
    out: dict[str, Any] = {}
    perms, read_queues = perms or {}, read_queues or {}
    for name, queues in topics.items():
        out.update(
            topic_configs(
                name, queues=queues, perm=perms.get(name, 6), read_queues=read_queues.get(name)
            )
        )
    return out


def offset_msg_id(port: int, offset: int) -> str:
    """Upstream's ``MessageDecoder.createMessageId``: store host ip(4) port(4) offset(8)."""
    return struct.pack(">4sIq", bytes([127, 0, 0, 1]), port, offset).hex().upper()


def _int(text: str | None) -> int:
    try:
        return int(text or "0")
    except ValueError:
        return -1


def parse_topics(specs: Sequence[str]) -> dict[str, int]:
    """``NAME[:QUEUES]`` specs (4 queues when not given) to a topic table."""
    out = {}
    for spec in specs:
        name, _, queues = spec.partition(":")
        if not name or (queues and not queues.isdigit()) or (queues and int(queues) < 1):
            raise ValueError(f"a topic is NAME[:QUEUES], got {spec!r}")
        problem = topic_name_problem(name)
        if problem is not None:
            raise ValueError(f"{problem} (as upstream's brokers: 1-127 of A-Z a-z 0-9 _ - % |)")
        out[name] = int(queues or "4")
    return out
