"""Frame layout, both header serializations, flags and the decoder's refusals."""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, SplitFrame, decode_frame, encode_command


def test_json_frame_golden_bytes():
    cmd = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, opaque=7, version=479
    )
    header = (
        b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"PYTHON","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    assert encode_command(cmd) == struct.pack(">II", 4 + len(header), len(header)) + header


def test_binary_frame_golden_bytes():
    cmd = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": "T"},
        b"xy",
        opaque=7,
        version=401,
        serialize_type=SerializeType.ROCKETMQ,
        language=LanguageCode.JAVA,
    )
    header = (
        struct.pack(">hBhii", 105, 0, 401, 7, 0)
        + struct.pack(">i", 0)  # no remark
        + struct.pack(">i", 2 + 5 + 4 + 1)
        + struct.pack(">h", 5)
        + b"topic"
        + struct.pack(">i", 1)
        + b"T"
    )
    expected = struct.pack(">II", 4 + len(header) + 2, (1 << 24) | len(header)) + header + b"xy"
    assert encode_command(cmd) == expected
    assert decode_frame(expected[4:]) == cmd


def test_decodes_what_upstream_java_writes():
    header = json.dumps(
        {
            "code": 0,
            "extFields": {"routeVersion": "3"},
            "flag": 1,
            "language": "JAVA",
            "opaque": 42,
            "remark": None,
            "serializeTypeCurrentRPC": "JSON",
            "version": 479,
        }
    ).encode()
    frame = struct.pack(">I", len(header)) + header + b"{}"
    cmd = decode_frame(frame)
    assert cmd.is_response and not cmd.is_oneway
    assert (cmd.code, cmd.opaque, cmd.language, cmd.remark) == (0, 42, LanguageCode.JAVA, None)
    assert cmd.ext_fields == {"routeVersion": "3"}
    assert cmd.body == b"{}"


@pytest.mark.parametrize("kind", list(SerializeType))
def test_response_answers_in_the_request_serialization(kind):
    req = RemotingCommand.request(RequestCode.GET_KV_CONFIG, opaque=9, serialize_type=kind)
    resp = req.make_response(ResponseCode.QUERY_NOT_FOUND, "missing")
    assert resp.serialize_type == kind and resp.opaque == 9 and resp.is_response
    [back] = FrameDecoder().feed(encode_command(resp))
    assert back.serialize_type == kind and back.remark == "missing"


def test_oneway_flag():
    cmd = RemotingCommand.request(RequestCode.GO_AWAY, oneway=True)
    assert cmd.is_oneway and not cmd.is_response
    [back] = FrameDecoder().feed(encode_command(cmd))
    assert back.is_oneway


def test_decoder_reassembles_byte_by_byte_and_batches():
    cmds = [
        RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"k": str(i)}, b"b" * i, opaque=i)
        for i in range(5)
    ]
    stream = b"".join(encode_command(c) for c in cmds)
    decoder = FrameDecoder()
    got = []
    for i in range(len(stream)):
        got += decoder.feed(stream[i : i + 1])
    assert got == cmds and decoder.buffered == 0
    assert FrameDecoder().feed(stream) == cmds


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (struct.pack(">I", 0x80000000), "exceeds the limit"),
        (struct.pack(">I", 2) + b"xx", "too short"),
        (struct.pack(">II", 8, 100) + b"abcd", "header length 100"),
        (struct.pack(">II", 6, 2 << 24 | 2) + b"{}", "unknown serialize type"),
        (struct.pack(">II", 7, 3) + b"{{{", "not valid JSON"),
        (struct.pack(">II", 6, 2) + b"[]", "not an object"),
        (struct.pack(">II", 13, 9) + b'{"code":"x"}'[:9], "not valid JSON"),
        (struct.pack(">II", 16, 12) + b'{"code":"x"}', "not an integer"),
        (struct.pack(">II", 6, 1 << 24 | 2) + b"\x00\x01", "truncated"),
    ],
)
def test_decoder_refuses_broken_frames(data, fragment):
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameError, match=fragment):
        decoder.feed(data)
    with pytest.raises(FrameError):
        decoder.feed(b"")  # a broken stream stays broken


def test_huge_length_is_refused_before_any_body_arrives():
    decoder = FrameDecoder(max_frame_size=16 << 20)
    with pytest.raises(FrameError):
        decoder.feed(struct.pack(">I", (16 << 20) + 1))
    assert decoder.buffered == 0


@given(st.lists(st.integers(1, 120), min_size=1, max_size=6), st.data())
def test_frames_come_whole_and_in_order_however_the_reads_are_cut(sizes, data):
    """Reads of several frames and a part of the next, cut anywhere: the whole ones come out
    as the bytes they were, the part waits, and nothing is held once the stream is whole."""
    frames = [
        encode_command(RemotingCommand.request(RequestCode.GET_KV_CONFIG, body=b"b" * n, opaque=n))
        for n in sizes
    ]
    stream = b"".join(frames)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=8)))
    decoder = FrameDecoder()
    got = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += decoder.feed_raw(stream[start:end])
    assert got == [f[4:] for f in frames]
    assert all(type(f) is bytes for f in got)
    assert decoder.buffered == 0 and decoder.allocated == 0


def test_partial_frame_is_buffered_not_decoded():
    frame = encode_command(RemotingCommand.request(RequestCode.GET_KV_CONFIG))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:-1]) == []
    assert decoder.buffered == len(frame) - 1
    assert len(decoder.feed(frame[-1:])) == 1


_text = st.text(max_size=20)


@given(
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | st.text(min_size=1, max_size=30),
    ext=st.dictionaries(_text, _text, max_size=5),
    body=st.binary(max_size=50),
    kind=st.sampled_from(list(SerializeType)),
)
def test_round_trip(code, opaque, flag, remark, ext, body, kind):
    cmd = RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        serialize_type=kind,
        version=401,
    )
    assert FrameDecoder().feed(encode_command(cmd)) == [cmd]


@given(st.binary(max_size=200))
def test_garbage_never_raises_anything_but_frame_error(data):
    decoder = FrameDecoder(max_frame_size=4096)
    with contextlib.suppress(FrameError):
        decoder.feed(data)


def test_large_frames_split_anyhow_come_out_whole_and_in_order():
    big = RemotingCommand.request(RequestCode.REGISTER_BROKER, {"k": "v"}, b"\x07" * 3_000_000)
    small = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"}, opaque=5)
    other = RemotingCommand.request(RequestCode.REGISTER_BROKER, {}, b"\x01" * 1_500_000, opaque=9)
    # A 1,000-topic register's size: past one read of 64 KB, gathered as reads too.
    mid = RemotingCommand.request(RequestCode.REGISTER_BROKER, {}, b"\x02" * 170_000, opaque=11)
    stream = encode_command(big) + encode_command(small) + encode_command(other)
    stream += encode_command(mid)
    for cut in (1, 7, 65_536, 1_000_000, 3_000_001, len(stream)):
        decoder = FrameDecoder()
        got: list[RemotingCommand] = []
        held: list[int] = []
        for start in range(0, len(stream), cut):
            got += decoder.feed(stream[start : start + cut])
            held.append(decoder.buffered)
        assert [(c.code, c.opaque, len(c.body)) for c in got] == [
            (big.code, big.opaque, 3_000_000),
            (small.code, 5, 0),
            (other.code, 9, 1_500_000),
            (mid.code, 11, 170_000),
        ]
        assert got[0].body == big.body and got[2].body == other.body and got[3].body == mid.body
        assert decoder.buffered == 0
        assert max(held) < len(stream)  # what is held is counted while it is partial
        if cut == 65_536:
            assert held[1] == 2 * cut  # a large frame's reads held, its length prefix counted


def test_a_large_frame_comes_as_header_and_body_joined_apart_unless_its_header_is_split():
    big = RemotingCommand.request(RequestCode.REGISTER_BROKER, {"k": "v"}, b"\x07" * 2_000_000)
    wire = encode_command(big)
    for cut, split in ((65_536, True), (9, False)):  # 9: the header reaches past the first read
        decoder = FrameDecoder()
        frames = []
        for start in range(0, len(wire), cut):
            frames += decoder.feed_raw(wire[start : start + cut])
        (frame,) = frames
        assert isinstance(frame, SplitFrame) is split
        assert (frame.head + frame.body if split else frame) == wire[4:]
        command = decode_frame(frame)
        assert (command.code, command.ext_fields, command.body) == (big.code, {"k": "v"}, big.body)


def test_a_gathered_frame_counts_the_whole_read_its_first_part_keeps_alive():
    small = encode_command(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"t": "x"}))
    body = b"\x03" * 170_000
    big = encode_command(RemotingCommand.request(RequestCode.REGISTER_BROKER, {}, body))
    read = small + big[: 65_536 - len(small)]
    decoder = FrameDecoder()
    assert len(decoder.feed(read)) == 1
    assert decoder.buffered == 65_536 - len(small)  # what the peer sent of the big frame
    assert decoder.allocated >= 65_536  # the view keeps the read, the small frame's bytes too
    rest = big[65_536 - len(small) :]
    (frame,) = decoder.feed(rest)
    assert frame.body == body and decoder.buffered == 0 and decoder.allocated == 0
