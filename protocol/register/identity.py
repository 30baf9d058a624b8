"""What makes a REGISTER_BROKER body the same as another: its CRC-32, checked against the one
the broker declares, and its digest (form, length, CRC-32 and a keyed hash), with a plain
body's cut around its data version (:mod:`protocol.register.version_cut`).

Both are taken in C. A large body's are taken in steps a few milliseconds long, a generator
yielding between them, so the name server reads other requests meanwhile.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Generator

from protocol.codes import ResponseCode
from protocol.errors import ProtocolError
from protocol.register import version_cut

HASH_SLICE_BYTES = 4 << 20
"""CRC-32 of a large register body per step: a few milliseconds."""
_DIGEST = struct.Struct(">cQIq")
"""(form, length, CRC-32, hash) of a register body: what makes two bodies the same."""


def crc32_steps(data: bytes, declared: int, sliced: bool) -> Generator[None, None, int]:
    """The body's CRC-32, a slice per step when ``sliced``, checked against ``declared`` (the
    masked form upstream sends; 0: none declared); SYSTEM_ERROR when they differ."""
    crc = 0
    view = memoryview(data)
    for offset in range(0, len(data), HASH_SLICE_BYTES):  # in C, a few ms per slice
        crc = zlib.crc32(view[offset : offset + HASH_SLICE_BYTES], crc)
        if sliced:
            yield
    if declared != 0 and crc & 0x7FFFFFFF != declared:
        raise ProtocolError("crc32 not match", ResponseCode.SYSTEM_ERROR)
    return crc


def digest_steps(
    data: bytes, compressed: bool, crc: int, sliced: bool
) -> Generator[None, None, tuple[bytes, version_cut.VersionCut | None]]:
    """The body's digest and, for a plain body, its cut around the data version.

    A body is told apart by length, CRC-32 and the interpreter's keyed SipHash of its bytes
    (in C), which a broker cannot steer into a collision without the process's secret key; a
    plain body that has a data version in fastjson's form is keyed by the hashes of the bytes
    around the version and the version (the same bytes around it say the same table).
    """
    if sliced:
        hash(data)  # kept by the bytes: the cut then hashes its tail alone
        yield  # hashing 16 MB is a few milliseconds of its own
    cut = None if compressed else version_cut.cut(data)
    whole = hash(data) if cut is None else hash(cut)
    digest = _DIGEST.pack(b"c" if compressed else b"p", len(data), crc, whole)
    if sliced:
        yield  # and the tail's hash, a few more
    return digest, cut
