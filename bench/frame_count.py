"""Frame counting by length prefix alone, for the bare baselines (no imports of ours)."""

from __future__ import annotations

import struct


def count_frames(buf: bytes) -> tuple[int, bytes]:
    """Whole frames at the front of ``buf`` (by length prefix only) and the bytes left over.

    What the bare baselines spend per request: no decoding at all.
    """
    frames = offset = 0
    while len(buf) - offset >= 4:
        length = struct.unpack_from(">I", buf, offset)[0]
        if len(buf) - offset < 4 + length:
            break
        offset += 4 + length
        frames += 1
    return frames, buf[offset:]
