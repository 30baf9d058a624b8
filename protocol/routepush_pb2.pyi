from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UPDATED: _ClassVar[ChangeKind]
    CREATED: _ClassVar[ChangeKind]
    DELETED: _ClassVar[ChangeKind]
    UNROUTED: _ClassVar[ChangeKind]

class BrokerChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BROKER_CHANGE_UNSPECIFIED: _ClassVar[BrokerChangeKind]
    BROKER_DEPARTED: _ClassVar[BrokerChangeKind]
    BROKER_ARRIVED: _ClassVar[BrokerChangeKind]
UPDATED: ChangeKind
CREATED: ChangeKind
DELETED: ChangeKind
UNROUTED: ChangeKind
BROKER_CHANGE_UNSPECIFIED: BrokerChangeKind
BROKER_DEPARTED: BrokerChangeKind
BROKER_ARRIVED: BrokerChangeKind

class SubscribeTopicRoute(_message.Message):
    __slots__ = ("topics", "client_id", "inline_routes")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    INLINE_ROUTES_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    client_id: str
    inline_routes: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., client_id: _Optional[str] = ..., inline_routes: _Optional[bool] = ...) -> None: ...

class SubscribeAck(_message.Message):
    __slots__ = ("topics", "epoch", "warming_up", "warm_in_ms", "uptime_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    WARMING_UP_FIELD_NUMBER: _ClassVar[int]
    WARM_IN_MS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicVersion]
    epoch: str
    warming_up: bool
    warm_in_ms: int
    uptime_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicVersion, _Mapping]]] = ..., epoch: _Optional[str] = ..., warming_up: _Optional[bool] = ..., warm_in_ms: _Optional[int] = ..., uptime_ms: _Optional[int] = ...) -> None: ...

class TopicVersion(_message.Message):
    __slots__ = ("topic", "version", "exists", "deleted")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    version: int
    exists: bool
    deleted: bool
    def __init__(self, topic: _Optional[str] = ..., version: _Optional[int] = ..., exists: _Optional[bool] = ..., deleted: _Optional[bool] = ...) -> None: ...

class UnsubscribeTopicRoute(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class TopicRouteChanged(_message.Message):
    __slots__ = ("changes", "sequence", "emitted_at_ms", "epoch", "brokers")
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    EMITTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[TopicChange]
    sequence: int
    emitted_at_ms: int
    epoch: str
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerChange]
    def __init__(self, changes: _Optional[_Iterable[_Union[TopicChange, _Mapping]]] = ..., sequence: _Optional[int] = ..., emitted_at_ms: _Optional[int] = ..., epoch: _Optional[str] = ..., brokers: _Optional[_Iterable[_Union[BrokerChange, _Mapping]]] = ...) -> None: ...

class TopicChange(_message.Message):
    __slots__ = ("topic", "version", "kind", "route")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    version: int
    kind: ChangeKind
    route: bytes
    def __init__(self, topic: _Optional[str] = ..., version: _Optional[int] = ..., kind: _Optional[_Union[ChangeKind, str]] = ..., route: _Optional[bytes] = ...) -> None: ...

class BrokerChange(_message.Message):
    __slots__ = ("kind", "broker_name", "cluster", "addrs", "cause", "broker_name_gone", "read_only", "topics", "refetch_window_ms")
    KIND_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    ADDRS_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_GONE_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    REFETCH_WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    kind: BrokerChangeKind
    broker_name: str
    cluster: str
    addrs: _containers.RepeatedCompositeFieldContainer[BrokerAddress]
    cause: str
    broker_name_gone: bool
    read_only: bool
    topics: _containers.RepeatedCompositeFieldContainer[TopicStep]
    refetch_window_ms: int
    def __init__(self, kind: _Optional[_Union[BrokerChangeKind, str]] = ..., broker_name: _Optional[str] = ..., cluster: _Optional[str] = ..., addrs: _Optional[_Iterable[_Union[BrokerAddress, _Mapping]]] = ..., cause: _Optional[str] = ..., broker_name_gone: _Optional[bool] = ..., read_only: _Optional[bool] = ..., topics: _Optional[_Iterable[_Union[TopicStep, _Mapping]]] = ..., refetch_window_ms: _Optional[int] = ...) -> None: ...

class BrokerAddress(_message.Message):
    __slots__ = ("broker_id", "addr")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    addr: str
    def __init__(self, broker_id: _Optional[int] = ..., addr: _Optional[str] = ...) -> None: ...

class TopicStep(_message.Message):
    __slots__ = ("topic", "version", "from_version")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FROM_VERSION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    version: int
    from_version: int
    def __init__(self, topic: _Optional[str] = ..., version: _Optional[int] = ..., from_version: _Optional[int] = ...) -> None: ...

class GoAway(_message.Message):
    __slots__ = ("grace_period_ms", "alternative_addrs", "reason")
    GRACE_PERIOD_MS_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVE_ADDRS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    grace_period_ms: int
    alternative_addrs: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    def __init__(self, grace_period_ms: _Optional[int] = ..., alternative_addrs: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...
