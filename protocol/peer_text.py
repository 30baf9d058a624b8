"""Strings a peer sent: which may enter at all, and how they are shown.

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
import re
from typing import Any

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
    pattern = _SURROGATE_ESCAPE if not isinstance(data, str) else _SURROGATE_ESCAPE_TEXT
    return pattern.search(data) is not None  # type: ignore[arg-type]


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


def is_encodable(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
