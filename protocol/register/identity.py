"""What makes a REGISTER_BROKER body the same as another.

A body: its CRC-32, checked against the one the broker declares, and its digest (form, length,
CRC-32 and a keyed hash), both taken in C; a large body's in steps a few milliseconds long, a
generator yielding between them, so the name server reads other requests meanwhile.

A plain body split around its data version, so a body that differs from the broker's last one
only in the data version is known for what it is without reading its table. A broker's data
version moves while its topic table stays as it was: a controller-mode role change bumps
``stateVersion``, a broker counts its version up on settings that leave the table alone. Read
as upstream reads it, such a register parses every topic config again to find that nothing
changed. Here a body is cut into the bytes before the data version's value, the value, and the
bytes after it; two bodies with the same bytes around the value hold the same document but for
the version.

The cut is trusted only where it cannot be fooled, checked once on a body read in full
(:func:`certify`): the body has no backslash (so every ``"`` delimits a string and the one
``"dataVersion"`` is the key of that name, not a string's content or an escaped spelling of
it), the key occurs once, and its value, in fastjson's form of a flat object of integers, is the
data version the full read found. A body whose bytes around the value equal those of a
certified body is that body with another value in the same place: valid JSON of the same shape
with no backslash and one such key, so it is certified as well. A zero version is never
certified: it is also what a body without the key reads as.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Generator
from typing import NamedTuple

from isal import isal_zlib

from protocol.codes import ResponseCode
from protocol.errors import ProtocolError
from protocol.route_model import DataVersion

HASH_SLICE_BYTES = 4 << 20
"""CRC-32 of a large register body per step: a few milliseconds."""
_DIGEST = struct.Struct(">cQIq")
"""(form, length, CRC-32, hash) of a register body: what makes two bodies the same."""
_KEY = b'"dataVersion"'
_NUMBER = rb"(-?(?:0|[1-9][0-9]{0,17}))"
"""A JSON integer that fits a signed 64-bit long (at most 18 digits)."""
_VALUE = re.compile(
    rb"[ \t\n\r]*:[ \t\n\r]*"
    rb'(\{"counter":' + _NUMBER + rb',(?:"stateVersion":' + _NUMBER + rb",)?"
    rb'"timestamp":' + _NUMBER + rb"\})"
)
"""fastjson's ``DataVersion``: counter, (5.x) stateVersion, timestamp, in name order."""
_ZERO = DataVersion()


class TableKey(NamedTuple):
    """Identity of a body but for its data version's value: where the value starts, how many
    bytes follow it, and the interpreter's keyed hash of the bytes on either side (SipHash with
    the process's secret key, which a broker cannot steer into a collision)."""

    start: int
    after: int
    head: int
    tail: int


class VersionCut(NamedTuple):
    key: TableKey
    version: DataVersion
    """The data version the value spells."""


def crc32_steps(data: bytes, declared: int, sliced: bool) -> Generator[None, None, int]:
    """The body's CRC-32, a slice per step when ``sliced``, checked against ``declared`` (the
    masked form upstream sends; 0: none declared); SYSTEM_ERROR when they differ. ISA-L's
    CRC-32 is zlib's, computed several times faster (folding with carry-less multiplies)."""
    crc = 0
    view = memoryview(data)
    for offset in range(0, len(data), HASH_SLICE_BYTES):  # in C, a few ms per slice
        crc = isal_zlib.crc32(view[offset : offset + HASH_SLICE_BYTES], crc)
        if sliced:
            yield
    if declared != 0 and crc & 0x7FFFFFFF != declared:
        raise ProtocolError("crc32 not match", ResponseCode.SYSTEM_ERROR)
    return crc


def digest_steps(
    data: bytes, compressed: bool, crc: int, sliced: bool
) -> Generator[None, None, tuple[bytes, VersionCut | None]]:
    """The body's digest and, for a plain body, its cut around the data version.

    A body is told apart by length, CRC-32 and the interpreter's keyed SipHash of its bytes
    (in C), which a broker cannot steer into a collision without the process's secret key; a
    plain body that has a data version in fastjson's form is keyed by the hashes of the bytes
    around the version and the version (the same bytes around it say the same table).
    """
    found = None if compressed else cut(data)
    if sliced and found is not None:
        yield  # the cut hashed a copy of nearly all of it: a few milliseconds for 16 MB
    whole = hash(data) if found is None else hash(found)
    digest = _DIGEST.pack(b"c" if compressed else b"p", len(data), crc, whole)
    if sliced:
        yield  # the body's own hash, or the cut's, a few more
    return digest, found


def cut(body: bytes) -> VersionCut | None:
    """``body`` cut around the first ``"dataVersion"`` key's value, or None when there is none
    in fastjson's form. Costs about one hash of the body's bytes."""
    at = body.find(_KEY)
    if at < 0:
        return None
    found = _VALUE.match(body, at + len(_KEY))
    if found is None:
        return None
    start, end = found.span(1)
    counter, state, timestamp = found.group(2, 3, 4)
    # The tail is hashed as a copy: a memoryview's hash would first hash the whole body it
    # views (to know the body hashable), a second pass of SipHash where the copy is a memcpy.
    # The copy lives for this call only, and one register is cut at a time.
    key = TableKey(start, len(body) - end, hash(body[:start]), hash(body[end:]))
    version = DataVersion(
        state_version=int(state) if state is not None else 0,
        timestamp=int(timestamp),
        counter=int(counter),
    )
    return VersionCut(key, version)


def certify(body: bytes, found: VersionCut, read_version: DataVersion) -> bool:
    """Whether ``found`` (``cut(body)``) is the data version of ``body`` as read in full, which
    read gave ``read_version``: then any body with the same :class:`TableKey` is this one with
    only its data version changed."""
    return (
        found.version == read_version
        # A body without the key reads as the zero version: a zero is never taken on trust.
        and read_version != _ZERO
        and body.find(b"\\") < 0
        and body.count(_KEY) == 1  # after the no-backslash check: no escaped spelling either
    )
