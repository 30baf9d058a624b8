"""A message on the wire as upstream's Java producer writes it: SEND_MESSAGE_V2 (310).

Pure: callers pass the time and the id generator. What carries over from upstream, so that
upstream consumers read our messages as their own:

* the request header ``SendMessageRequestHeaderV2``, whose fields have one-letter wire names
  ``a`` .. ``n``;
* properties as ``MessageDecoder.messageProperties2String`` writes them: ``name \\x01 value \\x02``
  per entry; keys in ``KEYS`` joined by a space, the tag in ``TAGS``, ``WAIT`` true;
* the unique message key ``UNIQ_KEY`` in ``MessageClientIDSetter``'s form: 32 upper-case hex
  digits of ip(4) pid(2) salt(4) milliseconds-since-month-start(4) counter(2);
* bodies of at least ``compress_over`` bytes zlib-compressed, with sysFlag COMPRESSED_FLAG and
  the zlib compression type (upstream 5.x; 4.x readers take the type bits 0 as zlib too);
* the answer's header ``SendMessageResponseHeader``: msgId, queueId and queueOffset.

What an answer means to a producer (stored, busy, retry elsewhere, refused) is the client's:
``client_push.producer.send_answer``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import struct
import zlib
from collections.abc import Iterable, Mapping
from datetime import datetime, tzinfo

from protocol.headers import Header, optional, wire
from protocol.topic_name import topic_name_problem

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"

COMPRESSED_FLAG = 0x1
COMPRESSION_ZLIB_TYPE = 0x3 << 8
COMPRESSION_TYPE_MASK = 0x7 << 8

DEFAULT_TOPIC = "TBW102"
"""Upstream's ``createTopicKey``: the topic a broker with auto-create copies for a new one."""
DEFAULT_TOPIC_QUEUE_NUMS = 4

MAX_PROPERTIES_BYTES = 32_767
"""The broker stores the properties' length as a short."""


class MessageError(ValueError):
    """A message the broker would refuse, or that would reach consumers altered."""


# -- request and response headers -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class SendMessageRequestHeaderV2(Header):
    producer_group: str = wire("a")
    topic: str = wire("b")
    default_topic: str = wire("c")
    default_topic_queue_nums: int = wire("d")
    queue_id: int = wire("e")
    sys_flag: int = wire("f")
    born_timestamp: int = wire("g", long=True)
    flag: int = wire("h")
    properties: str | None = optional("i")
    reconsume_times: int | None = optional("j")
    unit_mode: bool | None = optional("k")
    max_reconsume_times: int | None = optional("l")
    batch: bool | None = optional("m")
    broker_name: str | None = optional("n")


@dataclasses.dataclass(frozen=True, slots=True)
class SendMessageResponseHeader(Header):
    msg_id: str = wire("msgId")
    queue_id: int = wire("queueId")
    queue_offset: int = wire("queueOffset", long=True)
    transaction_id: str | None = optional("transactionId")
    batch_uniq_id: str | None = optional("batchUniqId")


# -- properties ---------------------------------------------------------------------------------


def encode_properties(properties: Mapping[str, str]) -> str:
    """``messageProperties2String``: every entry followed by the property separator."""
    parts = []
    for name, value in properties.items():
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}")
    return "".join(parts)


def decode_properties(text: str) -> dict[str, str]:
    """``string2messageProperties``: entries too short to hold a name and a value are skipped,
    as upstream skips them."""
    out: dict[str, str] = {}
    for entry in text.split(PROPERTY_SEPARATOR):
        name, sep, value = entry.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            out[name] = value
    return out


def _check_text(what: str, text: str) -> None:
    if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
        raise MessageError(f"{what} {text!r} contains a property separator (\\x01 or \\x02)")


def check_topic(topic: str) -> None:
    """Upstream's ``Validators.checkTopic``."""
    problem = topic_name_problem(topic)
    if problem is not None:
        raise MessageError(problem)


def message_properties(
    keys: Iterable[str],
    tags: str | None,
    user_properties: Mapping[str, str],
    uniq_key: str,
) -> dict[str, str]:
    """The property map a Java ``Message(topic, tags, keys, body)`` carries when sent."""
    props: dict[str, str] = {}
    if tags:
        _check_text("tag", tags)
        props[PROPERTY_TAGS] = tags
    key_list = [keys] if isinstance(keys, str) else list(keys)
    for key in key_list:
        if not key or KEY_SEPARATOR in key:
            raise MessageError(f"a message key must be non-empty and hold no space, got {key!r}")
        _check_text("key", key)
    if key_list:
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(key_list)
    props[PROPERTY_WAIT_STORE_MSG_OK] = "true"
    for name, value in user_properties.items():
        if name in (PROPERTY_KEYS, PROPERTY_TAGS):
            raise MessageError(f"property {name} is set through the keys/tags arguments")
        if not name or not isinstance(value, str) or not value:
            raise MessageError(f"property {name!r} needs a non-empty name and string value")
        _check_text("property name", name)
        _check_text(f"property {name} value", value)
        props[name] = value
    props.setdefault(PROPERTY_UNIQ_KEY, uniq_key)
    return props


# -- unique message keys ------------------------------------------------------------------------


class MessageIdGenerator:
    """``MessageClientIDSetter.createUniqID``: a fixed prefix (ip, pid, a per-process salt),
    then the milliseconds since the start of the current month (local time, as upstream's
    ``Calendar``) and a 16-bit counter."""

    def __init__(self, ip: bytes, pid: int, salt: int, tz: tzinfo | None = None) -> None:
        if len(ip) not in (4, 16):
            raise ValueError(f"ip must be 4 or 16 bytes, got {len(ip)}")
        self._prefix = (ip + struct.pack(">hi", _int16(pid), _int32(salt))).hex().upper()
        self._tz = tz
        self._counter = 0
        self._month: tuple[int, int] = (0, 0)  # (start_ms, next_start_ms)

    @classmethod
    def for_host(
        cls, host_ipv4: str | None, pid: int, salt: int, now_ms: int
    ) -> MessageIdGenerator:
        """Ids of a process on the host at ``host_ipv4`` (dotted); None when the host has no
        address but loopback: upstream's ``createFakeIP`` then, the low four bytes of
        ``now_ms``. ``ValueError`` for an address that is not IPv4."""
        return cls(id_ip(host_ipv4, now_ms), pid, salt)

    def next_id(self, now_ms: int) -> str:
        start, next_start = self._month
        if not start <= now_ms < next_start:
            start, next_start = self._month = _month_bounds(now_ms, self._tz)
        counter = self._counter
        self._counter = (counter + 1) & 0xFFFFFFFF
        tail = struct.pack(">ih", _int32(now_ms - start), _int16(counter))
        return self._prefix + tail.hex().upper()


def id_ip(host_ipv4: str | None, now_ms: int) -> bytes:
    """The four ip bytes of a message id (``MessageIdGenerator.for_host``)."""
    if host_ipv4 is None:
        return struct.pack(">Q", now_ms & 0xFFFFFFFFFFFFFFFF)[4:]
    return ipaddress.IPv4Address(host_ipv4).packed


def _int16(value: int) -> int:
    return ((value & 0xFFFF) ^ 0x8000) - 0x8000


def _int32(value: int) -> int:
    return ((value & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


def _month_bounds(now_ms: int, tz: tzinfo | None) -> tuple[int, int]:
    now = datetime.fromtimestamp(now_ms / 1000.0, tz)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    following = start.replace(year=year, month=month)
    return int(start.timestamp() * 1000), int(following.timestamp() * 1000)


# -- building a send ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class EncodedMessage:
    """A message ready to go to any queue of its topic: what stays the same over retries."""

    topic: str
    uniq_key: str
    body: bytes
    """As sent: compressed when ``sys_flag`` says so."""
    sys_flag: int
    properties: str
    size: int
    """The body size before compression."""


def encode_message(
    topic: str,
    body: bytes,
    *,
    keys: Iterable[str] = (),
    tags: str | None = None,
    properties: Mapping[str, str] | None = None,
    uniq_key: str,
    compress_over: int = 4096,
    compress_level: int = 5,
    max_body_size: int = 4 * 1024 * 1024,
) -> EncodedMessage:
    """Validate and encode once; ``MessageError`` says what a broker would refuse."""
    check_topic(topic)
    if not isinstance(body, bytes | bytearray | memoryview):
        raise MessageError(f"message body must be bytes, got {type(body).__name__}")
    body = bytes(body)
    if not body:
        raise MessageError("message body must not be empty")
    if len(body) > max_body_size:
        raise MessageError(f"message body is {len(body)} bytes, more than {max_body_size}")
    props = encode_properties(message_properties(keys, tags, properties or {}, uniq_key))
    try:
        props_size = len(props.encode())
    except UnicodeEncodeError as exc:
        raise MessageError(f"message properties are not valid text: {exc.reason}") from None
    if props_size > MAX_PROPERTIES_BYTES:
        raise MessageError(f"message properties exceed {MAX_PROPERTIES_BYTES} bytes")
    sys_flag = 0
    wire_body = body
    if len(body) >= compress_over:
        wire_body = zlib.compress(body, compress_level)
        sys_flag |= COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE
    return EncodedMessage(topic, uniq_key, wire_body, sys_flag, props, len(body))


def send_header(
    message: EncodedMessage,
    *,
    producer_group: str,
    queue_id: int,
    broker_name: str,
    born_timestamp_ms: int,
    default_topic: str = DEFAULT_TOPIC,
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
) -> SendMessageRequestHeaderV2:
    """The header of one attempt, with the fields upstream's producer sets (the default
    topic's fields in every send: a broker creating the topic reads them)."""
    return SendMessageRequestHeaderV2(
        producer_group=producer_group,
        topic=message.topic,
        default_topic=default_topic,
        default_topic_queue_nums=default_topic_queue_nums,
        queue_id=queue_id,
        sys_flag=message.sys_flag,
        born_timestamp=born_timestamp_ms,
        flag=0,
        properties=message.properties,
        reconsume_times=0,
        unit_mode=False,
        batch=False,
        broker_name=broker_name,
    )


# -- reading a send (what a broker stores and a consumer reads) -------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class ReceivedMessage:
    producer_group: str
    topic: str
    queue_id: int
    broker_name: str | None
    born_timestamp: int
    sys_flag: int
    body: bytes
    """Decompressed, as a consumer hands it to the application."""
    properties: dict[str, str]

    @property
    def keys(self) -> tuple[str, ...]:
        text = self.properties.get(PROPERTY_KEYS, "")
        return tuple(k for k in text.split(KEY_SEPARATOR) if k)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)


def decode_send_request(ext_fields: Mapping[str, str], body: bytes) -> ReceivedMessage:
    """A SEND_MESSAGE_V2 request as a broker and then a consumer read it; raises
    ``HeaderError`` (INVALID_PARAMETER) or ``MessageError`` for what they cannot read."""
    header = SendMessageRequestHeaderV2.from_wire(dict(ext_fields))
    if header.sys_flag & COMPRESSED_FLAG:
        kind = (header.sys_flag & COMPRESSION_TYPE_MASK) >> 8
        if kind not in (0, 3):  # 0: older clients, zlib implied
            raise MessageError(f"compression type {kind} is not zlib")
        try:
            body = zlib.decompress(body)
        except zlib.error as exc:
            raise MessageError(f"compressed body does not inflate: {exc}") from None
    return ReceivedMessage(
        producer_group=header.producer_group,
        topic=header.topic,
        queue_id=header.queue_id,
        broker_name=header.broker_name,
        born_timestamp=header.born_timestamp,
        sys_flag=header.sys_flag,
        body=body,
        properties=decode_properties(header.properties or ""),
    )
