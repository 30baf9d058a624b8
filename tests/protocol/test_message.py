"""SEND_MESSAGE_V2 encoding against upstream's byte-level facts (golden values)."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.frame import RemotingCommand, decode_frame, encode_command
from protocol.message import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB_TYPE,
    MessageError,
    MessageIdGenerator,
    decode_properties,
    decode_send_request,
    encode_message,
    encode_properties,
    send_header,
)

TEXT = st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",))
NOV_1_2026_UTC_MS = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp() * 1000)


def generator() -> MessageIdGenerator:
    return MessageIdGenerator(bytes([10, 0, 0, 1]), pid=1234, salt=0x12345678, tz=UTC)


def test_unique_keys_have_upstreams_layout_ip_pid_salt_month_millis_counter():
    ids = generator()
    assert ids.next_id(NOV_1_2026_UTC_MS + 1500) == "0A00000104D212345678000005DC0000"
    assert ids.next_id(NOV_1_2026_UTC_MS + 1500) == "0A00000104D212345678000005DC0001"
    # a new month starts counting its milliseconds from zero again
    assert (
        ids.next_id(int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000) + 1)[20:28]
        == "00000001"
    )


def test_pid_and_counter_wrap_as_java_shorts():
    ids = MessageIdGenerator(bytes(4), pid=70_000, salt=-1, tz=UTC)
    ids._counter = 0xFFFF
    text = ids.next_id(NOV_1_2026_UTC_MS)
    assert text[8:12] == f"{70_000 & 0xFFFF:04X}" and text[12:20] == "FFFFFFFF"
    assert text[-4:] == "FFFF" and ids.next_id(NOV_1_2026_UTC_MS)[-4:] == "0000"


def test_properties_use_upstreams_separators_with_one_after_every_entry():
    text = encode_properties({"TAGS": "TagA", "KEYS": "k1 k2"})
    assert text == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02"
    assert decode_properties(text) == {"TAGS": "TagA", "KEYS": "k1 k2"}
    # upstream's reader skips entries without a name or a value
    assert decode_properties("\x01x\x02a\x01\x02b\x01c") == {"b": "c"}


def test_a_send_request_is_what_upstreams_producer_writes():
    msg = encode_message(
        "TopicTest",
        b"hello",
        keys=("order-1", "user-7"),
        tags="TagA",
        properties={"color": "red"},
        uniq_key="0A00000104D212345678000005DC0000",
    )
    header = send_header(
        msg, producer_group="pg", queue_id=3, broker_name="broker-a", born_timestamp_ms=1_700
    )
    assert header.to_wire() == {
        "a": "pg",
        "b": "TopicTest",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1700",
        "h": "0",
        "i": "TAGS\x01TagA\x02KEYS\x01order-1 user-7\x02WAIT\x01true\x02color\x01red\x02"
        "UNIQ_KEY\x010A00000104D212345678000005DC0000\x02",
        "j": "0",
        "k": "false",
        "m": "false",
        "n": "broker-a",
    }
    assert msg.body == b"hello" and msg.sys_flag == 0


def test_bodies_from_4_kib_are_zlib_compressed_with_the_compressed_and_zlib_flags():
    body = b"abcdefgh" * 512  # exactly 4096 bytes
    small = encode_message("T", body[:-1], uniq_key="X")
    big = encode_message("T", body, uniq_key="X")
    assert small.sys_flag == 0 and small.body == body[:-1]
    assert big.sys_flag == COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE == 0x301
    assert big.body[:2] == b"\x78\x5e"  # a zlib stream at level 5, as Java's Deflater(5)
    assert zlib.decompress(big.body) == body and big.size == 4096


def test_a_consumer_reads_body_keys_tags_and_properties_back_through_the_wire():
    body = bytes(range(256)) * 40
    msg = encode_message(
        "TopicTest",
        body,
        keys=["k1"],
        tags="TagB",
        properties={"trace": "é✓"},
        uniq_key="ID1",
    )
    header = send_header(msg, producer_group="pg", queue_id=1, broker_name="b", born_timestamp_ms=5)
    frame = encode_command(RemotingCommand.request(310, header.to_wire(), msg.body))
    cmd = decode_frame(frame[4:])
    got = decode_send_request(cmd.ext_fields, cmd.body)
    assert got.body == body and got.keys == ("k1",) and got.tags == "TagB"
    assert got.properties["trace"] == "é✓" and got.uniq_key == "ID1"
    assert (got.topic, got.queue_id, got.broker_name, got.producer_group) == (
        "TopicTest",
        1,
        "b",
        "pg",
    )


@given(
    st.dictionaries(
        st.text(alphabet=TEXT, min_size=1),
        st.text(alphabet=TEXT, min_size=1),
        max_size=6,
    )
)
def test_any_properties_without_separators_round_trip(props):
    props.pop("KEYS", None)
    props.pop("TAGS", None)
    msg = encode_message("T", b"x", properties=props, uniq_key="U")
    got = decode_properties(msg.properties)
    assert {k: got[k] for k in props} == props


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"topic": ""}, "empty"),
        ({"topic": "a b"}, "characters outside"),
        ({"topic": "t" * 128}, "longer than"),
        ({"body": b""}, "empty"),
        ({"body": b"x" * 11, "max_body_size": 10}, "more than 10"),
        ({"keys": ["a b"]}, "no space"),
        ({"tags": "a\x01b"}, "separator"),
        ({"properties": {"KEYS": "x"}}, "keys/tags"),
        ({"properties": {"p": "v\x02"}}, "separator"),
        ({"properties": {"p": "x" * 40_000}}, "exceed"),
        ({"properties": {"p": "\ud800"}}, "not valid text"),
    ],
)
def test_messages_a_broker_would_refuse_or_alter_are_refused_with_the_reason(kwargs, words):
    args = {"topic": "T", "body": b"x", "uniq_key": "U"} | kwargs
    topic, body = args.pop("topic"), args.pop("body")
    with pytest.raises(MessageError, match=words):
        encode_message(topic, body, **args)
