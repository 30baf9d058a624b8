"""Request, response, language and permission codes, as upstream numbers them."""

from __future__ import annotations

from enum import IntEnum


class RequestCode(IntEnum):
    """Request codes. The name server serves those declared in ``namesrv/requests/commands.py``
    (one declaration each) and answers any other REQUEST_CODE_NOT_SUPPORTED; the broker codes
    here (messages, offsets, client heartbeats, topic admin) are sent to brokers, never to it."""

    SEND_MESSAGE = 10
    UPDATE_AND_CREATE_TOPIC = 17
    GET_BROKER_RUNTIME_INFO = 28
    GET_MAX_OFFSET = 30
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_BROKER_MEMBER_GROUP = 901
    BROKER_HEARTBEAT = 904
    # Route-push extension (route-push-contract.md); unused upstream. 7001/7002 are served by
    # the name server; 7003/7004 are sent by it to clients, which serve them.
    SUBSCRIBE_TOPIC_ROUTE_CHANGED = 7001
    UNSUBSCRIBE_TOPIC_ROUTE_CHANGED = 7002
    NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED = 7003
    GO_AWAY = 7004
    # Operations extension (protocol-extension.md): answered with JSON bodies.
    GET_PUSH_STATUS = 7005
    GET_SUBSCRIPTIONS = 7006


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    QUERY_NOT_FOUND = 22
    INVALID_PARAMETER = 29
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    FLOW_CONTROL = 215
    GO_AWAY = 1500


class LanguageCode(IntEnum):
    """Sender language; the JSON header carries the name, the binary header the number."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class SerializeType(IntEnum):
    JSON = 0
    ROCKETMQ = 1


class Version(IntEnum):
    """MQVersion ordinals that change behaviour on the wire."""

    V4_9_4 = 401
    V5_0_0 = 413
    V5_3_1 = 475
    V5_3_3 = 479


CURRENT_VERSION = Version.V5_3_3

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2


class Perm(IntEnum):
    """PermName bits."""

    INHERIT = 1
    WRITE = 2
    READ = 4
    PRIORITY = 8


PERM_READ_WRITE = Perm.READ | Perm.WRITE
