"""Every parser on a request's path costs work linear in its input, whatever its shape.

Work is counted, never timed: the characters the bare-key scanner examines (it reports them),
and the bytes handed to each C-level parse primitive (json, msgspec, the register readers' C
scanner and splitter, zlib), counted by wrapping those primitives. Each primitive is a single
pass over what it is handed, so if the sum of what they are handed is at most a constant times
the input at every size, the parse is linear; a parser that re-read a growing prefix, or a
rewrite that rescanned the rest of the text from each quote, would not be.
"""

from __future__ import annotations

import contextlib
import json
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from protocol import (
    bodies,
    header_codec,
    peer_text,
    register_body,
)
from protocol.codes import CURRENT_VERSION
from protocol.errors import ProtocolError
from protocol.register import plain, read

SIZES = (2_000, 8_000, 32_000, 128_000)
WORK_PER_BYTE = 12
"""What a parse may cost per input byte, in counted units: a few passes of each primitive."""


class Work:
    """Units of work counted while a parse runs (see the module doc)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.units = 0
        self._wrap_calls(monkeypatch)

    def add(self, units: int) -> None:
        self.units += units

    def _wrap_calls(self, mp: pytest.MonkeyPatch) -> None:
        work = self

        def sized(fn: Callable[..., Any]) -> Callable[..., Any]:
            def counted(data: Any, *args: Any, **kwargs: Any) -> Any:
                work.add(len(data))
                return fn(data, *args, **kwargs)

            return counted

        def spanned(fn: Callable[..., Any]) -> Callable[..., Any]:
            def counted(text: Any, pos: int, *args: Any) -> Any:
                value, end = fn(text, pos, *args)
                work.add(end - pos)
                return value, end

            return counted

        class Decoder:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def decode(self, data: Any) -> Any:
                work.add(len(data))
                return self.inner.decode(data)

        class Splitter:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def split(self, data: Any, *args: Any) -> Any:
                work.add(len(data))
                return self.inner.split(data, *args)

        decompressobj = read.isal_zlib.decompressobj

        class Inflater:
            def __init__(self) -> None:
                self.inner = decompressobj()

            def decompress(self, data: bytes, max_length: int = 0) -> bytes:
                out = self.inner.decompress(data, max_length)
                work.add(len(out) + len(data) - len(self.inner.unconsumed_tail))
                return out

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

        def scanner(fn: Callable[[str], tuple[str, int]]) -> Callable[[str], tuple[str, int]]:
            def counted(text: str) -> tuple[str, int]:
                out, examined = fn(text)
                work.add(examined)
                return out, examined

            return counted

        mp.setattr(json, "loads", sized(json.loads))
        mp.setattr(peer_text, "quote_bare_keys", scanner(peer_text.quote_bare_keys))
        mp.setattr(peer_text, "_check_depth", sized(peer_text._check_depth))
        mp.setattr(plain, "_SCANNER", spanned(plain._SCANNER))
        mp.setattr(plain, "scanstring", spanned(plain.scanstring))
        for name in ("_BODY", "_TABLE", "_LEAN_TABLE", "_ANY"):
            mp.setattr(plain, name, Decoder(getattr(plain, name)))
        mp.setattr(read, "_PREFIX", Splitter(read._PREFIX))
        mp.setattr(read.isal_zlib, "decompressobj", Inflater)


def _run(parse: Callable[[bytes], Any], data: bytes) -> None:
    with contextlib.suppress(ProtocolError, ValueError):  # a refusal's cost is counted too
        parse(data)


def assert_linear(
    monkeypatch: pytest.MonkeyPatch,
    parse: Callable[[bytes], Any],
    shape: Any,
    size: Callable[[bytes], int] = len,
) -> None:
    """``parse`` over ``shape(n)`` at growing sizes costs at most WORK_PER_BYTE per byte of
    ``size(data)`` (of a compressed body: the bytes it inflates to, at most a bounded
    multiple of the bytes sent)."""
    per_byte = []
    for n in SIZES:
        data = shape(n)
        with monkeypatch.context() as mp:
            work = Work(mp)
            _run(parse, data)
        per_byte.append(work.units / size(data))
    assert max(per_byte) <= WORK_PER_BYTE, per_byte


# -- fastjson and its bare-key rewrite -----------------------------------------------------------

JSON_SHAPES: dict[str, Callable[[int], bytes]] = {
    "escaped quotes, never closed": lambda n: b'"' + b'\\"' * (n // 2),
    "escaped quotes in a bare-key body": lambda n: b'{0:"' + b'\\"' * (n // 2),
    "backslash runs": lambda n: b'{1:"' + b"\\" * n + b'"}',
    "bare keys, dense": lambda n: b"{" + b",".join(b"%d:1" % i for i in range(n // 6)) + b"}",
    "bare keys, whitespace runs": lambda n: b"{" + b" " * n + b"7 :1}",
    "separators without keys": lambda n: b"{0:[" + b",1" * (n // 2) + b"]",
    "digit runs": lambda n: b"{0:1," + b"9" * n + b"}",
    "quotes and braces": lambda n: b"{0:" + b'"{",' * (n // 4) + b"}",
    "nesting at the depth bound": lambda n: (b"[" * 60 + b"]" * 60 + b",") * (n // 121),
    "nesting past the depth bound": lambda n: b"[" * n,
    "a long string": lambda n: b'{0:"' + b"x" * n + b'"}',
    "unicode escapes": lambda n: b'{0:"' + b"\\u00e9" * (n // 6) + b'"}',
}


@pytest.mark.parametrize("shape", JSON_SHAPES.values(), ids=JSON_SHAPES.keys())
def test_fastjson_loads_is_linear(monkeypatch, shape):
    assert_linear(monkeypatch, peer_text.loads, shape)


@pytest.mark.parametrize("shape", JSON_SHAPES.values(), ids=JSON_SHAPES.keys())
def test_the_bare_key_scanner_examines_each_character_a_bounded_number_of_times(shape):
    for n in SIZES:
        text = shape(n).decode()
        _rewritten, examined = peer_text.quote_bare_keys(text)
        assert examined <= 8 * len(text) + 8


def test_the_rewrite_quotes_bare_keys_and_nothing_inside_strings():
    text = '{0:"a,1:b", -2 :{3:"\\"4:"}, "5":[6,7]}'
    rewritten, _ = peer_text.quote_bare_keys(text)
    assert json.loads(rewritten) == {"0": "a,1:b", "-2": {"3": '"4:'}, "5": [6, 7]}
    assert peer_text.quote_bare_keys('{"a":1}')[0] == '{"a":1}'


# -- bodies of requests and answers ---------------------------------------------------------------


def _route_body(n: int, filler: bytes) -> bytes:
    """A fastjson route document (bare broker ids) of about ``n`` bytes."""
    broker = b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"' + filler + b'"},"brokerName":"b"}'
    count = max(1, n // len(broker))
    return b'{"brokerDatas":[' + b",".join([broker] * count) + b'],"queueDatas":[]}'


BODY_PARSERS: dict[str, tuple[Callable[[bytes], Any], Callable[[int], bytes]]] = {
    "data version, escaped quotes": (
        register_body.decode_data_version,
        lambda n: b'{"counter":"' + b'\\"' * (n // 2),
    ),
    "route, bare keys": (bodies.decode_route, lambda n: _route_body(n, b"10.0.0.2:10911")),
    "route, escapes in values": (bodies.decode_route, lambda n: _route_body(n, b'\\"' * 20)),
    "route, unterminated": (bodies.decode_route, lambda n: _route_body(n, b"x")[:-3] + b'"\\'),
    "cluster info, bare keys": (
        bodies.decode_cluster_info,
        lambda n: (
            b'{"brokerAddrTable":{'
            + b",".join(
                b'"b%d":{"brokerAddrs":{0:"10.0.0.1:1"},"brokerName":"b%d"}' % (i, i)
                for i in range(n // 55)
            )
            + b"}}"
        ),
    ),
    "kv table, escapes": (
        bodies.decode_kv_table,
        lambda n: b'{"table":{"k":"' + b'\\\\\\"' * (n // 4) + b'"}}',
    ),
    "json header, many fields": (
        header_codec.decode_json,
        lambda n: (
            b'{"code":1,"extFields":{'
            + b",".join(b'"k%d":"\\"v"' % i for i in range(n // 14))
            + b"}}"
        ),
    ),
}


@pytest.mark.parametrize("case", BODY_PARSERS.values(), ids=BODY_PARSERS.keys())
def test_body_and_header_decoders_are_linear(monkeypatch, case):
    parse, shape = case
    assert_linear(monkeypatch, parse, shape)


# -- register bodies ------------------------------------------------------------------------------


def _plain(n: int, name: Callable[[int], str], extra: str = "") -> bytes:
    entry = '"%s":{"perm":6,"readQueueNums":8,"topicName":"%s","writeQueueNums":8%s}'
    count = max(1, n // 80)
    table = ",".join(entry % (name(i), name(i), extra) for i in range(count))
    return (
        '{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":'
        '{"counter":1,"timestamp":1},"topicConfigTable":{' + table + "}}}"
    ).encode()


def _record(text: bytes) -> bytes:
    return struct.pack(">i", len(text)) + text


def _compressed(n: int, record: Callable[[int], bytes], data_version: bytes = b"") -> bytes:
    records = [record(i) for i in range(max(1, n // 30))]
    inflated = b"".join(
        [
            _record(data_version or b'{"counter":1,"timestamp":1}'),
            struct.pack(">i", len(records)),
            *map(_record, records),
            _record(b"[]"),
        ]
    )
    return zlib.compress(inflated)


def _read(compressed: bool) -> Callable[[bytes], Any]:
    def read_whole(data: bytes) -> Any:
        steps = read.register_body_steps(
            data, compressed, CURRENT_VERSION, topics_per_step=500, bytes_per_step=16_384
        )
        for _ in steps:
            pass

    return read_whole


REGISTER_SHAPES: dict[str, tuple[bool, Callable[[int], bytes]]] = {
    "plain, usual": (False, lambda n: _plain(n, lambda i: f"T{i:07d}")),
    "plain, quoted numbers": (False, lambda n: _plain(n, lambda i: f"T{i}", ',"perm":"6"')),
    "plain, bare keys (general path)": (
        False,
        lambda n: _plain(n, lambda i: f"T{i}", ',"attributes":{0:"x"}'),
    ),
    "plain, escapes in names": (False, lambda n: _plain(n, lambda i: f'T\\"{i}\\\\')),
    "plain, escaped quotes never closed": (
        False,
        lambda n: _plain(n, lambda i: f"T{i}")[:-4] + b'"\\"' * (n // 3),
    ),
    "compressed, usual": (True, lambda n: _compressed(n, lambda i: b"T%07d 8 8 6 SINGLE_TAG" % i)),
    "compressed, attributes with escapes": (
        True,
        lambda n: _compressed(n, lambda i: b'T%d 8 8 6 SINGLE_TAG {"a":"\\"x\\""}' % i),
    ),
    "compressed, unusual (general path)": (
        True,
        lambda n: _compressed(n, lambda i: b"T%d +8 8 6 SINGLE_TAG" % i),
    ),
    "compressed, data version of escaped quotes": (
        True,
        lambda n: _compressed(1, lambda i: b"T 8 8 6 SINGLE_TAG", b'"' + b'\\"' * (n // 2)),
    ),
}


@pytest.mark.parametrize("case", REGISTER_SHAPES.values(), ids=REGISTER_SHAPES.keys())
def test_register_readers_are_linear(monkeypatch, case):
    compressed, shape = case
    size = (lambda data: len(zlib.decompress(data))) if compressed else len
    assert_linear(monkeypatch, _read(compressed), shape, size)


def test_a_large_register_is_read_in_steps_of_bounded_work(monkeypatch):
    """A compressed register that inflates to about 8 MiB: no step between two yields costs
    more than a slice of inflating or a chunk of records, whatever the body's size."""
    data = _compressed(8 << 20, lambda i: b"T%07d 8 8 6 SINGLE_TAG {}" % i)
    steps = read.register_body_steps(
        data, True, CURRENT_VERSION, topics_per_step=5_000, bytes_per_step=1 << 19
    )
    per_step = []
    with monkeypatch.context() as mp:
        work = Work(mp)
        for _ in steps:
            per_step.append(work.units)
            work.units = 0
    assert len(per_step) > 8
    assert max(per_step) <= 3 * read.INFLATE_SLICE_BYTES, max(per_step)


def test_the_count_tells_a_parse_that_reads_a_growing_prefix_again(monkeypatch):
    """The instrument itself: a parse that re-reads what it has read is caught."""

    def rereading(data: bytes) -> None:
        for end in range(256, len(data) + 256, 256):
            with contextlib.suppress(ValueError):
                json.loads(data[:end])

    with pytest.raises(AssertionError):
        assert_linear(monkeypatch, rereading, JSON_SHAPES["a long string"])
