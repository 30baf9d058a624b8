"""What makes a REGISTER_BROKER body the same as another.

A body: its CRC-32, checked against the one the broker declares, and its digest (form, length,
CRC-32 and a hash), both taken in C; a large body's in steps a few milliseconds long, a
generator yielding between them, so the name server reads other requests meanwhile.

Which hash depends on whom a digest is compared with. A small body's digest and cut are only
ever compared with the last register of the same broker address, whose sender it is: a body
built to collide fools the name server about nothing but the sender's own table, which it could
state anyway. Those are hashed with XXH3, seeded per process, many times faster than SipHash and
read in place, so accidental collisions are as unlikely as 64 bits make them. A large body's
digest also finds a table read before from another broker's body (the chunk cache), where a
built collision would read one broker's bytes as another's table: those are hashed with the
interpreter's SipHash under the process's secret key, a keyed pseudo-random function, a slice
per step (the slices' hashes then hashed again under the key).

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
import secrets
import struct
from collections.abc import Generator
from typing import NamedTuple

from isal import isal_zlib
from xxhash import xxh3_64_intdigest

from protocol.codes import ResponseCode
from protocol.errors import ProtocolError
from protocol.register.steps import whole
from protocol.route_model import DataVersion

HASH_SLICE_BYTES = 4 << 20
"""CRC-32 of a large register body per step: a few milliseconds."""
_DIGEST = struct.Struct(">cQIQ")
"""(form, length, CRC-32, hash) of a register body: what makes two bodies the same."""
_SEED = secrets.randbits(64)
"""This process's seed of the fast hash: drawn at start, never sent."""
_U64 = (1 << 64) - 1
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


def _hash(data: bytes | memoryview, shared: bool) -> int:
    """A 64-bit hash of ``data``: keyed SipHash when ``shared`` (compared across brokers), else
    seeded XXH3 (see the module's rule)."""
    return whole(_hash_steps(data, shared))


def _hash_steps(data: bytes | memoryview, shared: bool) -> Generator[None, None, int]:
    """:func:`_hash`, yielding between slices of ``HASH_SLICE_BYTES`` where the hash is keyed
    SipHash (the interpreter's, which takes its bytes whole): each slice is hashed apart, then
    the slices' hashes, all under the process's key. XXH3 takes no step (a few ms for 16 MB)."""
    if not shared:
        return xxh3_64_intdigest(data, _SEED)
    view = memoryview(data)
    if len(view) <= HASH_SLICE_BYTES:
        return hash(bytes(view)) & _U64  # a copy for this call: a view would hash all it views
    parts = []
    for start in range(0, len(view), HASH_SLICE_BYTES):
        if start:
            yield
        parts.append(hash(bytes(view[start : start + HASH_SLICE_BYTES])) & _U64)
    return hash(struct.pack(f">{len(parts)}Q", *parts)) & _U64


class TableKey(NamedTuple):
    """Identity of a body but for its data version's value: where the value starts, how many
    bytes follow it, and the hash of the bytes on either side."""

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

    A body is told apart by length, CRC-32 and a hash of its bytes (in C); a plain body that
    has a data version in fastjson's form is keyed by the hashes of the bytes around the version
    and the version (the same bytes around it say the same table). A ``sliced`` (large) body's
    hashes are keyed SipHash, as its digest is compared across brokers (see the module's rule).
    """
    found = None if compressed else (yield from cut_steps(data, shared=sliced))
    if found is None:
        if sliced:
            yield
        whole = yield from _hash_steps(data, sliced)
    else:
        whole = hash(found) & _U64
    return _DIGEST.pack(b"c" if compressed else b"p", len(data), crc, whole), found


def cut(body: bytes, *, shared: bool = False) -> VersionCut | None:
    """``body`` cut around the first ``"dataVersion"`` key's value, or None when there is none
    in fastjson's form. Costs about one hash of the body's bytes, keyed SipHash when ``shared``
    (see :func:`_hash`)."""
    return whole(cut_steps(body, shared=shared))


def cut_steps(body: bytes, *, shared: bool) -> Generator[None, None, VersionCut | None]:
    """:func:`cut`, a step per slice of keyed hashing (see :func:`_hash_steps`)."""
    at = body.find(_KEY)
    if at < 0:
        return None
    found = _VALUE.match(body, at + len(_KEY))
    if found is None:
        return None
    start, end = found.span(1)
    counter, state, timestamp = found.group(2, 3, 4)
    view = memoryview(body)
    head = yield from _hash_steps(view[:start], shared)
    if shared:
        yield
    tail = yield from _hash_steps(view[end:], shared)
    key = TableKey(start, len(body) - end, head, tail)
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
    return whole(certify_steps(body, found, read_version))


def certify_steps(
    body: bytes, found: VersionCut, read_version: DataVersion
) -> Generator[None, None, bool]:
    """:func:`certify`, yielding between slices of ``HASH_SLICE_BYTES`` (two scans in C, a
    few milliseconds each): a body of one slice takes no step."""
    # A body without the key reads as the zero version: a zero is never taken on trust.
    if found.version != read_version or read_version == _ZERO:
        return False
    keys = 0
    reach = len(_KEY) - 1  # a key starting in a slice is counted in it, wherever it ends
    for start in range(0, len(body), HASH_SLICE_BYTES):
        if start:
            yield
        end = start + HASH_SLICE_BYTES
        if body.find(b"\\", start, end) >= 0:
            return False
        # After the no-backslash check: no escaped spelling either. The key cannot overlap
        # itself, so each occurrence is counted once.
        keys += body.count(_KEY, start, end + reach)
        if keys > 1:
            return False
    return keys == 1
