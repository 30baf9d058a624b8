"""The fast read of a plain REGISTER_BROKER body: msgspec's typed C decoder, a slice at a time.

A broker with 100,000 topics sends a 16 MB body; reading it with the standard library's parser
and a Python call per topic config took most of a second. Here the outer document is decoded
with the topic table left raw (msgspec skips over it in C), and the table is decoded a chunk of
members at a time straight into typed structs, whose four numbers become the shared
:class:`~protocol.register.read_table.TopicQueueSpec` values by C-level ``map``/``zip``: per
topic no Python function runs.

Only the usual form is read here: standard JSON whose topic configs have integer counts and the
expected field types. Anything else raises :class:`NotFast` before any of the body is used, or
sends just the chunk holding it to the general decoder, so a body reads exactly as
:func:`protocol.register.lean_read.register_body_steps`'s general path would read it, errors
included.
"""

from __future__ import annotations

import json
import operator
import re
import zlib
from collections.abc import Generator
from typing import Any, Literal

import msgspec

from protocol import fastjson
from protocol.register import read_table
from protocol.register.chunk_cache import ChunkCache, TablePart
from protocol.register.read_table import TopicQueueSpec, attributes_too_long
from protocol.register_body import check_part_size

WS = b" \t\n\r"


class NotFast(Exception):
    """The body is not in the usual form: read it the general way."""


class _TopicConfigWire(msgspec.Struct, gc=False):
    """A topic config as fastjson writes it; every field optional, as upstream decodes it. The
    filter type is one of upstream's two (no string made per topic); another goes with its chunk
    to the general decoder, which takes any string."""

    topicName: str | None = None
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = 6
    topicFilterType: Literal["SINGLE_TAG", "MULTI_TAG"] | None = None
    topicSysFlag: int = 0
    order: bool | None = None
    attributes: msgspec.Raw = msgspec.Raw(b"null")
    """Left raw: the name server keeps none of it, and its length is checked as sent."""


_NULL = msgspec.Raw(b"null")


class _WrapperWire(msgspec.Struct):
    """The parts besides the table are left raw too: each is decoded (in a step of its own)
    once its length is known to be within bounds."""

    topicConfigTable: msgspec.Raw = _NULL
    dataVersion: msgspec.Raw = _NULL
    topicQueueMappingInfoMap: msgspec.Raw = _NULL


class _BodyWire(msgspec.Struct):
    topicConfigSerializeWrapper: _WrapperWire | None = None
    filterServerList: msgspec.Raw = _NULL


_BODY = msgspec.json.Decoder(_BodyWire)
_TABLE = msgspec.json.Decoder(dict[str, _TopicConfigWire])
_NAME_OF = operator.attrgetter("topicName")
_SPEC_OF = operator.attrgetter("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")
_ATTRIBUTES_OF = operator.attrgetter("attributes")
_USUAL_ATTRIBUTES = (ord("{"), ord("n"))
"""The first byte of attributes read the usual way: an object, or null (msgspec checked the
syntax); anything else takes the general decoder, which names the error."""
_ENTRY_CUT = re.compile(rb'\},"([^"\\]*)":\{')
"""Where one topic config likely ends and the next begins (fastjson writes ``attributes``
first, so a nested object never precedes a key whose value is an object)."""
_GUESSES = 4
"""Cut guesses tried per chunk before the body is left to the general reader."""
_CUT_KEY_MASK = 15
_CUT_LOOKAHEAD = 64
"""A chunk ends before a member whose key's CRC-32 has its low four bits clear, among the next
64 members past the chunk size (else at the first): cuts depend on the content, so a topic added
to or removed from a table changes only the chunk holding it, not every later one."""


_ANY = msgspec.json.Decoder()


class Outline:
    """The body's parts, raw: its topic table, and the small parts (see :meth:`decoded`)."""

    __slots__ = ("data_version", "filter_server_list", "mapping", "table")

    def __init__(
        self,
        table: memoryview,
        data_version: msgspec.Raw,
        mapping: msgspec.Raw,
        servers: msgspec.Raw,
    ) -> None:
        self.table = table
        self.data_version = data_version
        self.mapping = mapping
        self.filter_server_list = servers

    def decoded(self, max_data_version: int, max_part: int) -> tuple[Any, Any, Any]:
        """(data version, mapping infos, filter servers) decoded, each refused with
        :class:`LimitError` past its bound before it is."""
        parts = (
            (self.data_version, "dataVersion", max_data_version),
            (self.mapping, "topicQueueMappingInfoMap", max_part),
            (self.filter_server_list, "filterServerList", max_part),
        )
        for raw, what, limit in parts:
            check_part_size(raw, what, limit)
        return tuple(_ANY.decode(raw) for raw, _what, _limit in parts)


def outline(data: bytes) -> Outline:
    """Decode all but the topic table (which msgspec only skips over, checking its syntax)."""
    try:
        body = _BODY.decode(data)  # one pass: the wrapper is a struct, its table left raw
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # ValidationError included
        # A body nested past msgspec's depth is the general reader's to refuse, by its bound.
        raise NotFast from None
    wrapper = body.topicConfigSerializeWrapper or _WrapperWire()
    table = memoryview(wrapper.topicConfigTable)
    if bytes(table[:1]) not in (b"{", b"n"):
        raise NotFast
    return Outline(
        table, wrapper.dataVersion, wrapper.topicQueueMappingInfoMap, body.filterServerList
    )


class TableSink:
    """Where the chunks of a topic table go: ``out`` (topic -> shared spec), the distinct
    ``specs`` and ``renamed`` keys; an unusual chunk goes to the general per-topic reader.

    ``parts`` lists the chunks read, in order, while every chunk was read the usual way (None
    once one was not); ``cache``, when given, supplies chunks read before and keeps new ones.
    """

    __slots__ = (
        "cache",
        "max_attributes_bytes",
        "out",
        "parts",
        "renamed",
        "specs",
    )

    def __init__(
        self,
        out: dict[str, Any],
        specs: dict[Any, Any],
        renamed: dict[str, str],
        cache: ChunkCache | None = None,
        max_attributes_bytes: int = 1 << 62,
    ) -> None:
        self.out = out
        self.max_attributes_bytes = max_attributes_bytes
        """A topic's attributes, as sent, may be no longer (else :class:`LimitError`)."""
        self.specs = specs
        self.renamed = renamed
        self.cache = cache
        self.parts: list[TablePart] | None = []

    def add_parsed(self, parsed: dict[str, Any]) -> None:
        """Add members parsed by the standard library, through the general per-topic reader."""
        limit = self.max_attributes_bytes
        read_table.add_specs(self.out, self.specs, self.renamed, parsed, max_attributes_bytes=limit)

    def add_chunk(self, chunk: bytes, *, guess: bool = False) -> bool:
        """Add one chunk of members; False when a guessed cut was wrong (nothing added)."""
        key = (len(chunk), hash(chunk))
        cache = self.cache
        part = cache.get(key) if cache is not None else None
        if part is None:
            try:
                decoded = _TABLE.decode(chunk)
                part = self._part(key, decoded, chunk)
            except (msgspec.ValidationError, _Unusual):
                try:
                    general = json.loads(chunk, parse_constant=fastjson.refuse_constant)
                except (ValueError, RecursionError):
                    if guess:
                        return False
                    raise NotFast from None
                fastjson.refuse_unencodable(chunk, general)
                self.add_parsed(general)
                self.parts = None
                return True
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                if guess:
                    return False
                raise NotFast from None
            if cache is not None:
                cache.put(part)
        self.add_part(part)
        return True

    def add_part(self, part: TablePart) -> None:
        """Add the topics of a chunk read (or found in the cache)."""
        specs = self.specs
        for distinct in part.distinct:  # in order of first use, as the general reader
            specs.setdefault(distinct, distinct)
        self.renamed.update(part.renamed)
        self.out.update(zip(part.names, part.specs, strict=True))
        if self.parts is not None:
            self.parts.append(part)

    def _part(
        self, key: tuple[int, int], decoded: dict[str, _TopicConfigWire], chunk: bytes
    ) -> TablePart:
        keys = list(decoded)
        values = list(decoded.values())
        names = list(map(_NAME_OF, values))
        renamed: dict[str, str] = {}
        if names != keys:
            for name_key, name in zip(keys, names, strict=True):
                if name and name != name_key:
                    renamed[name_key] = name
        if not _no_attributes(chunk):
            raws = list(map(_ATTRIBUTES_OF, values))
            joined = b"".join(raws)
            if joined.count(b"{}") * 2 + joined.count(b"null") * 4 != len(joined):
                # Not all ``{}`` or null (each raw is one JSON value, so text made of these
                # two tokens alone is a run of them): the distinct texts are looked at.
                self._check_attributes(set(map(bytes, raws)), keys, values)
        specs = self.specs
        numbers = list(map(_SPEC_OF, values))
        shared: dict[Any, Any] = {}
        for distinct in dict.fromkeys(numbers):
            spec = specs.get(distinct)
            shared[distinct] = spec if spec is not None else TopicQueueSpec(*distinct)
        return TablePart(
            key, keys, list(map(shared.__getitem__, numbers)), renamed, tuple(shared.values())
        )

    def _check_attributes(
        self, distinct: set[bytes], keys: list[str], values: list[_TopicConfigWire]
    ) -> None:
        """Each distinct attributes text of a chunk: not longer than the bound (else
        :class:`LimitError` naming the first topic past it), and an object or null (else
        :class:`_Unusual`, for the general decoder)."""
        limit = self.max_attributes_bytes
        if max(map(len, distinct)) > limit:
            for name, value in zip(keys, values, strict=True):
                length = len(value.attributes)
                if length > limit:
                    raise attributes_too_long(name, length, limit)
        if not all(text[0] in _USUAL_ATTRIBUTES for text in distinct):
            raise _Unusual


def _no_attributes(chunk: bytes) -> bool:
    """Whether every ``attributes`` of a chunk (valid JSON: msgspec decoded it) is ``{}`` or
    null, told from its bytes in C: without a backslash every quote delimits a string, so
    each ``"attributes"`` is a whole string (a key, or a value), and each is the key of one of
    the two (any other use of the string, or a space before its colon, sends the chunk to the
    check of each topic)."""
    if b"\\" in chunk:
        return False
    strings = chunk.count(b'"attributes"')
    return strings == chunk.count(b'"attributes":{}') + chunk.count(b'"attributes":null')


class _Unusual(Exception):
    """A chunk decoded, but not in the usual form: the general decoder reads it."""


def table_steps(
    table: memoryview, chunk_bytes: int, sink: TableSink
) -> Generator[None, None, None]:
    """Read the raw topic table into ``sink``, ``chunk_bytes`` at a time, yielding between
    chunks.

    A chunk ends where :data:`_ENTRY_CUT` guesses a member ends and is decoded whole as
    ``{chunk}``. The guess needs no trust: a chunk that decodes as an object is a prefix of the
    members ending outside any string at depth zero, so the comma after it separates members.
    A chunk whose values are unusual (a quoted number, a null, a non-string attribute) is handed
    to the sink's general per-topic decoder as parsed by the standard library.
    """
    if bytes(table[:1]) == b"n":
        return
    size = len(table)
    start = 1
    while start < size and table[start] in WS:
        start += 1
    if bytes(table[start : start + 1]) == b"}":
        return
    while True:
        if size - start <= 2 * chunk_bytes:  # the last chunk: up to the table's own end
            sink.add_chunk(b"{" + table[start:])
            return
        search_from = start + chunk_bytes
        for _ in range(_GUESSES):
            found = content_cut(_ENTRY_CUT, table, search_from)
            if found is None:
                raise NotFast
            cut = found + 1  # the comma between two members, if the guess is right
            if sink.add_chunk(b"".join((b"{", table[start:cut], b"}")), guess=True):
                start = cut + 1
                break
            search_from = found + 1
        else:
            raise NotFast
        yield


def content_cut(
    pattern: re.Pattern[bytes], data: memoryview | bytes, search_from: int
) -> int | None:
    """Where a likely boundary found by ``pattern`` (its group 1 the next key or name) at or
    after ``search_from`` starts (see :data:`_CUT_LOOKAHEAD`), or None when there is none."""
    first = None
    for count, found in enumerate(pattern.finditer(data, search_from)):
        if first is None:
            first = found.start()
        if zlib.crc32(found.group(1)) & _CUT_KEY_MASK == 0:
            return found.start()
        if count >= _CUT_LOOKAHEAD:
            break
    return first
