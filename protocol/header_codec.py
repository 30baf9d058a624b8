"""The two serializations of a remoting header: upstream's JSON and its ROCKETMQ binary form.

Both map to the same fields; :mod:`protocol.frame` picks one by the serialize-type byte of the
frame. Decoding is strict about types (a header is validated once, here) and every failure is a
:class:`FrameError`, because a frame whose header cannot be read cannot be answered either.
"""

from __future__ import annotations

import json
import struct
from typing import Any, NamedTuple

from protocol.codes import LanguageCode, ResponseCode
from protocol.errors import FrameError
from protocol.peer_text import unencodable

_LANGUAGE_BY_NAME = {lang.name: lang for lang in LanguageCode}
_BINARY_FIXED = struct.Struct(">hBhii")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT32_MAX = 2**31 - 1


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
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def decode_json(data: bytes) -> Header:
    try:
        doc = json.loads(data)
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
    # From here the frame is sound JSON: a request with a usable opaque is answered with the
    # error instead of losing its connection.
    opaque = doc.get("opaque")
    flag = doc.get("flag")
    answer = _int32_or_none(opaque)
    answer_flag = _int32_or_none(flag) or 0

    def bad(remark: str, kind: str = "header_field") -> FrameError:
        return FrameError(
            remark, ResponseCode.INVALID_PARAMETER, kind=kind, opaque=answer, flag=answer_flag
        )

    for name, value in doc.items():
        if name != "extFields" and isinstance(value, dict | list):
            raise bad(f"JSON header field {name} is not a scalar", "header_depth")
    what = unencodable(data, doc)
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
            ext_fields={str(k): _ext_value(v) for k, v in ext.items() if v is not None},
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
