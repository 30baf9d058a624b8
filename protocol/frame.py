"""Remoting frames: the command model, its encoding, and an incremental sans-IO decoder.

A frame is ``length(4) | serialize_type(1) header_length(3) | header | body``, big-endian,
where ``length`` counts everything after itself. :class:`FrameDecoder` takes bytes as they
arrive and hands back whole commands; it never buffers more than one frame's worth beyond
``max_frame_size``, so a peer cannot grow our memory by announcing a huge length.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from protocol import header_codec
from protocol.codes import (
    CURRENT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    SerializeType,
)
from protocol.errors import FrameError

DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024
"""Upstream's ``com.rocketmq.remoting.frameMaxLength`` default."""

DEFAULT_MAX_HEADER_SIZE = 64 * 1024
"""Headers are a few hundred bytes in practice; a bigger one is refused before it is parsed."""
_LARGE_FRAME = 1 << 16
"""Frames this long that a read does not hold whole are gathered as a list of reads and joined
once, header and body apart, not grown in the buffer and copied out of it: a register body
(tens of KB to 16 MB) arrives in reads of 64 KB and is copied about once instead of four times."""

_PREFIX = struct.Struct(">II")
_LENGTH = struct.Struct(">I")
_HEADER_LENGTH_MASK = 0x00FFFFFF
_OPAQUE_VALUE = re.compile(rb'"opaque":(-?[0-9]+)')
MAX_OPAQUE_CHARS = 12
"""An opaque longer than this (sign included) is answered by decoding, never from a template
(an int32 takes at most 11)."""


@dataclass(slots=True)
class RemotingCommand:
    """One request or response. ``opaque`` is mutable: a sender assigns it when it sends."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: LanguageCode = LanguageCode.PYTHON
    version: int = int(CURRENT_VERSION)
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        opaque: int = 0,
        oneway: bool = False,
        serialize_type: SerializeType = SerializeType.JSON,
        version: int = int(CURRENT_VERSION),
        language: LanguageCode = LanguageCode.PYTHON,
    ) -> RemotingCommand:
        return cls(
            code=int(code),
            opaque=opaque,
            flag=FLAG_ONEWAY if oneway else 0,
            language=language,
            version=version,
            ext_fields=dict(ext_fields or {}),
            body=body,
            serialize_type=serialize_type,
        )

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque, same serialization, as upstream answers."""
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            language=LanguageCode.JAVA,
            version=int(CURRENT_VERSION),
            remark=remark,
            ext_fields=dict(ext_fields or {}),
            body=body,
            serialize_type=self.serialize_type,
        )


def encode_command(cmd: RemotingCommand) -> bytes:
    return b"".join((*_encode_head(cmd), cmd.body))


def encode_command_head(cmd: RemotingCommand) -> bytes:
    """The frame of ``cmd`` but for its body, which follows it on the wire as it is: a large
    body shared by many answers is then never copied into each."""
    return b"".join(_encode_head(cmd))


def _encode_head(cmd: RemotingCommand) -> tuple[bytes, bytes]:
    """The length prefix (which counts the body too) and the encoded header of ``cmd``."""
    header = header_codec.Header(
        cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields
    )
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        encoded = header_codec.encode_binary(header)
    else:
        encoded = header_codec.encode_json(header)
    if len(encoded) > _HEADER_LENGTH_MASK:
        raise FrameError(f"header of {len(encoded)} bytes does not fit the 24-bit length field")
    prefix = _PREFIX.pack(
        4 + len(encoded) + len(cmd.body), (int(cmd.serialize_type) << 24) | len(encoded)
    )
    return prefix, encoded


def _sole_opaque(buffer: bytes, pos: int) -> tuple[int, int] | None:
    """The span of the opaque's digits in the JSON header starting at ``pos``, or None unless
    the header names ``"opaque"`` exactly once, with an integer: a template or a shape must not
    depend on which of two fields a reader takes."""
    found = list(_OPAQUE_VALUE.finditer(buffer, pos))
    if len(found) != 1 or buffer.count(b'"opaque"', pos) != 1:
        return None
    return found[0].span(1)


class FrameTemplate(NamedTuple):
    """An encoded frame with a JSON header, held apart around its opaque's digits, so the same
    frame for another opaque is one join (:meth:`frame`): the length prefix and the header-length
    word are counted again for the new digits, the rest is shared by every frame made from it."""

    head: bytes
    """The header before the opaque's digits."""
    tail: bytes
    """The header after them."""
    body: bytes
    header_base: int
    """The header's length without the digits."""
    frame_base: int
    """The length prefix's value without the digits."""

    @classmethod
    def of(cls, encoded: bytes) -> FrameTemplate | None:
        """``encoded`` (a whole frame, length prefix included) as a template; None unless its
        header is JSON and names ``"opaque"`` exactly once, with an integer."""
        if len(encoded) < 8 or encoded[4] != SerializeType.JSON:
            return None
        header_end = 8 + int.from_bytes(encoded[5:8], "big")
        span = _sole_opaque(encoded[:header_end], 8)
        if span is None:
            return None
        start, end = span
        head, tail, body = encoded[8:start], encoded[end:header_end], encoded[header_end:]
        header_base = len(head) + len(tail)
        return cls(head, tail, body, header_base, 4 + header_base + len(body))

    @property
    def nbytes(self) -> int:
        """The bytes held: the header but for the opaque's digits, and the body."""
        return self.header_base + len(self.body)

    def frame(self, digits: bytes) -> bytes:
        """The whole frame (length prefix included) with ``digits`` as its opaque."""
        n = len(digits)
        words = _PREFIX.pack(self.frame_base + n, self.header_base + n)
        return b"".join((words, self.head, digits, self.tail, self.body))


class TemplateAnswers:
    """Answers kept as :class:`FrameTemplate` by the shape of the request they answer: its
    JSON header with the opaque's digits cut out. A request frame that differs from a stored
    one only in its opaque gets the stored answer with its own opaque, by one lookup and one
    join, without being decoded. Which requests may be answered so, and how many, is the
    caller's to decide."""

    __slots__ = ("_templates", "hits")

    def __init__(self) -> None:
        self._templates: dict[bytes, tuple[bytes, bytes, bytes, int, int]] = {}
        """Each template as a plain tuple: unpacking one is quicker than a named tuple."""
        self.hits = 0

    def __len__(self) -> int:
        return len(self._templates)

    def answer(self, frame: bytes) -> bytes | None:
        """The stored answer for ``frame`` (without its length prefix) with ``frame``'s opaque,
        or None: the frame is not a JSON header without a body whose first ``"opaque":`` holds a
        JSON integer (of at most ``MAX_OPAQUE_CHARS``) ended by a comma or the header's closing
        brace, or no answer is stored for its shape."""
        # The hottest path of a name server: the scan and the join of FrameTemplate.frame are
        # written out here, with no call in between; the integer's end is found by one search
        # and its characters checked by one test, not character by character.
        size = len(frame)
        # The header-length word equals the frame's length: a JSON header (serialize type 0 in
        # its top byte) and no body. (Past 24 bits the top byte would be the length's, not a
        # type: such a frame is never answered from a template.)
        if size < 4 or _LENGTH.unpack_from(frame)[0] != size - 4 or size > _HEADER_LENGTH_MASK:
            return None
        start = frame.find(b'"opaque":', 4) + 9
        if start == 8:
            return None
        end = frame.find(b",", start)
        if end < 0:
            end = frame.find(b"}", start)
            if end < 0:
                return None
        digits = frame[start:end]
        n = end - start
        if not digits.isdigit():  # empty (nothing found) too
            if n < 2 or digits[0] != 45 or not digits[1:].isdigit():  # "-" and digits
                return None
            if digits[1] == 48 and n > 2:  # a leading zero is not JSON
                return None
        elif digits[0] == 48 and n > 1:
            return None
        if n > MAX_OPAQUE_CHARS:
            return None
        template = self._templates.get(frame[4:start] + frame[end:])
        if template is None:
            return None
        self.hits += 1
        head, tail, body, header_base, frame_base = template
        return b"".join((_PREFIX.pack(frame_base + n, header_base + n), head, digits, tail, body))

    @staticmethod
    def shape(frame: bytes, opaque: int) -> bytes | None:
        """The shape to keep the answer to ``frame`` (without its length prefix) under; None
        unless its header is JSON and runs to the end of the frame (no body) and names
        ``"opaque"`` once, with ``opaque``."""
        size = len(frame)
        if size < 4 or frame[0] or size != 4 + int.from_bytes(frame[1:4], "big"):
            return None
        span = _sole_opaque(frame, 4)
        if span is None or frame[span[0] : span[1]] != b"%d" % opaque:
            return None
        return frame[4 : span[0]] + frame[span[1] :]

    def put(self, shape: bytes, template: FrameTemplate) -> None:
        """Keep ``template`` for ``shape`` (see :meth:`shape`)."""
        t = template
        self._templates[shape] = (t.head, t.tail, t.body, t.header_base, t.frame_base)

    def pop(self, shape: bytes) -> FrameTemplate | None:
        found = self._templates.pop(shape, None)
        return None if found is None else FrameTemplate._make(found)

    def clear(self) -> None:
        self._templates.clear()


class SplitFrame(NamedTuple):
    """A large frame as :class:`FrameDecoder` hands it over: the header-length word with the
    header, and the body, each joined from the reads on its own. Cutting the body out of the
    whole frame would copy its megabytes a second time, in the turn that received them."""

    head: bytes
    body: bytes


def decode_frame(
    frame: bytes | memoryview | SplitFrame, max_header_size: int = DEFAULT_MAX_HEADER_SIZE
) -> RemotingCommand:
    """Decode one frame without its 4-byte length prefix (header-length word onwards).

    Every failure is a :class:`FrameError` whatever the parser raised underneath (a deeply
    nested JSON header raises ``RecursionError`` in ``json``), so a caller has one thing to
    catch; its ``kind`` says what went wrong and ``answerable`` whether the stream goes on.
    """
    body: bytes | None = None
    if type(frame) is SplitFrame:
        frame, body = frame
    if len(frame) < 4:
        raise FrameError(
            f"frame of {len(frame)} bytes is shorter than its header-length word",
            kind="frame_length",
        )
    word = _LENGTH.unpack_from(frame, 0)[0]
    kind, header_length = word >> 24, word & _HEADER_LENGTH_MASK
    if header_length > len(frame) - 4:
        raise FrameError(
            f"header length {header_length} exceeds the frame's {len(frame) - 4} bytes",
            kind="header_length",
        )
    if header_length > max_header_size:
        raise FrameError(
            f"header of {header_length} bytes exceeds the limit of {max_header_size}",
            kind="header_too_large",
        )
    header_bytes = bytes(frame[4 : 4 + header_length])
    try:
        if kind == SerializeType.JSON:
            h = header_codec.decode_json(header_bytes)
            serialize_type = SerializeType.JSON
        elif kind == SerializeType.ROCKETMQ:
            h = header_codec.decode_binary(header_bytes)
            serialize_type = SerializeType.ROCKETMQ
        else:
            raise FrameError(f"unknown serialize type {kind}", kind="serialize_type")
    except (RecursionError, MemoryError, ValueError, TypeError, OverflowError) as exc:
        raise FrameError(
            f"header could not be decoded ({type(exc).__name__})", kind="header_unreadable"
        ) from None
    return RemotingCommand(
        code=h.code,
        opaque=h.opaque,
        flag=h.flag,
        language=h.language,
        version=h.version,
        remark=h.remark,
        ext_fields=h.ext_fields,
        body=bytes(frame[4 + header_length :]) if body is None else body,
        serialize_type=serialize_type,
    )


class FrameDecoder:
    """Bytes in, commands out. A :class:`FrameError` means the stream is beyond repair."""

    __slots__ = ("_broken", "_buffer", "_part_header", "_parts", "_parts_bytes", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._broken = False
        self._parts: list[bytes | memoryview] = []
        """A large frame in arrival: its reads kept as they came (after the length prefix;
        views of the reads where they hold more), joined once when whole, instead of a growing
        buffer copied at every resize and again when cut out."""
        self._parts_bytes = 0
        self._part_header = 0
        """The large frame's length (what ``_parts`` must add up to)."""

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete (a large frame's length prefix, read and
        not kept, counts too: the figure is what the peer sent of the frame)."""
        return len(self._buffer) + (self._parts_bytes + 4 if self._parts else 0)

    @property
    def allocated(self) -> int:
        """Memory the incomplete frame occupies (a growing buffer over-allocates its length; a
        gathered frame's first part may be a view that keeps its whole read alive)."""
        held = (self._buffer.__alloc__() if self._buffer else 0) + self._parts_bytes
        if self._parts:
            first = self._parts[0]
            if type(first) is memoryview:
                held += len(first.obj) - len(first)  # type: ignore[arg-type]
        return held

    @property
    def pending_header_length(self) -> int | None:
        """The header length the incomplete frame announces, once its first 8 bytes are here:
        a reader can refuse an oversized header before the rest of the frame arrives."""
        if self._parts:
            return int(_LENGTH.unpack_from(self._parts[0], 0)[0] & _HEADER_LENGTH_MASK)
        if len(self._buffer) < 8:
            return None
        return int(_LENGTH.unpack_from(self._buffer, 4)[0] & _HEADER_LENGTH_MASK)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        try:
            return [decode_frame(frame) for frame in self.feed_raw(data)]
        except FrameError:
            self.fail()
            raise

    def fail(self) -> None:
        """Mark the stream broken (a frame failed to decode); later feeds refuse at once."""
        self._broken = True
        self._buffer = bytearray()
        self._parts = []
        self._parts_bytes = 0

    @staticmethod
    def _joined(parts: list[bytes | memoryview]) -> bytes | SplitFrame:
        """A large frame's reads as one frame: header and body apart, unless the header
        reaches past the first read (then whole)."""
        first = memoryview(parts[0])
        head_end = 4 + (_LENGTH.unpack_from(first, 0)[0] & _HEADER_LENGTH_MASK)
        if head_end > len(first):
            return b"".join(parts)
        parts[0] = first[head_end:]
        return SplitFrame(bytes(first[:head_end]), b"".join(parts))

    def feed_raw(self, data: bytes) -> list[bytes | SplitFrame]:
        """Whole frames without their length prefix, undecoded (see :func:`decode_frame`); a
        large one may come as a :class:`SplitFrame`."""
        if self._broken:
            raise FrameError("the stream already failed to decode", kind="stream_failed")
        if self._parts:
            need = self._part_header - self._parts_bytes
            if len(data) < need:
                self._parts.append(data)
                self._parts_bytes += len(data)
                return []
            self._parts.append(memoryview(data)[:need] if len(data) > need else data)
            frame = self._joined(self._parts)
            self._parts = []
            self._parts_bytes = 0
            rest = self.feed_raw(data[need:]) if len(data) > need else []
            return [frame, *rest]
        buf = self._buffer
        if not buf and len(data) >= 4:
            # The common case: one whole frame in one read, nothing held over.
            length = _LENGTH.unpack_from(data, 0)[0]
            if 4 <= length <= self.max_frame_size and len(data) == 4 + length:
                return [data[4:]]
        # With nothing held over, frames are cut from the read itself (one copy each); only
        # what is left of it waits in the buffer. Else the read joins the buffer first.
        src: bytes | bytearray = data if not buf and type(data) is bytes else buf
        if src is buf:
            buf += data
        size = len(src)
        unpack_from = _LENGTH.unpack_from
        max_frame_size = self.max_frame_size
        out: list[bytes | SplitFrame] = []
        pos = 0
        try:
            while size - pos >= 4:
                length = unpack_from(src, pos)[0]
                if length > max_frame_size:
                    raise FrameError(
                        f"frame length {length} exceeds the limit of {max_frame_size} bytes",
                        kind="frame_too_large",
                    )
                if length < 4:
                    raise FrameError(
                        f"frame length {length} is too short to hold a header",
                        kind="frame_length",
                    )
                end = pos + 4 + length
                if end > size:
                    if length >= _LARGE_FRAME and size - pos >= 8:
                        # Keep the reads of a large frame apart and join them once (above).
                        # A view of the read itself; a copy of the buffer, which is reused.
                        first = (
                            memoryview(data)[pos + 4 :] if src is data else bytes(src[pos + 4 :])
                        )
                        self._parts = [first]
                        self._parts_bytes = len(first)
                        self._part_header = length
                        pos = size
                    break
                out.append(src[pos + 4 : end] if src is data else bytes(src[pos + 4 : end]))
                pos = end
        except FrameError:
            self.fail()
            raise
        if src is buf:
            if pos:
                del buf[:pos]
        elif pos < size:
            buf += memoryview(data)[pos:]
        return out
