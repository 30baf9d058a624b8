"""The two serializations of a remoting header: upstream's JSON and its ROCKETMQ binary form.

Both map to the same fields; :mod:`protocol.frame` picks one by the serialize-type byte of the
frame. Decoding is strict about types (a header is validated once, here) and every failure is a
:class:`FrameError`, because a frame whose header cannot be read cannot be answered either.
"""

from __future__ import annotations

import json
import json.encoder
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from protocol.codes import LanguageCode, ResponseCode
from protocol.errors import FrameError
from protocol.peer_text import unencodable

_LANGUAGE_BY_NAME = {lang.name: lang for lang in LanguageCode}
_BINARY_FIXED = struct.Struct(">hBhii")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_ONLY_TEXT = frozenset((str,))
"""The types of extFields values kept as they are (JSON object keys are always strings)."""


class Header(NamedTuple):
    code: int
    language: LanguageCode
    version: int
    opaque: int
    flag: int
    remark: str | None
    ext_fields: dict[str, str]


# -- JSON -------------------------------------------------------------------------------------


def encode_json(h: Header) -> bytes:
    doc: dict[str, Any] = {
        "code": h.code,
        "extFields": h.ext_fields,
        "flag": h.flag,
        "language": h.language.name,
        "opaque": h.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": h.version,
    }
    if h.remark is not None:
        doc["remark"] = h.remark
    return _json_text(doc).encode()


def _compact_encoder() -> Callable[[dict[str, Any]], str]:
    """JSON text without spaces or ASCII escapes, from the interpreter's C encoder where it
    has one (a header is encoded for every answer; ``json.dumps`` costs twice as much)."""
    make = getattr(json.encoder, "c_make_encoder", None)  # absent from the type stubs
    if make is None:
        return json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    # No markers (the header holds no containers that could refer to themselves), no default,
    # no indent, keys unsorted, none skipped, NaN allowed: what the arguments above ask for.
    chunks = make(None, None, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    return lambda doc: "".join(chunks(doc, 0))


_json_text = _compact_encoder()
_decode_text = json.JSONDecoder().decode


def decode_json(data: bytes) -> Header:
    try:
        text: str | None = data.decode()
    except UnicodeDecodeError:
        text = None  # read past a lone surrogate to answer the request, refused below
    try:
        doc = _decode_text(text if text is not None else data.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(f"JSON header is not valid JSON: {exc}", kind="header_json") from None
    except RecursionError:
        raise FrameError(
            "JSON header nests deeper than the parser allows", kind="header_depth"
        ) from None
    if not isinstance(doc, dict):
        raise FrameError(
            f"JSON header is a {type(doc).__name__}, not an object", kind="header_json"
        )
    if text is not None and "\\u" not in text:
        header = _usual_header(doc)
        if header is not None:
            return header
    return _checked_header(doc, text)


def _usual_header(doc: dict[str, Any]) -> Header | None:
    """The header of a document written as upstream writes one (int32 numbers, a language
    name, extFields an object of strings and the only one, no list), else None. Exactly what
    :func:`_checked_header` returns for such a document, at a fraction of its cost."""
    get = doc.get
    code, version, opaque, flag = get("code"), get("version", 0), get("opaque", 0), get("flag", 0)
    ext, language, remark = get("extFields"), get("language"), get("remark")
    kinds = list(map(type, doc.values()))
    if (
        type(code) is int
        and type(version) is int
        and type(opaque) is int
        and type(flag) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and type(language) is str
        and (remark is None or type(remark) is str)
        and type(ext) is dict
        and kinds.count(dict) == 1
        and list not in kinds
        and _ONLY_TEXT.issuperset(map(type, ext.values()))
    ):
        language_code = _LANGUAGE_BY_NAME.get(language, LanguageCode.OTHER)
        return Header(code, language_code, version, opaque, flag, remark, ext)
    return None


def _checked_header(doc: dict[str, Any], text: str | None) -> Header:
    """The header of any JSON object, each field checked: the first fault is refused with a
    remark naming it, answered when the opaque could be read. ``text``: the document's JSON
    text, None when it encoded a lone surrogate (refused)."""
    # The frame is sound JSON: a request with a usable opaque is answered with the error
    # instead of losing its connection.
    answer = _int32_or_none(doc.get("opaque"))
    answer_flag = _int32_or_none(doc.get("flag")) or 0

    def bad(remark: str, kind: str = "header_field") -> FrameError:
        return FrameError(
            remark, ResponseCode.INVALID_PARAMETER, kind=kind, opaque=answer, flag=answer_flag
        )

    for name, value in doc.items():
        if name != "extFields" and isinstance(value, dict | list):
            raise bad(f"JSON header field {name} is not a scalar", "header_depth")
    if text is None:
        what: str | None = "a string holds an encoded lone UTF-16 surrogate, which is not UTF-8"
    else:
        what = unencodable(text, doc)
    if what is not None:
        raise bad(f"JSON header: {what}", "header_text")
    ext = doc.get("extFields") or {}
    if not isinstance(ext, dict):
        raise bad("JSON header field extFields is not an object")
    remark = doc.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise bad("JSON header field remark is not a string")
    try:
        return Header(
            code=_json_int(doc, "code", required=True),
            language=_json_language(doc.get("language")),
            version=_json_int(doc, "version"),
            opaque=_json_int(doc, "opaque"),
            flag=_json_int(doc, "flag"),
            remark=remark,
            ext_fields=ext
            if _ONLY_TEXT.issuperset(map(type, ext.values()))
            else {k: _ext_value(v) for k, v in ext.items() if v is not None},
        )
    except FrameError as exc:
        kind = "header_depth" if "not a scalar" in exc.remark else "header_field"
        raise bad(exc.remark, kind) from None


def _int32_or_none(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value <= _INT32_MAX:
        return value
    return None


def _json_int(doc: dict[str, Any], name: str, *, required: bool = False) -> int:
    value = doc.get(name)
    if value is None:
        if required:
            raise FrameError(f"JSON header lacks the {name} field")
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise FrameError(f"JSON header field {name} is not an integer: {_short(value)}")
    if not -(2**31) <= value <= _INT32_MAX:
        raise FrameError(f"JSON header field {name} is out of the int32 range: {_short(value)}")
    return value


def _short(value: Any, limit: int = 40) -> str:
    """A value for a remark, cut short: a peer's padding must not travel back in full."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _json_language(value: Any) -> LanguageCode:
    if value is None:
        return LanguageCode.OTHER
    if isinstance(value, str):
        return _LANGUAGE_BY_NAME.get(value, LanguageCode.OTHER)
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return LanguageCode(value)
        except ValueError:
            return LanguageCode.OTHER
    raise FrameError(f"JSON header field language is not a name: {_short(value)}")


def _ext_value(value: Any) -> str:
    """Upstream sends every custom header field as a string; accept scalars from lax clients."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise FrameError(f"JSON header extFields value is not a scalar: {_short(value)}")


# -- ROCKETMQ binary ---------------------------------------------------------------------------


def encode_binary(h: Header) -> bytes:
    parts = [_BINARY_FIXED.pack(h.code, int(h.language), h.version, h.opaque, h.flag)]
    if h.remark:
        remark = h.remark.encode()
        parts += [_INT32.pack(len(remark)), remark]
    else:
        parts.append(_INT32.pack(0))
    ext_parts: list[bytes] = []
    for key, value in h.ext_fields.items():
        k, v = key.encode(), value.encode()
        ext_parts += [_INT16.pack(len(k)), k, _INT32.pack(len(v)), v]
    ext = b"".join(ext_parts)
    parts += [_INT32.pack(len(ext)), ext]
    return b"".join(parts)


def decode_binary(data: bytes) -> Header:
    reader = _Reader(data)
    try:
        code, language, version, opaque, flag = reader.unpack(_BINARY_FIXED, "fixed fields")
    except FrameError as exc:
        raise FrameError(exc.remark, kind="header_binary") from None
    try:
        remark, ext = _binary_rest(reader)
    except FrameError as exc:  # the fixed fields were read: the request can be answered
        raise FrameError(
            exc.remark,
            ResponseCode.INVALID_PARAMETER,
            kind="header_binary",
            opaque=opaque,
            flag=flag,
        ) from None
    try:
        lang = LanguageCode(language)
    except ValueError:
        lang = LanguageCode.OTHER
    return Header(code, lang, version, opaque, flag, remark, ext)


def _binary_rest(reader: _Reader) -> tuple[str | None, dict[str, str]]:
    remark_len = reader.int32("remark length")
    remark = reader.text(remark_len, "remark") if remark_len > 0 else None
    ext_len = reader.int32("extFields length")
    ext_end = reader.pos + ext_len
    if ext_end > len(reader.data):
        raise FrameError(f"binary header extFields length {ext_len} runs past the header")
    ext: dict[str, str] = {}
    while reader.pos < ext_end:
        key_len = reader.unpack(_INT16, "extFields key length")[0]
        key = reader.text(key_len, "extFields key")
        value_len = reader.int32("extFields value length")
        ext[key] = reader.text(value_len, "extFields value")
    if reader.pos != ext_end:
        raise FrameError("binary header extFields overrun their declared length")
    return remark, ext


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: struct.Struct, what: str) -> tuple[Any, ...]:
        end = self.pos + fmt.size
        if end > len(self.data):
            raise FrameError(f"binary header truncated in {what}")
        values = fmt.unpack_from(self.data, self.pos)
        self.pos = end
        return values

    def int32(self, what: str) -> int:
        value: int = self.unpack(_INT32, what)[0]
        if value < 0:
            raise FrameError(f"binary header {what} is negative: {value}")
        return value

    def text(self, length: int, what: str) -> str:
        if length < 0:
            raise FrameError(f"binary header {what} length is negative: {length}")
        end = self.pos + length
        if end > len(self.data):
            raise FrameError(f"binary header truncated in {what}")
        try:
            value = self.data[self.pos : end].decode()
        except UnicodeDecodeError:
            raise FrameError(f"binary header {what} is not UTF-8") from None
        self.pos = end
        return value
