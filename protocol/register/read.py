"""The name server's read of a REGISTER_BROKER body, plain or compressed, into a
:class:`~protocol.register.table.RegisterTable`: lean (only queue counts, perm and sys flag per
topic), in steps of bounded work, and exactly as a full decode of every topic config reads,
errors included (the tests hold it against such a decode, a slow reference kept with them).

A plain body goes to :mod:`protocol.register.plain`. A compressed body is inflated here a slice
per step under the zip-bomb bound, and its length-prefixed parts read: the data version, the
topic records, the filter servers and (from 5.x brokers) the static-topic mapping infos.

The topic records, both upstream forms (4.x: ``name read write perm filterType``; 5.x: the
same and the attributes JSON, ``{}`` when empty), are read a chunk of records at a time in
C-level primitives only. A chunk is split at its length prefixes by one ``re.split``; the
declared lengths are checked against the pieces with ``map``; the pieces are joined with a
separator token and split at the spaces once, so every field is a column taken by slicing. Per
topic no Python function runs: the names are decoded by ``map(bytes.decode, ...)``, the queue
numbers checked once per distinct ``(read, write, perm)`` triple, the filter types and
attributes once per distinct value. Chunks are cut by content and kept in the same
:class:`ChunkCache` as plain bodies' chunks.

A chunk seen before, in this broker's last register or another broker's with the same topics,
is taken from :class:`ChunkCache` by its identity instead of being decoded again; its
:class:`~protocol.register.table.TablePart` also lets the registry skip chunks it applied
already. A large body seen before (a master and its slaves send the same one) is not read
again: its table is taken from the cache by the body's digest. Nor is a large plain body equal
to one read before but for its data version (a cluster's brokers send the same topics, each
with its own version): its table is the one read from the other, with its own version, found
by the cut's key once that body was certified (see :mod:`protocol.register.identity`).

Anything else (a record of 16 MiB or more, a NUL or newline in a record, a signed number,
attributes with spaces, records of both forms in one chunk, a malformed record) raises
:class:`~protocol.register.plain.NotFast` before the table is used, and the records are read by
the general reader, topic by topic, with its results and errors.
"""

from __future__ import annotations

import re
import struct
from collections import OrderedDict
from collections.abc import Callable, Generator, Hashable
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple, cast

from isal import isal_zlib

from protocol.codes import Version
from protocol.errors import BodyError, LimitError
from protocol.peer_text import (
    DECIMAL,
    MAX_PART_BYTES,
    as_list,
    as_object,
    check_part_size,
    loads,
)
from protocol.register import identity, plain
from protocol.register.plain import (
    NotFast,
    TableSink,
    attributes_too_long,
    check_topic_count,
    content_cut,
    data_version_from,
)
from protocol.register.steps import apart
from protocol.register.table import (
    INFLATE_FLOOR_BYTES,
    MAX_DATA_VERSION_BYTES,
    MAX_INFLATE_RATIO,
    MAX_INFLATED_BYTES,
    NO_LIMITS,
    ReadLimits,
    RegisterTable,
    TablePart,
    TopicQueueSpec,
)
from protocol.route_model import DataVersion, TopicConfig

INFLATE_SLICE_BYTES = 1 << 20
"""Inflated per step of :func:`inflate_steps`: a few milliseconds."""
INT32 = struct.Struct(">i")
_INFLATE_ERROR = cast(type[Exception], isal_zlib.error)
"""What a body that does not inflate raises (the library's stubs type it as an instance)."""
TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
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
_COMPRESSED_CHARS_PER_TOPIC = 32
"""A topic record's usual size in an inflated compressed body: turns ``topics_per_step``
into bytes."""


def register_body_steps(
    data: bytes,
    compressed: bool,
    broker_version: int,
    *,
    topics_per_step: int,
    bytes_per_step: int | None = None,
    chunk_cache: ChunkCache | None = None,
    limits: ReadLimits = NO_LIMITS,
    digest: bytes | None = None,
    cut: identity.VersionCut | None = None,
) -> Generator[None, None, RegisterTable]:
    """Read a register body ``topics_per_step`` topic configs (of a plain body: about
    ``bytes_per_step`` bytes) at a time: a generator that yields between steps and returns the
    :class:`RegisterTable`, or raises :class:`BodyError`.

    A plain body in the usual form is decoded by msgspec into typed structs (see
    :mod:`protocol.register.plain`), a compressed body's records in the usual form by C-level
    primitives; otherwise the JSON (or the inflated records) is parsed in C, value by value,
    with only type checks per topic. Equal specs are one shared tuple. Anything unusual (a
    quoted number, a null, an attribute) takes the full decoder's path, which converts it or
    refuses it with the same error as before; a body the C parser refuses (fastjson's bare
    integer keys) is read whole by :func:`protocol.peer_text.loads`.

    ``limits`` are checked as the body is read (see :class:`ReadLimits`); a compressed body
    is inflated a slice at a time, a step each. With ``chunk_cache``, the body's ``digest``
    (:func:`~protocol.register.identity.digest_steps` of a sliced body, whose hash no broker
    can aim at) finds a table read before from the
    very same bytes, under the same limits (a compressed body's for the same broker version),
    which is then the table read; a plain body's ``cut`` (taken as the digest was, by a hash no
    broker can aim at) finds one read from a certified body of the same bytes but for the data
    version, which is then the table read with this body's version. A table read from a body
    its ``cut`` certifies (:func:`~protocol.register.identity.certify`, a step per slice of a
    large body), or found by the cut's key, carries the key as its ``version_key``.
    """
    version = broker_version if compressed else 0  # a plain body reads alike for any
    if digest is not None and chunk_cache is not None:
        known = chunk_cache.table(digest, version, limits)
        if known is None and cut is not None:
            known = chunk_cache.table(cut.key, version, limits)
            if known is not None:
                known = replace(known, data_version=cut.version)
        if known is not None:
            return known
    if compressed:
        table = yield from _compressed_body_steps(
            data, broker_version, topics_per_step, chunk_cache, limits
        )
    else:
        table = yield from plain.plain_body_steps(
            data, topics_per_step, bytes_per_step, chunk_cache, limits
        )
    if cut is not None and (yield from identity.certify_steps(data, cut, table.data_version)):
        table = replace(table, version_key=cut.key)
    if digest is not None and chunk_cache is not None and table.parts is not None:
        # read the usual way, whole; by the cut's key when any body with that key has this table
        chunk_cache.put_table(table.version_key or digest, version, limits, table)
    return table


def _compressed_body_steps(
    data: bytes,
    broker_version: int,
    topics_per_step: int,
    cache: ChunkCache | None,
    limits: ReadLimits,
) -> Generator[None, None, RegisterTable]:
    """A compressed body inflated a slice per step, its records read the fast way when they
    are in the usual form, else by the general reader."""
    head = partial(_check_head, limits=limits)
    # The last slice joins the inflated pieces: the records start in the next turn.
    inflated = yield from apart(inflate_steps(data, limits.max_inflate_ratio, check_head=head))
    try:
        return (
            yield from _fast_compressed_steps(
                inflated, broker_version, topics_per_step, cache, limits
            )
        )
    except NotFast:
        pass
    return (yield from compressed_general_steps(inflated, broker_version, topics_per_step, limits))


def _check_head(head: bytes, limits: ReadLimits) -> None:
    """The topic count a compressed body declares after its data version, checked as soon as
    the first slice is inflated (a head too short to hold it is read in full later)."""
    reader = Inflated(head)
    try:
        reader.chunk("dataVersion")
        count = reader.int32("topic count")
    except BodyError:
        return
    check_topic_count(count, limits)


def inflate_limit(compressed_bytes: int, max_ratio: int = MAX_INFLATE_RATIO) -> int:
    """How far a compressed body of this size may inflate."""
    return min(MAX_INFLATED_BYTES, max(INFLATE_FLOOR_BYTES, max_ratio * compressed_bytes))


def inflate_steps(
    data: bytes,
    max_ratio: int = MAX_INFLATE_RATIO,
    slice_bytes: int = INFLATE_SLICE_BYTES,
    check_head: Callable[[bytes], None] | None = None,
) -> Generator[None, None, bytes]:
    """Inflate a compressed register body ``slice_bytes`` at a time, yielding between slices;
    returns the inflated bytes. Past :func:`inflate_limit` it stops and raises
    :class:`LimitError`: a bomb costs what it inflated up to then, and no more.
    ``check_head`` is given the first slice, to refuse the body by its head before the rest
    is inflated."""
    limit = inflate_limit(len(data), max_ratio)
    inflater = isal_zlib.decompressobj()  # zlib's format, inflated by ISA-L: 2-3 times faster
    pieces: list[bytes] = []
    size = 0
    pending = data
    while True:
        try:
            piece = inflater.decompress(pending, min(slice_bytes, limit + 1 - size))
        except _INFLATE_ERROR as exc:
            raise BodyError(f"compressed register body does not inflate: {exc}") from None
        size += len(piece)
        if size > limit:
            raise LimitError(
                f"compressed register body inflates past {limit} bytes ({len(data)} bytes "
                f"sent; it may inflate {max_ratio} times (registry.register_max_inflate_ratio) "
                f"from {INFLATE_FLOOR_BYTES} bytes on, to {MAX_INFLATED_BYTES} at most)",
                "register_max_inflate_ratio",
            )
        pieces.append(piece)
        if check_head is not None and len(pieces) == 1:
            check_head(piece)
        if inflater.eof:
            return b"".join(pieces)
        pending = inflater.unconsumed_tail
        if not piece and not pending:
            raise BodyError("compressed register body is truncated")
        yield


class Inflated:
    """Reads the length-prefixed parts of an inflated compressed register body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int32(self, what: str) -> int:
        if self.pos + 4 > len(self.data):
            raise BodyError(f"compressed register body truncated in {what}")
        value: int = INT32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        if value < 0:
            raise BodyError(f"compressed register body has a negative {what}: {value}")
        return value

    def chunk(self, what: str) -> bytes:
        length = self.int32(f"{what} length")
        end = self.pos + length
        if end > len(self.data):
            raise BodyError(f"compressed register body truncated in {what}")
        value = self.data[self.pos : end]
        self.pos = end
        return value


def data_version_part(reader: Inflated) -> DataVersion:
    """The data version that opens an inflated compressed body."""
    text = check_part_size(reader.chunk("dataVersion"), "dataVersion", MAX_DATA_VERSION_BYTES)
    return data_version_from(loads(text))


def compressed_tail_steps(
    reader: Inflated, broker_version: int, slice_bytes: int = MAX_PART_BYTES
) -> Generator[None, None, tuple[list[str], dict[str, Any]]]:
    """The filter servers and (from 5.x brokers) static-topic mapping infos after the topic
    records of an inflated compressed body, yielding after each ``slice_bytes`` or so of
    mapping infos parsed; each part is at most :data:`MAX_PART_BYTES` long."""
    servers_text = check_part_size(reader.chunk("filterServerList"), "filterServerList")
    servers = as_list(loads(servers_text), "filterServerList")
    mapping: dict[str, Any] = {}
    if broker_version >= Version.V5_0_0 and reader.pos < len(reader.data):
        parsed = 0
        for _ in range(reader.int32("mapping count")):
            text = check_part_size(reader.chunk("mapping info"), "topicQueueMappingInfo")
            info = as_object(loads(text), "TopicQueueMappingInfo")
            mapping[str(info.get("topic", ""))] = info
            parsed += len(text)
            if parsed >= slice_bytes:
                parsed = 0
                yield
    return [str(s) for s in servers], mapping


def _fast_compressed_steps(
    inflated: bytes,
    broker_version: int,
    topics_per_step: int,
    cache: ChunkCache | None,
    limits: ReadLimits,
) -> Generator[None, None, RegisterTable]:
    """An inflated compressed body whose records are in the usual form, read in chunks of
    records (see :func:`records_steps`); raises ``NotFast`` otherwise."""
    reader = Inflated(inflated)
    data_version = data_version_part(reader)
    count = reader.int32("topic count")
    check_topic_count(count, limits)
    sink = TableSink(cache, limits.max_attributes_bytes)
    chunk_bytes = max(1, min(topics_per_step, 1 << 40)) * _COMPRESSED_CHARS_PER_TOPIC
    records = Records(inflated, reader.pos, count)
    reader.pos = yield from records_steps(records, chunk_bytes, sink)
    servers, mapping = yield from compressed_tail_steps(reader, broker_version)
    specs = tuple(sink.specs)
    return RegisterTable(sink.out, data_version, servers, mapping, specs, {}, sink.whole_parts())


class Records(NamedTuple):
    """Where the topic records of an inflated compressed body are, and how many there are."""

    data: bytes
    start: int
    total: int


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
    left = records.total
    if left == 0:
        return start
    view = memoryview(data)
    while True:
        if size - start <= 2 * chunk_bytes:
            chunk = data[start:]
            key = (len(chunk), hash(chunk))
            part = sink.cached(key)
            if part is None or len(part.names) != left or not 0 < part.end <= len(chunk):
                part = _last_part(chunk, key, left, sink)
                sink.keep(part)
            sink.add_part(part)
            return start + part.end
        search_from = start + chunk_bytes
        for _ in range(_GUESSES):
            found = content_cut(_CANDIDATE, data, search_from)
            if found is None:
                raise NotFast
            chunk = bytes(view[start:found])
            key = (len(chunk), hash(chunk))
            part = sink.cached(key)
            if part is None or part.end != len(chunk):  # a last chunk's part ends before it
                part = _middle_part(chunk, key, sink)
                if part is None:
                    search_from = found + 1
                    continue
                sink.keep(part)
            break
        else:
            raise NotFast
        if len(part.names) >= left:  # the records end before the cut: not a usual body
            raise NotFast
        sink.add_part(part)
        left -= len(part.names)
        start = found
        yield


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
    return TablePart.of(
        key, names, list(map(shared.__getitem__, numbers)), {}, tuple(shared.values()), end
    )


def _check_attributes(values: set[bytes]) -> None:
    """Attributes other than none: each distinct text read as the general reader reads it."""
    for text in values - _NO_ATTRIBUTES:
        try:
            loaded = loads(text.decode())
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


def compressed_general_steps(
    inflated: bytes, broker_version: int, topics_per_step: int, limits: ReadLimits = NO_LIMITS
) -> Generator[None, None, RegisterTable]:
    """The general read of an inflated compressed body, topic by topic: what the fast read
    falls back to for a record of another shape."""
    reader = Inflated(inflated)
    data_version = data_version_part(reader)
    count = reader.int32("topic count")
    check_topic_count(count, limits)
    max_attributes = limits.max_attributes_bytes
    specs: dict[TopicQueueSpec, TopicQueueSpec] = {}
    table: dict[str, TopicQueueSpec] = {}
    unpack = INT32.unpack_from
    size = len(inflated)
    pos = reader.pos
    for _ in range(count):
        if pos + 4 > size:
            raise BodyError("compressed register body truncated in topic config length")
        (length,) = unpack(inflated, pos)
        end = pos + 4 + length
        if length < 0 or end > size:
            raise BodyError("compressed register body truncated in topic config")
        try:
            text = inflated[pos + 4 : end].decode()
        except UnicodeDecodeError:
            raise BodyError("compressed topic config is not UTF-8") from None
        pos = end
        parts = text.split(" ", 5)
        if (
            (len(parts) == 5 or (len(parts) == 6 and parts[5] == "{}"))  # 4.x has no attributes
            and parts[4] in TOPIC_FILTER_TYPES
            and parts[1].isascii()
            and parts[1].isdigit()
            and parts[2].isascii()
            and parts[2].isdigit()
            and parts[3].isascii()
            and parts[3].isdigit()
            and len(parts[1]) < 20
            and len(parts[2]) < 20
            and len(parts[3]) < 20
        ):
            name = parts[0]
            spec = TopicQueueSpec(int(parts[1]), int(parts[2]), int(parts[3]), 0)
        else:
            if len(parts) == 6 and len(parts[5].encode()) > max_attributes:
                raise attributes_too_long(parts[0], len(parts[5].encode()), max_attributes)
            tc = topic_config_from_text(text)
            name = tc.topic_name
            spec = TopicQueueSpec(tc.read_queue_nums, tc.write_queue_nums, tc.perm, 0)
        table[name] = specs.setdefault(spec, spec)
        if len(table) % topics_per_step == 0:
            yield
    reader.pos = pos
    servers, mapping = yield from compressed_tail_steps(reader, broker_version)
    return RegisterTable(table, data_version, servers, mapping, tuple(specs), {})


def topic_config_from_text(text: str) -> TopicConfig:
    parts = text.split(" ", 5)
    if len(parts) < 5:
        raise BodyError(f"compressed topic config {text[:80]!r} has fewer than 5 fields")
    name, read, write, perm, filter_type = parts[:5]
    if not all(DECIMAL.fullmatch(p) for p in (read, write, perm)):
        raise BodyError(f"compressed topic config {text[:80]!r} has a non-integer count")
    numbers = int(read), int(write), int(perm)
    if filter_type not in TOPIC_FILTER_TYPES:
        raise BodyError(f"compressed topic config {name} has topicFilterType {filter_type[:40]!r}")
    attributes: dict[str, str] = {}
    if len(parts) == 6 and parts[5]:  # Java's split drops a trailing empty field
        loaded = loads(parts[5])
        if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
            raise BodyError(f"compressed topic config {name} attributes are not a string map")
        attributes = dict(loaded)
    return TopicConfig(
        topic_name=name,
        read_queue_nums=numbers[0],
        write_queue_nums=numbers[1],
        perm=numbers[2],
        topic_filter_type=filter_type,
        attributes=attributes,
    )


TABLE_BYTES_PER_TOPIC = 64
"""A cached table's charge per topic: its dict's entry and slot (the names and specs are the
chunks', cached apart)."""


def _table_bytes(table: RegisterTable) -> int:
    return TABLE_BYTES_PER_TOPIC * len(table.topic_queues)


class ChunkCache:
    """Topic-table chunks read lately, by identity, so a chunk seen before (in this broker's
    last register, or another broker's with the same topics) is not decoded again; and the
    tables of large bodies read lately, by the body's digest, so a body seen before (a master
    and its slaves send the same one) is not read again.

    Bounded by ``max_bytes``, each chunk charged at its JSON size (more than its decoded
    lists hold), each table at :data:`TABLE_BYTES_PER_TOPIC`; least recently used first out,
    tables before chunks.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.table_hits = 0
        self._parts: OrderedDict[tuple[int, int], TablePart] = OrderedDict()
        self._tables: OrderedDict[tuple[Hashable, int, ReadLimits], RegisterTable] = OrderedDict()

    def __len__(self) -> int:
        return len(self._parts)

    def get(self, key: tuple[int, int]) -> TablePart | None:
        part = self._parts.get(key)
        if part is None:
            self.misses += 1
            return None
        self.hits += 1
        self._parts.move_to_end(key)
        return part

    def put(self, part: TablePart) -> None:
        size = part.key[0]
        if size > self.max_bytes or part.key in self._parts:
            return
        self._parts[part.key] = part
        self.bytes += size
        self._fit()

    def table(self, digest: Hashable, version: int, limits: ReadLimits) -> RegisterTable | None:
        """The table read under ``limits`` (for a broker of ``version``) from a body of this
        digest (or a certified cut's key), if the cache holds it."""
        key = (digest, version, limits)
        table = self._tables.get(key)
        if table is not None:
            self.table_hits += 1
            self._tables.move_to_end(key)
        return table

    def put_table(
        self, digest: Hashable, version: int, limits: ReadLimits, table: RegisterTable
    ) -> None:
        """Keep the table read under ``limits`` from a body: its dicts are shared with every
        register that sends the body again, read-only as every table's are."""
        size = _table_bytes(table)
        key = (digest, version, limits)
        if size > self.max_bytes or key in self._tables:
            return
        self._tables[key] = table
        self.bytes += size
        self._fit()

    def _fit(self) -> None:
        while self.bytes > self.max_bytes:
            if self._tables:
                _, table = self._tables.popitem(last=False)
                self.bytes -= _table_bytes(table)
            else:
                _, old = self._parts.popitem(last=False)
                self.bytes -= old.key[0]
