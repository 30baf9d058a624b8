"""The command table: every served code declared once, with its header, handler and access class."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections import Counter
from typing import Any

import pytest
from support.fake_broker import register_request, topic_configs
from support.paths import REPO_ROOT
from support.server_fixtures import FakeSampler, isolated_config
from twisted.internet import task

from namesrv.config import AclAccount, AclConfig
from namesrv.requests import commands
from namesrv.requests.acl import AccessClass, AccessControl, AclDenied
from namesrv.requests.acl import sign_ext_fields as sign
from namesrv.requests.commands import BY_CODE, COMMANDS, Command, access_class
from namesrv.requests.processors import RequestProcessor, Services
from namesrv.requests.route_response_cache import RouteResponseCache
from namesrv.server import NameServer
from protocol.codes import FLAG_RESPONSE, RequestCode, ResponseCode, SerializeType
from protocol.frame import RemotingCommand, decode_frame, encode_command
from protocol.push_codec import encode_subscribe, encode_unsubscribe

ACL = {
    "enabled": True,
    "accounts": [{"access_key": "ops", "secret_key": "ops-secret", "admin": True}],
}

NOT_SERVED = {
    # A broker's and a client's own codes, and the two the server sends: never answered here.
    RequestCode.SEND_MESSAGE,
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.GET_BROKER_RUNTIME_INFO,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
    RequestCode.GET_MAX_OFFSET,
    RequestCode.HEART_BEAT,
    RequestCode.UNREGISTER_CLIENT,
    RequestCode.SEND_MESSAGE_V2,
    RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED,
    RequestCode.GO_AWAY,
}

B, A, R = AccessClass.BROKER, AccessClass.ADMIN, AccessClass.READ
ACCESS_CLASSES = {
    RequestCode.PUT_KV_CONFIG: A,
    RequestCode.GET_KV_CONFIG: R,
    RequestCode.DELETE_KV_CONFIG: A,
    RequestCode.GET_KVLIST_BY_NAMESPACE: R,
    RequestCode.REGISTER_BROKER: B,
    RequestCode.UNREGISTER_BROKER: B,
    RequestCode.BROKER_HEARTBEAT: B,
    RequestCode.QUERY_DATA_VERSION: B,
    RequestCode.GET_BROKER_MEMBER_GROUP: R,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: R,
    RequestCode.GET_BROKER_CLUSTER_INFO: R,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: R,
    RequestCode.GET_TOPICS_BY_CLUSTER: R,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: R,
    RequestCode.GET_UNIT_TOPIC_LIST: R,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: R,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: R,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: A,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: A,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: A,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: A,
    RequestCode.GET_NAMESRV_CONFIG: R,
    RequestCode.UPDATE_NAMESRV_CONFIG: A,
    RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED: R,
    RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED: R,
    RequestCode.GET_PUSH_STATUS: A,
    RequestCode.GET_SUBSCRIPTIONS: A,
}
"""The classes access control has always applied: a change here is a change of who may do what."""


class Peer:
    """A connection as the requests layer sees it; slotted, so nothing can write into it."""

    __slots__ = ("conn_id", "extension_notes", "peer")

    def __init__(self) -> None:
        self.conn_id = 1
        self.peer = "127.0.0.1:1"
        self.extension_notes: list[SerializeType | None] = []

    def note_extension(self, serialize_type: SerializeType | None) -> None:
        self.extension_notes.append(serialize_type)


def services(overrides: dict[str, Any] | None = None) -> Services:
    clock = task.Clock()
    raw: dict[str, Any] = {"server": {"wait_for_service_ms": 0}}  # past its start-up window
    for section, values in (overrides or {}).items():
        raw.setdefault(section, {}).update(values)
    server = NameServer(isolated_config(raw), clock, clock=clock, sampler=FakeSampler(), epoch="e1")
    return server.processor.s


def answered(answer: bytes | Any) -> RemotingCommand:
    assert isinstance(answer, bytes), answer
    return decode_frame(answer[4:])


def handle(processor: RequestProcessor, request: RemotingCommand, conn: Any = None) -> Any:
    request.opaque = 7
    frame = encode_command(request)[4:]
    return processor.handle(conn or Peer(), request, frame)


def test_every_served_code_declares_an_access_class():
    for command in COMMANDS:
        assert isinstance(command.access, AccessClass), command.name


def test_every_served_request_code_is_declared_exactly_once():
    declared = Counter(command.code for command in COMMANDS)
    assert [code for code, n in declared.items() if n > 1] == []
    assert set(declared) == set(RequestCode) - NOT_SERVED
    assert RequestProcessor(services()).served_codes == set(declared)


def test_access_classes_of_the_served_codes_are_pinned():
    assert {command.code: command.access for command in COMMANDS} == ACCESS_CLASSES
    assert all(access_class(code) is klass for code, klass in ACCESS_CLASSES.items())
    assert access_class(RequestCode.SEND_MESSAGE) is None
    assert access_class(9999) is None


def test_each_handler_is_given_the_header_its_command_declares():
    for command in COMMANDS:
        params = list(inspect.signature(command.handler).parameters)
        assert params[1:3] == ["conn", "req"], command.name
        hints = typing.get_type_hints(command.handler)
        expected = type(None) if command.header is None else command.header
        assert hints[params[3]] is expected, command.name


def test_docs_show_the_access_classes_the_table_declares():
    text = (REPO_ROOT / "docs" / "config.md").read_text()
    assert commands.access_table() in text


def test_a_code_declared_twice_or_with_a_stray_handler_fails_at_construction():
    twice = (*COMMANDS, BY_CODE[RequestCode.GET_KV_CONFIG])
    with pytest.raises(ValueError, match="GET_KV_CONFIG is declared twice"):
        RequestProcessor(services(), commands=twice)

    class Stray:
        def answer(self, conn: Any, req: RemotingCommand, h: None) -> RemotingCommand:
            raise AssertionError("never bound")

    stray = Command(RequestCode.SEND_MESSAGE, None, Stray.answer, AccessClass.READ)
    with pytest.raises(ValueError, match="SEND_MESSAGE is a method of no handler class"):
        RequestProcessor(services(), commands=(*COMMANDS, stray))


def test_operations_codes_are_served_only_with_an_operations_source():
    s = services()
    s.operations = None
    processor = RequestProcessor(s)
    assert RequestCode.GET_PUSH_STATUS not in processor.served_codes
    resp = answered(handle(processor, RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONS)))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


@pytest.mark.parametrize("code", sorted(NOT_SERVED))
def test_an_undeclared_code_is_not_supported_even_with_access_control_on(code):
    processor = RequestProcessor(services({"acl": ACL}))
    resp = answered(handle(processor, RemotingCommand.request(code)))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.opaque == 7
    assert processor.refused["unsupported"] == 1
    assert handle(processor, RemotingCommand.request(code, oneway=True)) is None


def test_with_access_control_on_a_command_without_access_class_is_refused_not_read():
    s = services({"acl": ACL})
    unclassified = tuple(
        dataclasses.replace(command, access=None)  # type: ignore[arg-type]
        if command.code == RequestCode.GET_BROKER_CLUSTER_INFO
        else command
        for command in COMMANDS
    )
    processor = RequestProcessor(s, commands=unclassified)
    request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    resp = answered(handle(processor, request))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "no access class" in resp.remark
    signed = RemotingCommand.request(
        RequestCode.GET_BROKER_CLUSTER_INFO, sign({}, b"", "ops", "ops-secret")
    )
    assert answered(handle(processor, signed)).code == ResponseCode.NO_PERMISSION
    assert processor.handled["GET_BROKER_CLUSTER_INFO"] == 0
    assert s.acl is not None and s.acl.rejections == {"unclassified": 2}
    # Declared as a read, the same request is open.
    resp = answered(handle(RequestProcessor(s), request))
    assert resp.code == ResponseCode.SUCCESS


def test_access_control_refuses_an_unclassified_request_whatever_its_signature():
    account = AclAccount(access_key="ops", secret_key="ops-secret", admin=True)
    control = AccessControl(AclConfig(enabled=True, accounts=[account]))
    for ext in ({}, sign({}, b"", "ops", "ops-secret")):
        with pytest.raises(AclDenied, match="no access class") as refused:
            control.check(None, 9999, "9999", ext, b"")
        assert refused.value.code == ResponseCode.NO_PERMISSION
    assert control.rejections == {"unclassified": 2}
    off = AccessControl(AclConfig())
    assert off.check(None, 9999, "9999", {}, b"") is None


def test_push_requests_tell_the_connection_it_speaks_the_extension():
    processor = RequestProcessor(services())
    conn = Peer()
    subscribe = RemotingCommand.request(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
        body=encode_subscribe(["T"], "client-1"),
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert answered(handle(processor, subscribe, conn)).code == ResponseCode.SUCCESS
    unsubscribe = RemotingCommand.request(
        RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_unsubscribe(["T"])
    )
    assert answered(handle(processor, unsubscribe, conn)).code == ResponseCode.SUCCESS
    lookup = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    handle(processor, lookup, conn)
    # The subscribe's serialize type encodes the notifications; the unsubscribe keeps it.
    assert conn.extension_notes == [SerializeType.ROCKETMQ, None]


def test_push_requests_mark_the_connection_even_when_refused():
    processor = RequestProcessor(services({"push": {"enabled": False}}))
    conn = Peer()
    subscribe = RemotingCommand.request(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(["T"], "client-1")
    )
    resp = answered(handle(processor, subscribe, conn))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert conn.extension_notes == [SerializeType.JSON]


def test_a_route_answer_is_kept_in_the_route_response_cache_it_was_given():
    cache = RouteResponseCache()
    processor = RequestProcessor(services(), route_responses=cache)
    lookup = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    assert answered(handle(processor, lookup)).code == ResponseCode.TOPIC_NOT_EXIST
    assert len(cache) == 0, "a refusal is not kept"
    register = register_request(topic_configs("T"))
    assert answered(handle(processor, register)).code == ResponseCode.SUCCESS
    assert len(cache) == 0, "only route lookups are kept"
    answer = handle(processor, lookup)
    assert answered(answer).code == ResponseCode.SUCCESS
    assert len(cache) == 1
    frame = encode_command(lookup)[4:]
    assert cache.answer(frame) == answer


def test_a_response_from_the_peer_is_ignored_and_counted():
    counters: Counter[str] = Counter()
    processor = RequestProcessor(services(), counters=counters)
    stray = RemotingCommand(code=0, opaque=3, flag=FLAG_RESPONSE)
    assert processor.handle(Peer(), stray, encode_command(stray)[4:]) is None
    assert counters == {"responses_ignored": 1}


def test_a_stock_clients_refusal_of_a_oneway_frame_is_counted_apart_and_never_answered():
    counters: Counter[str] = Counter()
    processor = RequestProcessor(services(), counters=counters)
    declined = RemotingCommand(
        code=ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        opaque=9,
        flag=FLAG_RESPONSE,
        remark="request type 7003 not supported",
    )
    assert processor.handle(Peer(), declined, encode_command(declined)[4:]) is None
    assert counters == {"oneways_declined": 1}
