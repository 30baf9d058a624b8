"""Request processors: one decoded command in, one response command (or nothing) out.

The dispatch table maps each request code to a method. Processors hold no sockets and no
timers: they validate the header and body once, call the pure registries, and encode the
answer. A :class:`ProtocolError` raised anywhere below becomes a response carrying its code and
remark, so every refusal tells the peer what was wrong.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

from namesrv.config import NamesrvConfig
from namesrv.ops.log_limit import RateLimitedLog
from namesrv.push.change_detector import ChangeDetector
from namesrv.push.subscriptions import SubscriptionRegistry
from namesrv.requests import register_validation as validation
from namesrv.requests.acl import AccessControl
from namesrv.routes.kv_config import KVConfig
from namesrv.routes.registry import RouteRegistry
from namesrv.routes.route_bodies import ORDER_TOPIC_CONFIG_NAMESPACE, RouteBodies
from protocol import bodies, headers
from protocol.codes import RequestCode, ResponseCode, Version
from protocol.errors import BodyError, ProtocolError
from protocol.frame import RemotingCommand
from protocol.push_codec import decode_subscribe, decode_unsubscribe, encode_subscribe_ack
from protocol.register_table_reader import ChunkCache
from protocol.route_model import DataVersion

_HASH_SLICE_BYTES = 4 << 20
"""CRC-32 of a large register body per reactor turn: a few milliseconds."""
_DIGEST = struct.Struct(">cQIq")
"""(form, length, CRC-32, hash) of a register body: what makes two bodies the same."""

log = logging.getLogger(__name__)

Handler = Callable[["Connection", RemotingCommand], "RemotingCommand | PendingResponse"]


class Connection(Protocol):
    """What a processor may know of the peer: an id for the registries and its address."""

    conn_id: int
    peer: str


@dataclass(slots=True)
class Services:
    """The pure cores the processors call, built and owned by the server."""

    config: NamesrvConfig
    registry: RouteRegistry
    kv: KVConfig
    routes: RouteBodies
    subscriptions: SubscriptionRegistry
    detector: ChangeDetector
    on_subscription_change: Callable[[str, Connection, list[str]], None] | None = None
    acl: AccessControl | None = None
    operations: Callable[[int, RemotingCommand], RemotingCommand] | None = None
    """Answers the operations extension (push status, subscriptions); None: unsupported."""
    clock: Any = None
    """Paces the refusal log (``seconds()``); None: the monotonic clock."""


@dataclass(slots=True)
class PendingResponse:
    """A register answered over several reactor turns: the server calls
    :meth:`RequestProcessor.step` once per turn until it returns the response."""

    steps: Generator[str, None, RemotingCommand]
    key: tuple[str, str]
    """(cluster, broker address): registers of one address are applied in arrival order."""
    started: bool = False
    last: str = ""
    """What the last step did: ``"read"`` (a slice of body) or ``"wait"`` (for the registry)."""
    request: Any = None
    signer: str | None = None
    """The ACL access key that signed the register, bound to the broker once it succeeds."""


def _ok(request: RemotingCommand, ext: dict[str, str] | None = None, body: bytes = b"") -> Any:
    return request.make_response(ResponseCode.SUCCESS, None, ext, body)


class RequestProcessor:
    def __init__(self, services: Services) -> None:
        self.s = services
        self.handled: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.register_bodies_read = 0
        """Register bodies parsed; an identical heartbeat body is not."""
        cache_bytes = services.config.registry.register_chunk_cache_bytes
        self.chunk_cache = ChunkCache(cache_bytes) if cache_bytes > 0 else None
        """Register-table chunks read lately (see ``registry.register_chunk_cache_bytes``)."""
        self._in_flight: Counter[tuple[str, str]] = Counter()
        self._log = RateLimitedLog(log, services.clock)
        """A peer decides how many requests get refused: its lines are paced per request."""
        c = RequestCode
        self._table: dict[int, Handler] = {
            c.PUT_KV_CONFIG: self.put_kv_config,
            c.GET_KV_CONFIG: self.get_kv_config,
            c.DELETE_KV_CONFIG: self.delete_kv_config,
            c.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            c.REGISTER_BROKER: self.register_broker,
            c.UNREGISTER_BROKER: self.unregister_broker,
            c.BROKER_HEARTBEAT: self.broker_heartbeat,
            c.QUERY_DATA_VERSION: self.query_data_version,
            c.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            c.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            c.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            c.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            c.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            c.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            c.REGISTER_TOPIC_IN_NAMESRV: self.register_topic_in_namesrv,
            c.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            c.GET_SYSTEM_TOPIC_LIST_FROM_NS: self._topic_list(
                lambda: self.s.registry.system_topics()
            ),
            c.GET_UNIT_TOPIC_LIST: self._topic_list(lambda: self.s.registry.unit_topics()),
            c.GET_HAS_UNIT_SUB_TOPIC_LIST: self._topic_list(
                lambda: self.s.registry.has_unit_sub_topics()
            ),
            c.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._topic_list(
                lambda: self.s.registry.has_unit_sub_ununit_topics()
            ),
            c.GET_BROKER_MEMBER_GROUP: self.get_broker_member_group,
            c.GET_NAMESRV_CONFIG: self.get_namesrv_config,
            c.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            c.SUBSCRIBE_TOPIC_ROUTE_CHANGED: self.subscribe,
            c.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED: self.unsubscribe,
        }
        if services.operations is not None:
            for code in (c.GET_PUSH_STATUS, c.GET_SUBSCRIPTIONS):
                self._table[code] = self._operation(services.operations, code)

    def process(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand | PendingResponse | None:
        """The response to send (now, or once a register's table is applied), or None for a
        oneway request."""
        handler = self._table.get(request.code)
        name = _code_name(request.code)
        response: RemotingCommand | PendingResponse
        if handler is None:
            self.refused["unsupported"] += 1
            response = request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"request code {request.code} is not supported by this name server",
            )
        else:
            acl = self.s.acl if self.s.acl is not None and self.s.acl.enabled else None
            try:
                signer = None
                if acl is not None:
                    signer = acl.check(request.code, name, request.ext_fields, request.body)
                response = handler(conn, request)
                if acl is not None and signer is not None:
                    if isinstance(response, PendingResponse):
                        response.signer = signer  # bound once the register succeeds
                    elif response.code == ResponseCode.SUCCESS:
                        acl.accepted(request.code, signer, request.ext_fields)
                self.handled[name] += 1
            except ProtocolError as exc:
                self.refused[name] += 1
                self._log.log(
                    logging.INFO, name, "refused %s from %s: %s", name, conn.peer, exc.remark
                )
                response = request.make_response(exc.code, exc.remark)
            except Exception as exc:  # a bug must cost one request, not the connection
                self.refused[name] += 1
                self._log.log(
                    logging.ERROR,
                    f"error.{name}",
                    "error processing %s from %s",
                    name,
                    conn.peer,
                    exc_info=True,
                )
                response = request.make_response(
                    ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__} while processing {name}"
                )
        if isinstance(response, PendingResponse):
            response.request = request
            return response  # the server steps it even for a oneway request, and drops the answer
        return None if request.is_oneway else response

    # -- KV config -------------------------------------------------------------------------

    def put_kv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.PutKVConfigRequestHeader.from_wire(req.ext_fields)
        self._kv_call(lambda: self.s.kv.put(h.namespace, h.key, h.value))
        return _ok(req)

    def get_kv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.GetKVConfigRequestHeader.from_wire(req.ext_fields)
        value = self.s.kv.get(h.namespace, h.key)
        if value is None:
            return req.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {h.namespace} Key: {h.key}",
            )
        return _ok(req, headers.GetKVConfigResponseHeader(value=value).to_wire())

    def delete_kv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.DeleteKVConfigRequestHeader.from_wire(req.ext_fields)
        self._kv_call(lambda: self.s.kv.delete(h.namespace, h.key))
        return _ok(req)

    def get_kv_list_by_namespace(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.GetKVListByNamespaceRequestHeader.from_wire(req.ext_fields)
        table = self.s.kv.list_namespace(h.namespace)
        if table is None:
            return req.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace}"
            )
        return _ok(req, body=bodies.encode_kv_table(table))

    @staticmethod
    def _kv_call(call: Callable[[], object]) -> None:
        try:
            call()
        except ValueError as exc:
            raise ProtocolError(str(exc), ResponseCode.INVALID_PARAMETER) from exc

    # -- brokers -------------------------------------------------------------------------------

    def register_broker(
        self, conn: Connection, req: RemotingCommand
    ) -> RemotingCommand | PendingResponse:
        """REGISTER_BROKER. A small body is read and applied now; a large one (past
        ``registry.register_read_slice_bytes``), a large table, or a register from an address
        whose earlier register is still in flight, is a :class:`PendingResponse` the server
        steps once per reactor turn (:meth:`step`)."""
        h = headers.RegisterBrokerRequestHeader.from_wire(req.ext_fields)
        validation.check_address("brokerAddr", h.broker_addr)
        validation.check_address("haServerAddr", h.ha_server_addr, required=False)
        key = (h.cluster_name, h.broker_addr)
        # A compressed body inflates to about 16 times its size (20-40 for real tables).
        weight = len(req.body) * (16 if h.compressed else 1)
        large = weight > self.s.config.registry.register_read_slice_bytes
        steps = self._register_steps(conn, req, h, large)
        if large or self._in_flight[key]:
            self._in_flight[key] += 1
            return PendingResponse(steps, key)
        try:
            next(steps)
        except StopIteration as done:
            response: RemotingCommand = done.value
            return response
        self._in_flight[key] += 1
        return PendingResponse(steps, key, started=True)

    def step(self, pending: PendingResponse) -> RemotingCommand | None:
        """One step of a pending register; its response (an error one for a refused body) once
        it is done, else None."""
        try:
            pending.last = next(pending.steps)
            pending.started = True
            return None
        except StopIteration as done:
            response: RemotingCommand = done.value
            acl = self.s.acl
            if acl is not None and pending.signer is not None and response.code == 0:
                request = pending.request
                acl.accepted(request.code, pending.signer, request.ext_fields)
        except ProtocolError as exc:
            self.refused["REGISTER_BROKER"] += 1
            log.info("refused REGISTER_BROKER from %s: %s", pending.key[1], exc.remark)
            response = pending.request.make_response(exc.code, exc.remark)
        except Exception as exc:  # a bug must cost one request, not the server
            self.refused["REGISTER_BROKER"] += 1
            log.exception("error processing REGISTER_BROKER from %s", pending.key[1])
            response = pending.request.make_response(
                ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__} while processing REGISTER_BROKER"
            )
        self._done(pending)
        return response

    def _done(self, pending: PendingResponse) -> None:
        self._in_flight[pending.key] -= 1
        if self._in_flight[pending.key] <= 0:
            del self._in_flight[pending.key]

    def _register_steps(
        self,
        conn: Connection,
        req: RemotingCommand,
        h: headers.RegisterBrokerRequestHeader,
        large: bool,
    ) -> Generator[str, None, RemotingCommand]:
        """Read, check and apply one register; yields ``"read"`` after each slice of reading
        and ``"wait"`` while its table is applied by the registry's jobs."""
        registry = self.s.registry
        body = bytes(req.body)
        chunk = self.s.config.registry.register_read_slice_bytes if large else len(body) + 1
        topics_per_step = registry.slice_topics if large else 1 << 62
        crc = 0
        view = memoryview(body)
        for offset in range(0, len(body), _HASH_SLICE_BYTES):  # in C, a few ms per slice
            crc = zlib.crc32(view[offset : offset + _HASH_SLICE_BYTES], crc)
            if large:
                yield "read"
        if h.body_crc32 != 0 and crc & 0x7FFFFFFF != h.body_crc32:
            raise ProtocolError("crc32 not match", ResponseCode.SYSTEM_ERROR)
        digest: bytes | None = None
        topic_configs: dict[str, bodies.TopicQueueSpec] | None
        if body:
            # Tells the heartbeat (the very body of the last register) apart: length, CRC-32
            # and the interpreter's keyed SipHash of the bytes (in C, cached on the object),
            # which a broker cannot steer into a collision without the process's secret key.
            digest = _DIGEST.pack(b"c" if h.compressed else b"p", len(body), crc, hash(body))
            parts = None
            if large:
                yield "read"  # hashing 16 MB is a few milliseconds of its own
            if registry.body_unchanged(
                h.cluster_name, h.broker_addr, h.broker_name, h.broker_id, digest
            ):
                # The heartbeat: the very body of this broker's last register, not read again.
                topic_configs, data_version, filter_servers, mapping = None, DataVersion(), [], {}
            else:
                self.register_bodies_read += 1
                reading = bodies.register_body_steps(
                    body,
                    h.compressed,
                    req.version,
                    topics_per_step=topics_per_step,
                    bytes_per_step=chunk if large else None,
                    chunk_cache=self.chunk_cache,
                )
                while True:
                    try:
                        next(reading)
                    except StopIteration as done:
                        table: bodies.RegisterTable = done.value
                        break
                    yield "read"
                # Checked whole before anything is applied (names a slice at a time, in C); the
                # names of chunks that passed before are not checked again.
                cache = self.chunk_cache
                if table.parts is not None and cache is not None:
                    names = cache.unchecked_names(table.parts)
                else:
                    names = list(table.topic_queues)
                per_step = topics_per_step if large else len(names) + 1
                for start in range(0, len(names), per_step):
                    validation.check_topic_names(names[start : start + per_step])
                    if large:
                        yield "read"
                for name, other in table.renamed.items():
                    field = f"topicConfigTable[{name[:130]!r}]"
                    raise validation.RegisterError(
                        f"{field}.topicName {other[:130]!r} differs from its key"
                    )
                validation.check_topic_specs(
                    table.topic_queues, table.specs, self.s.config.registry.max_queue_nums
                )
                if table.parts is not None and cache is not None:
                    cache.checked(table.parts)
                topic_configs, data_version = table.topic_queues, table.data_version
                parts = table.parts
                filter_servers = table.filter_server_list
                mapping = table.topic_queue_mapping_info_map
        else:
            topic_configs, data_version, filter_servers, mapping = {}, DataVersion(), [], {}
            parts = None
        for i, addr in enumerate(filter_servers):
            validation.check_address(f"filterServerList[{i}]", addr)
        result = registry.register_broker(
            cluster_name=h.cluster_name,
            broker_addr=h.broker_addr,
            broker_name=h.broker_name,
            broker_id=h.broker_id,
            ha_server_addr=h.ha_server_addr,
            topic_configs=topic_configs,
            data_version=data_version,
            filter_server_list=filter_servers,
            heartbeat_timeout_ms=h.heartbeat_timeout_millis,
            enable_acting_master=h.enable_acting_master,
            channel=conn.conn_id,
            topic_queue_mapping_info=mapping,
            body_digest=digest,
            table_parts=parts,
        )
        ext = headers.RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        ).to_wire()
        order_conf = self.s.kv.list_namespace(ORDER_TOPIC_CONFIG_NAMESPACE)
        response = _ok(req, ext, bodies.encode_kv_table(order_conf) if order_conf else b"")
        while result.job is not None and not result.job.done:
            yield "wait"
        return response

    def unregister_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.UnregisterBrokerRequestHeader.from_wire(req.ext_fields)
        self.s.registry.unregister_broker(
            cluster_name=h.cluster_name,
            broker_addr=h.broker_addr,
            broker_name=h.broker_name,
            broker_id=h.broker_id,
        )
        return _ok(req)

    def broker_heartbeat(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.BrokerHeartbeatRequestHeader.from_wire(req.ext_fields)
        self.s.registry.broker_heartbeat(cluster_name=h.cluster_name, broker_addr=h.broker_addr)
        return _ok(req)

    def query_data_version(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.QueryDataVersionRequestHeader.from_wire(req.ext_fields)
        version = bodies.decode_data_version(req.body)
        changed = self.s.registry.query_data_version_changed(
            cluster_name=h.cluster_name, broker_addr=h.broker_addr, data_version=version
        )
        return _ok(req, headers.QueryDataVersionResponseHeader(changed=changed).to_wire())

    def get_broker_member_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.GetBrokerMemberGroupRequestHeader.from_wire(req.ext_fields)
        addrs = self.s.registry.broker_member_group(h.cluster_name, h.broker_name)
        return _ok(
            req, body=bodies.encode_broker_member_group(h.cluster_name, h.broker_name, addrs)
        )

    # -- routes ----------------------------------------------------------------------------

    def get_route_info_by_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.GetRouteInfoRequestHeader.from_wire(req.ext_fields)
        version, _exists = self.s.detector.version(h.topic)
        standard = h.accept_standard_json_only or req.version >= Version.V4_9_4
        legacy = req.version < Version.V5_0_0
        body = self.s.routes.body(h.topic, standard_json=standard, legacy=legacy)
        ext = {"routeVersion": str(version)}
        if body is None:
            return req.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {h.topic}",
                ext,
            )
        return _ok(req, ext, body)

    def get_broker_cluster_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return _ok(req, body=bodies.encode_cluster_info(self.s.registry.cluster_info()))

    def wipe_write_perm_of_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.WipeWritePermOfBrokerRequestHeader.from_wire(req.ext_fields)
        count = self.s.registry.wipe_write_perm(h.broker_name)
        self._log.log(
            logging.INFO,
            "write_perm",
            "wiped write perm of broker %s from %s: %d topics",
            h.broker_name,
            conn.peer,
            count,
        )
        return _ok(
            req, headers.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_wire()
        )

    def add_write_perm_of_broker(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.AddWritePermOfBrokerRequestHeader.from_wire(req.ext_fields)
        count = self.s.registry.add_write_perm(h.broker_name)
        self._log.log(
            logging.INFO,
            "write_perm",
            "added write perm of broker %s from %s: %d topics",
            h.broker_name,
            conn.peer,
            count,
        )
        return _ok(req, headers.AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_wire())

    def get_all_topic_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        if not self.s.config.registry.enable_all_topic_list:
            return req.make_response(ResponseCode.SYSTEM_ERROR, "disable")
        return _ok(req, body=bodies.encode_topic_list(self.s.registry.all_topics()))

    def delete_topic_in_namesrv(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.DeleteTopicFromNamesrvRequestHeader.from_wire(req.ext_fields)
        self.s.registry.delete_topic(h.topic, h.cluster_name)
        return _ok(req)

    def register_topic_in_namesrv(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.RegisterTopicRequestHeader.from_wire(req.ext_fields)
        route = bodies.decode_route(req.body)
        if not route.queue_datas:
            raise BodyError(f"REGISTER_TOPIC_IN_NAMESRV for {h.topic} carries no queueDatas")
        validation.check_queue_datas(
            h.topic, route.queue_datas, self.s.config.registry.max_queue_nums
        )
        self.s.registry.register_topic(h.topic, route.queue_datas)
        return _ok(req)

    def get_topics_by_cluster(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = headers.GetTopicsByClusterRequestHeader.from_wire(req.ext_fields)
        return _ok(req, body=bodies.encode_topic_list(self.s.registry.topics_by_cluster(h.cluster)))

    def _operation(
        self, answer: Callable[[int, RemotingCommand], RemotingCommand], code: int
    ) -> Handler:
        def handler(conn: Connection, req: RemotingCommand) -> RemotingCommand:
            self._require_push()  # push off: the server looks upstream, extension included
            return answer(code, req)

        return handler

    def _topic_list(self, source: Callable[[], list[str]]) -> Handler:
        def handler(conn: Connection, req: RemotingCommand) -> RemotingCommand:
            return _ok(req, body=bodies.encode_topic_list(source()))

        return handler

    # -- name-server config ----------------------------------------------------------------

    def get_namesrv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return _ok(req, body=_config_properties(self.s.config).encode())

    def update_namesrv_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(
            ResponseCode.NO_PERMISSION,
            "this name server takes config from its TOML file at start-up; "
            "edit the file and restart instead of UPDATE_NAMESRV_CONFIG",
        )

    # -- route push extension ----------------------------------------------------------------

    def _require_push(self) -> None:
        """With push off this server is, to a client, an upstream one: 7001/7002 unsupported."""
        if not self.s.config.push.enabled:
            raise ProtocolError(
                "route push is disabled on this name server",
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            )

    def subscribe(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        self._require_push()
        msg = decode_subscribe(req.body)
        topics = list(dict.fromkeys(msg.topics))
        if not topics:
            raise BodyError("SubscribeTopicRoute names no topic")
        if len(topics) > self.s.config.push.max_topics_per_request:
            raise BodyError(
                f"SubscribeTopicRoute names {len(topics)} topics, over the per-request bound "
                f"push.max_topics_per_request={self.s.config.push.max_topics_per_request}"
            )
        # Settle first: a change pending now is then covered by the ack's version, not re-sent.
        acks = [(topic, *self.s.detector.version(topic)) for topic in topics]
        added = self.s.subscriptions.subscribe(conn, topics, getattr(conn, "host", None))
        if added and self.s.on_subscription_change is not None:
            self.s.on_subscription_change("subscribe", conn, added)
        return _ok(req, body=encode_subscribe_ack(acks, self.s.detector.epoch))

    def unsubscribe(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        self._require_push()
        msg = decode_unsubscribe(req.body)
        topics = list(dict.fromkeys(msg.topics))
        if not topics:
            raise BodyError("UnsubscribeTopicRoute names no topic")
        removed = self.s.subscriptions.unsubscribe(conn, topics)
        self.s.detector.discard_debt(conn, removed)
        if removed and self.s.on_subscription_change is not None:
            self.s.on_subscription_change("unsubscribe", conn, removed)
        return _ok(req)


def _code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


def _config_properties(config: NamesrvConfig) -> str:
    """The config as upstream's properties text (``key=value`` lines), sections dotted."""
    import dataclasses

    lines: list[str] = []

    def walk(prefix: str, obj: Any) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(f"{prefix}{f.name}.", value)
            elif f.metadata.get("item") is not None:
                # Accounts carry secrets: only their access keys leave the server.
                keys = ",".join(getattr(item, "access_key", "") for item in value)
                lines.append(f"{prefix}{f.name}={keys}")
            else:
                text = ",".join(value) if isinstance(value, list) else str(value)
                lines.append(f"{prefix}{f.name}={text}")

    walk("", config)
    return "\n".join(lines) + "\n"
