"""Text as RocketMQ peers write it: JSON in upstream's fastjson form, the fields of a decoded
body, and the strings a peer sent.

Upstream serializes maps with ``Long`` keys with the keys *unquoted*
(``"brokerAddrs":{0:"10.0.0.1:10911"}``), which standard JSON parsers refuse. Old clients
expect exactly that form, and a peer may send it to us, so :func:`dumps` can write it and
:func:`loads` accepts it next to standard JSON. Everything else is plain JSON: no NaN, no
single quotes, no comments. A decoded body's fields are read by the ``*_field`` readers, each
failure a :class:`BodyError` naming the field; a part of a body is bounded before it is parsed
(:func:`check_part_size`).

A peer's string must be encodable as UTF-8, or every answer, journal record and log line that
later carries it fails to encode: JSON lets a peer spell a lone UTF-16 surrogate (``\\ud800``),
which decodes to a Python ``str`` but encodes to nothing. Such text is refused where it is
decoded, before anything is applied (:func:`unencodable`).

A peer's string shown to a person (a log line, the admin's terminal) must not carry control
characters: a ``\\n`` would start a forged log line, an ``ESC`` would drive the terminal.
:func:`printable` escapes them and cuts the string to a length, in one place for every caller.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sized
from itertools import accumulate
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, TypeVar

from protocol.errors import BodyError, LimitError

MAX_DEPTH = 64
"""Deepest object/array nesting :func:`loads` accepts; no RocketMQ body nests past 6."""
_STRINGS = re.compile(r'("(?:[^"\\]++|\\.)*+"?)', re.DOTALL)
"""A string literal, to its closing quote (or, unterminated, as far as it goes): possessive and
matching wherever a quote is, so one left-to-right pass examines each character once."""
_BARE_KEYS = re.compile(r"(?<=[{,])[ \t\r\n]*+(-?[0-9]++)(?=[ \t\r\n]*+:)")
"""A bare integer key, in text whose string literals are cut out: digits after ``{`` or ``,``
and before ``:`` (whitespace around). Possessive: a try examines the run of whitespace and
digits after one ``{`` or ``,``, and such runs do not overlap."""
_HOLE = "\x00"
"""Stands for a string literal while keys are found outside them: no valid JSON has it
outside a string."""
_STEP = {ord("{"): 1, ord("["): 1, ord("}"): -1, ord("]"): -1}
_QUOTED = re.compile(rb'"[^"]*"')
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'"[]{}')
"""Every byte but quotes and brackets: what ``bytes.translate`` deletes (in C)."""


def dumps(
    obj: Any,
    *,
    unquoted_int_keys: bool = False,
    sort_keys: bool = False,
    ascii_only: bool = False,
) -> bytes:
    """Compact UTF-8 JSON of dicts, lists, str, int, float, bool and None.

    ``unquoted_int_keys`` writes int dict keys bare, as fastjson does for ``Long`` keys;
    otherwise they are quoted like any key. ``sort_keys`` mirrors fastjson's default
    alphabetical bean fields and ``MapSortField`` (int keys sort numerically).
    ``ascii_only`` escapes non-ASCII as fastjson's ``BrowserCompatible`` does.
    """
    parts: list[str] = []
    quote = encode_basestring_ascii if ascii_only else encode_basestring
    _write(obj, parts, quote, unquoted_int_keys, sort_keys)
    return "".join(parts).encode("utf-8")


def _key_order(key: Any) -> tuple[bool, Any]:
    return (isinstance(key, str), key)


def _write(obj: Any, parts: list[str], quote: Any, bare: bool, sort_keys: bool) -> None:
    if isinstance(obj, str):
        parts.append(quote(obj))
    elif obj is None:
        parts.append("null")
    elif obj is True:
        parts.append("true")
    elif obj is False:
        parts.append("false")
    elif isinstance(obj, int):
        parts.append(str(int(obj)))  # int() so an IntEnum writes its number
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"JSON has no representation for {obj!r}")
        parts.append(repr(obj))
    elif isinstance(obj, dict):
        items = sorted(obj.items(), key=lambda kv: _key_order(kv[0])) if sort_keys else obj.items()
        parts.append("{")
        for i, (key, value) in enumerate(items):
            if i:
                parts.append(",")
            if isinstance(key, str):
                parts.append(quote(key))
            elif isinstance(key, int) and not isinstance(key, bool):
                parts.append(str(int(key)) if bare else f'"{int(key)}"')
            else:
                raise TypeError(f"JSON object keys must be str or int, not {type(key).__name__}")
            parts.append(":")
            _write(value, parts, quote, bare, sort_keys)
        parts.append("}")
    elif isinstance(obj, list | tuple):
        parts.append("[")
        for i, value in enumerate(obj):
            if i:
                parts.append(",")
            _write(value, parts, quote, bare, sort_keys)
        parts.append("]")
    else:
        raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def loads(data: bytes | str) -> Any:
    """Parse standard JSON or fastjson's bare-integer-key form; :class:`BodyError` otherwise.

    Bare integer keys come back as strings (``{0:"a"}`` gives ``{"0": "a"}``), as fastjson
    reading into a ``Map<String, …>`` would; typed decoders convert them.
    """
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyError(f"JSON body is not valid UTF-8 (byte {exc.start})") from exc
    else:
        text = data
    _check_depth(text)
    try:
        doc = _parse(text)
    except ValueError as first:
        rewritten = text if not _at_bare_key(first, text) else quote_bare_keys(text)[0]
        if rewritten is text:
            raise BodyError(f"invalid JSON body: {_describe(first)}") from first
        try:
            doc = _parse(rewritten)
        except ValueError as exc:
            raise BodyError(f"invalid JSON body: {_describe(exc)}") from exc
    except RecursionError as exc:  # unreachable after _check_depth; kept as a backstop
        raise BodyError(f"JSON body nests deeper than {MAX_DEPTH} levels") from exc
    refuse_unencodable(text, doc)
    return doc


def refuse_unencodable(data: bytes | str, doc: Any) -> None:
    """:class:`BodyError` when a string of ``doc`` (decoded from ``data``) cannot be encoded
    as UTF-8: such a name would fail every answer and record that carries it later."""
    what = unencodable(data, doc)
    if what is not None:
        raise BodyError(f"invalid JSON body: {what}")


def _parse(text: str) -> Any:
    return json.loads(text, parse_constant=refuse_constant)


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def quote_bare_keys(text: str) -> tuple[str, int]:
    """``text`` with fastjson's bare integer keys quoted (``{0:"a"}`` becomes ``{"0":"a"}``,
    whitespace before such a key dropped), and the number of characters its passes examined;
    ``text`` itself when it has no bare key (or holds a NUL outside its strings: not JSON).

    A fixed number of passes, each in C and each linear: split the string literals out;
    join what lies between them with a hole character; split that at the bare keys; join the
    pieces with quotes (the pieces alternate text and key, so each key gets a quote either
    side); put the literals back into the holes. The patterns are possessive and anchored by a
    quote or by ``{``/``,``, so no pass examines a character more than twice, whatever the
    quotes, escapes, backslash runs or digit runs: the count returned is what tests hold to a
    linear bound.
    """
    parts = _STRINGS.split(text)
    between = parts[0::2]
    joined = _HOLE.join(between)
    examined = 2 * len(text)  # the literals split out (each character once, a quote twice)
    if joined.count(_HOLE) != len(between) - 1:
        return text, examined + len(joined)
    pieces = _BARE_KEYS.split(joined)
    examined += 3 * len(joined)  # the hole count, and runs after ``{``/``,`` tried twice
    if len(pieces) == 1:
        return text, examined
    quoted = '"'.join(pieces).split(_HOLE)
    parts[0::2] = quoted
    rewritten = "".join(parts)
    return rewritten, examined + 2 * len(rewritten)


def _at_bare_key(exc: ValueError, text: str) -> bool:
    """Whether the parse failed where an object key was due and digits stand: fastjson's form
    (anything else fails the same way after the rewrite, which is then not tried)."""
    return (
        isinstance(exc, json.JSONDecodeError)
        and exc.msg.startswith("Expecting property name")
        and text[exc.pos : exc.pos + 1] in _KEY_STARTS
    )


_KEY_STARTS = frozenset("-0123456789")


def _describe(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc)


def _check_depth(text: str) -> None:
    """Refuse deep nesting before parsing, so hostile input costs no recursion.

    Escaped backslashes and quotes are cut first, so what is left of a string literal is a
    quote, text without quotes, a quote; then everything but quotes and brackets goes (in C),
    the literals go, and the brackets left are counted.
    """
    if text.count("{") + text.count("[") <= MAX_DEPTH:
        return
    raw = text.encode("utf-8", "surrogatepass")
    skeleton = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = _QUOTED.sub(b"", skeleton)
    unterminated = brackets.find(b'"')  # a string never closed holds the rest
    if unterminated >= 0:
        brackets = brackets[:unterminated]
    if len(brackets) <= MAX_DEPTH:
        return
    depth = max(accumulate(map(_STEP.__getitem__, brackets)), default=0)
    if depth > MAX_DEPTH:
        raise BodyError(f"JSON body nests deeper than {MAX_DEPTH} levels")


DECIMAL = re.compile(r"[+-]?[0-9]{1,19}")


def as_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BodyError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def or_empty(value: Any) -> Any:
    """A missing or null optional object reads as ``{}``; any other value is checked after."""
    return {} if value is None else value


def as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyError(f"{what} must be a JSON array, got {type(value).__name__}")
    return value


def int_field(doc: dict[str, Any], key: str, what: str, default: int = 0) -> int:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and DECIMAL.fullmatch(value):
            return int(value)
        raise BodyError(f"{what}.{key} must be an integer, got {value!r}")
    return value


def str_field(doc: dict[str, Any], key: str, what: str, default: str | None = None) -> str | None:
    value = doc.get(key, default)
    if value is None or isinstance(value, str):
        return value
    raise BodyError(f"{what}.{key} must be a string, got {value!r}")


def bool_field(doc: dict[str, Any], key: str, what: str) -> bool:
    value = doc.get(key, False)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise BodyError(f"{what}.{key} must be true or false, got {value!r}")


def load_object(body: bytes, what: str) -> dict[str, Any]:
    if not body:
        raise BodyError(f"{what} body is empty")
    return as_object(loads(body), what)


MAX_PART_BYTES = 1 << 20
"""A part of a body that is parsed whole (a register body's filter-server list, each of its
static-topic mapping infos) may not be longer: its length bounds the time it takes."""
_SizedT = TypeVar("_SizedT", bound=Sized)


def check_part_size(
    part: _SizedT, what: str, limit: int = MAX_PART_BYTES, name: str | None = None
) -> _SizedT:
    """``part``, when it is at most ``limit`` bytes long; else :class:`LimitError` (its bound
    named ``name``, by default after ``what``)."""
    if len(part) > limit:
        bound = name if name is not None else f"{what}_bytes"
        raise LimitError(f"{what} is {len(part)} bytes, longer than {limit}", bound)
    return part


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_TEXT = re.compile(r"\\u[dD][89a-fA-F]")
"""A JSON escape of a UTF-16 surrogate: only a text holding one can decode to an
unencodable string (strict UTF-8 decoding refuses encoded surrogates)."""
DEFAULT_SHOWN_CHARS = 200
"""A peer string shown in a log line keeps this many characters; the rest is counted."""
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""C0 and C1 controls, DEL, the Unicode line and paragraph separators, the bidirectional
controls that reorder what a reader sees, and surrogates (which no log stream can encode)."""
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def has_surrogate_escape(data: bytes | str) -> bool:
    """Whether the JSON text ``data`` spells a surrogate: only then can a string decoded from
    it be unencodable."""
    if isinstance(data, str):
        return "\\u" in data and _SURROGATE_ESCAPE_TEXT.search(data) is not None
    return b"\\u" in data and _SURROGATE_ESCAPE.search(data) is not None


def unencodable(data: bytes | str, doc: Any) -> str | None:
    """What in ``doc`` (decoded from the JSON ``data``) cannot be encoded as UTF-8, or None.

    Costs one search of ``data`` in C; only a text holding a surrogate escape is encoded again
    to find out, so the usual text pays nothing more."""
    if not has_surrogate_escape(data):
        return None
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"a string holds a lone UTF-16 surrogate (\\u{ord(exc.object[exc.start]):04x}), "
            "which cannot be encoded as UTF-8"
        )
    except (TypeError, ValueError, RecursionError):
        return None
    return None


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable_lines(text: str) -> str:
    """``text`` with every control character escaped but its line breaks: for output whose
    lines this side composed, its peer strings already passed through :func:`printable`."""
    return "\n".join(_UNPRINTABLE.sub(_escape, line) for line in text.split("\n"))


def json_printable(text: str) -> str:
    """JSON text with the control characters JSON leaves raw (C1, DEL, separators,
    bidirectional controls) written as ``\\uXXXX`` escapes: the same JSON, safe on a terminal."""
    return "\n".join(
        _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", line) for line in text.split("\n")
    )


def printable(text: Any, limit: int | None = DEFAULT_SHOWN_CHARS) -> str:
    """``text`` as one safe line: control characters escaped (``\\n``, ``\\x1b``, ``\\u2028``),
    cut to ``limit`` characters (None: whole) with the number cut said."""
    if not isinstance(text, str):
        text = str(text)
    cut = 0
    if limit is not None and len(text) > limit:
        cut = len(text) - limit
        text = text[:limit]
    shown = _UNPRINTABLE.sub(_escape, text)
    return shown if not cut else f"{shown}...(+{cut} chars)"
