"""The fast read of a compressed REGISTER_BROKER body's topic records, both upstream forms
(4.x: ``name read write perm filterType``; 5.x: the same and the attributes JSON, ``{}`` when
empty), a chunk of records at a time, in C-level primitives only.

A chunk of the inflated records is split at its length prefixes by one ``re.split``; the
declared lengths are checked against the pieces with ``map``; the pieces are joined with a
separator token and split at the spaces once, so every field is a column taken by slicing. Per
topic no Python function runs: the names are decoded by ``map(bytes.decode, ...)``, the queue
numbers checked once per distinct ``(read, write, perm)`` triple, the filter types and
attributes once per distinct value. Chunks are cut by content and kept in the same
:class:`~protocol.register.chunk_cache.ChunkCache` as plain bodies, so a chunk seen before is
not read again and the registry can skip chunks it applied already.

Anything else (a record of 16 MiB or more, a NUL or newline in a record, a signed number,
attributes with spaces, records of both forms in one chunk, a malformed record) raises
:class:`~protocol.register.plain_fast.NotFast` before the table is used, and the body is
read by the general per-topic reader, with its results and errors.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any

from protocol import fastjson
from protocol.errors import BodyError
from protocol.json_fields import DECIMAL
from protocol.register.chunk_cache import TablePart
from protocol.register.plain_fast import (
    NotFast,
    TableSink,
    content_cut,
)
from protocol.register.read_table import TopicQueueSpec, attributes_too_long
from protocol.register_body import TOPIC_FILTER_TYPES

_PREFIX = re.compile(rb"\x00([\x00-\xff]{3})")
"""A record's length prefix (a big-endian int32 below 16 MiB): split on it, its three low
bytes kept between the pieces."""
_CANDIDATE = re.compile(rb"(?<![\x00])\x00[\x00-\xff]{3}([^ \x00\n]+) ")
"""A likely record start: a length prefix not preceded by a NUL (a record's text holds none),
then a name and a space. A guess only: the chunk it ends is checked record by record."""
_SEPARATOR = b" \n "
"""Joins a chunk's records before splitting at spaces: the ``\\n`` token between two records
proves that each has the same number of fields."""
_FILTER_TYPES = frozenset(t.encode() for t in TOPIC_FILTER_TYPES)
_NO_ATTRIBUTES = frozenset((b"", b"{}"))
_GUESSES = 4
"""Cut guesses tried per chunk before the body is left to the general reader; as the plain
reader, a chunk is cut by content (before a record whose name's CRC-32 has its low bits
clear), so a topic added or removed changes the chunk holding it only."""


class Records:
    """Where the topic records of an inflated compressed body are, and how many there are."""

    __slots__ = ("count", "data", "start")

    def __init__(self, data: bytes, start: int, count: int) -> None:
        self.data = data
        self.start = start
        self.count = count


def records_steps(
    records: Records, chunk_bytes: int, sink: TableSink
) -> Generator[None, None, int]:
    """Read the topic records into ``sink``, about ``chunk_bytes`` of them at a time, yielding
    between chunks; returns the position after the last record (where the filter-server list
    begins).

    Raises :class:`NotFast` when a chunk is not in the usual form (nothing is then to be used
    of ``sink``). The last chunk reaches to the end of the inflated data, so its identity
    covers the body's tail too and a cached one tells where the records end.
    """
    data = records.data
    size = len(data)
    start = records.start
    left = records.count
    if left == 0:
        return start
    view = memoryview(data)
    while True:
        if size - start <= 2 * chunk_bytes:
            chunk = data[start:]
            key = (len(chunk), hash(chunk))
            part = _cached(sink, key)
            if part is None or len(part.names) != left or not 0 < part.end <= len(chunk):
                part = _last_part(chunk, key, left, sink)
                _keep(sink, part)
            sink.add_part(part)
            return start + part.end
        search_from = start + chunk_bytes
        for _ in range(_GUESSES):
            found = content_cut(_CANDIDATE, data, search_from)
            if found is None:
                raise NotFast
            chunk = bytes(view[start:found])
            key = (len(chunk), hash(chunk))
            part = _cached(sink, key)
            if part is None or part.end != len(chunk):  # a last chunk's part ends before it
                part = _middle_part(chunk, key, sink)
                if part is None:
                    search_from = found + 1
                    continue
                _keep(sink, part)
            break
        else:
            raise NotFast
        if len(part.names) >= left:  # the records end before the cut: not a usual body
            raise NotFast
        sink.add_part(part)
        left -= len(part.names)
        start = found
        yield


def _cached(sink: TableSink, key: tuple[int, int]) -> TablePart | None:
    cache = sink.cache
    return cache.get(key) if cache is not None else None


def _keep(sink: TableSink, part: TablePart) -> None:
    if sink.cache is not None:
        sink.cache.put(part)


def _middle_part(chunk: bytes, key: tuple[int, int], sink: TableSink) -> TablePart | None:
    """The records of a chunk that must end exactly at a record's end; None when it does not
    (a wrong cut guess) or is not in the usual form."""
    items = _PREFIX.split(chunk)
    if items[0]:
        raise NotFast  # a chunk starts at a record: its first bytes are a length prefix
    contents = items[2::2]
    if list(map(int.from_bytes, items[1::2])) != list(map(len, contents)):
        return None
    try:
        return _part(key, contents, len(chunk), sink)
    except NotFast:
        return None


def _last_part(chunk: bytes, key: tuple[int, int], count: int, sink: TableSink) -> TablePart:
    """The last ``count`` records, at the start of ``chunk`` (the body's tail follows them)."""
    items = _PREFIX.split(chunk, count)
    if items[0] or len(items) != 2 * count + 1:
        raise NotFast
    contents = items[2::2]
    last = contents[-1]
    length = int.from_bytes(items[-2])
    if length > len(last):
        raise NotFast  # truncated: the general reader names it
    contents[-1] = last[:length]
    if list(map(int.from_bytes, items[1::2])) != list(map(len, contents)):
        raise NotFast
    return _part(key, contents, len(chunk) - (len(last) - length), sink)


def _part(key: tuple[int, int], contents: list[bytes], end: int, sink: TableSink) -> TablePart:
    """The chunk's topics and their shared specs, every record checked as the general reader
    checks it (raises :class:`NotFast` where it would read or refuse it otherwise)."""
    count = len(contents)
    joined = _SEPARATOR.join(contents)
    if joined.count(b"\n") != count - 1:
        raise NotFast  # a newline inside a record
    tokens = joined.split(b" ")
    period, rest = divmod(len(tokens) + 1, count)
    if rest or period not in (6, 7) or tokens[period - 1 :: period].count(b"\n") != count - 1:
        raise NotFast  # records of another shape, or of both forms
    if not _FILTER_TYPES.issuperset(tokens[4::period]):
        raise NotFast
    if period == 7:
        attributes = tokens[5::7]
        limit = sink.max_attributes_bytes
        if max(map(len, attributes)) > limit:
            at = next(i for i, text in enumerate(attributes) if len(text) > limit)
            name = tokens[at * period].decode(errors="replace")
            raise attributes_too_long(name, len(attributes[at]), limit)
        _check_attributes(set(attributes))
    try:
        names = list(map(bytes.decode, tokens[0::period]))
    except UnicodeDecodeError:
        raise NotFast from None
    numbers = list(zip(tokens[1::period], tokens[2::period], tokens[3::period], strict=True))
    specs = sink.specs
    shared: dict[Any, Any] = {}
    for distinct in dict.fromkeys(numbers):  # in order of first use, as the general reader
        values = _spec_numbers(distinct)
        spec = specs.get(values)
        shared[distinct] = spec if spec is not None else TopicQueueSpec(*values)
    return TablePart(
        key, names, list(map(shared.__getitem__, numbers)), {}, tuple(shared.values()), end
    )


def _check_attributes(values: set[bytes]) -> None:
    """Attributes other than none: each distinct text read as the general reader reads it."""
    for text in values - _NO_ATTRIBUTES:
        try:
            loaded = fastjson.loads(text.decode())
        except (UnicodeDecodeError, ValueError, BodyError):
            raise NotFast from None  # the general reader says what is wrong with it
        if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
            raise NotFast


def _spec_numbers(triple: tuple[bytes, bytes, bytes]) -> tuple[int, int, int, int]:
    """(read, write, perm, sys flag 0) of one distinct triple of decimal fields."""
    try:
        texts = [field.decode("ascii") for field in triple]
    except UnicodeDecodeError:
        raise NotFast from None
    if not all(DECIMAL.fullmatch(text) and text[0] not in "+-" for text in texts):
        raise NotFast  # signs, non-digits, too long: the general reader decides
    read, write, perm = map(int, texts)
    return read, write, perm, 0
