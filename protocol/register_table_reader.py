"""The fast read of a plain REGISTER_BROKER body: msgspec's typed C decoder, a slice at a time.

A broker with 100,000 topics sends a 16 MB body; reading it with the standard library's parser
and a Python call per topic config took most of a second. Here the outer document is decoded
with the topic table left raw (msgspec skips over it in C), and the table is decoded a chunk of
members at a time straight into typed structs, whose four numbers become the shared
:class:`~protocol.bodies.TopicQueueSpec` values by C-level ``map``/``zip``: per topic no Python
function runs.

Only the usual form is read here: standard JSON whose topic configs have integer counts and the
expected field types. Anything else raises :class:`NotFast` before any of the body is used, or
sends just the chunk holding it to the general decoder, so a body reads exactly as
:func:`protocol.bodies.register_body_steps`'s general path would read it, errors included.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Generator
from typing import Any, Literal

import msgspec

from protocol import fastjson

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
    attributes: dict[str, str] | None = None


class _WrapperWire(msgspec.Struct):
    topicConfigTable: msgspec.Raw = msgspec.Raw(b"null")
    dataVersion: Any = None
    topicQueueMappingInfoMap: Any = None


class _BodyWire(msgspec.Struct):
    topicConfigSerializeWrapper: msgspec.Raw = msgspec.Raw(b"null")
    filterServerList: Any = None


_BODY = msgspec.json.Decoder(_BodyWire)
_WRAPPER = msgspec.json.Decoder(_WrapperWire)
_TABLE = msgspec.json.Decoder(dict[str, _TopicConfigWire])
_NAME_OF = operator.attrgetter("topicName")
_SPEC_OF = operator.attrgetter("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")
_ENTRY_CUT = re.compile(rb'\},"[^"\\]*":\{')
"""Where one topic config likely ends and the next begins (fastjson writes ``attributes``
first, so a nested object never precedes a key whose value is an object)."""
_GUESSES = 4
"""Cut guesses tried per chunk before the body is left to the general reader."""


class Outline:
    """The body's small parts, decoded; its topic table still raw."""

    __slots__ = ("data_version", "filter_server_list", "mapping", "table")

    def __init__(self, table: memoryview, data_version: Any, mapping: Any, servers: Any) -> None:
        self.table = table
        self.data_version = data_version
        self.mapping = mapping
        self.filter_server_list = servers


def outline(data: bytes) -> Outline:
    """Decode all but the topic table (which msgspec only skips over, checking its syntax)."""
    try:
        body = _BODY.decode(data)
        wrapper_raw = memoryview(body.topicConfigSerializeWrapper)
        if bytes(wrapper_raw[:1]) == b"n":  # null
            wrapper = _WrapperWire()
        elif bytes(wrapper_raw[:1]) == b"{":
            wrapper = _WRAPPER.decode(wrapper_raw)
        else:
            raise NotFast
    except (msgspec.DecodeError, UnicodeDecodeError):  # ValidationError included
        raise NotFast from None
    table = memoryview(wrapper.topicConfigTable)
    if bytes(table[:1]) not in (b"{", b"n"):
        raise NotFast
    return Outline(
        table, wrapper.dataVersion, wrapper.topicQueueMappingInfoMap, body.filterServerList
    )


class TableSink:
    """Where the chunks of a topic table go: ``out`` (topic -> shared spec), the distinct
    ``specs``, ``renamed`` keys, and the general per-topic reader for unusual chunks."""

    __slots__ = ("add_general", "make_spec", "out", "renamed", "specs")

    def __init__(
        self,
        out: dict[str, Any],
        specs: dict[Any, Any],
        renamed: dict[str, str],
        add_general: Callable[[dict[str, Any], dict[Any, Any], dict[str, str], Any], None],
        make_spec: Callable[..., Any],
    ) -> None:
        self.out = out
        self.specs = specs
        self.renamed = renamed
        self.add_general = add_general
        self.make_spec = make_spec

    def add_chunk(self, chunk: bytes, *, guess: bool = False) -> bool:
        """Add one chunk of members; False when a guessed cut was wrong (nothing added)."""
        try:
            part = _TABLE.decode(chunk)
        except msgspec.ValidationError:
            try:
                general = json.loads(chunk, parse_constant=fastjson.refuse_constant)
            except (ValueError, RecursionError):
                if guess:
                    return False
                raise NotFast from None
            self.add_general(self.out, self.specs, self.renamed, general)
            return True
        except (msgspec.DecodeError, UnicodeDecodeError):
            if guess:
                return False
            raise NotFast from None
        keys = list(part)
        values = list(part.values())
        names = list(map(_NAME_OF, values))
        if names != keys:
            for key, name in zip(keys, names, strict=True):
                if name and name != key:
                    self.renamed[key] = name
        numbers = list(map(_SPEC_OF, values))
        specs = self.specs
        for distinct in dict.fromkeys(numbers):  # in order of first use, as the general reader
            if distinct not in specs:
                spec = self.make_spec(*distinct)
                specs[spec] = spec
        self.out.update(zip(keys, map(specs.__getitem__, numbers), strict=True))
        return True


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
            found = _ENTRY_CUT.search(table, search_from)
            if found is None:
                raise NotFast
            cut = found.start() + 1  # the comma between two members, if the guess is right
            if sink.add_chunk(b"".join((b"{", table[start:cut], b"}")), guess=True):
                start = cut + 1
                break
            search_from = found.start() + 1
        else:
            raise NotFast
        yield
