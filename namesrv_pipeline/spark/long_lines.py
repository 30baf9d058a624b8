"""Lines too long to be a record, found before Spark reads a file.

Spark reads JSON Lines through Hadoop's line reader, which holds a whole line in memory before
the JSON parser sees it: one line of gigabytes (a file of zero bytes left by a crash, a
client's file overwritten by something else) takes the JVM's heap down with it, and with it the
whole job. Told a maximum (``HADOOP_MAX_LINE``), the reader stops keeping a line's bytes at
that length and skips the line, but silently. So the job finds those lines itself, on the
driver, and counts them: the reader skips exactly the lines whose bytes, terminator included,
reach the maximum, and a line that long has a run of at least ``limit - 2`` bytes without a
line terminator, which covers at least one whole aligned block of half that size. Only one
small read per block is needed where lines are short, so a healthy file costs a few reads
whatever its size.
"""

from __future__ import annotations

import os
from collections.abc import Callable

HADOOP_MAX_LINE = "mapreduce.input.linerecordreader.line.maxlength"

PROBE_BYTES = 64 * 1024
FIRST_PROBE_BYTES = 4 * 1024
_BOM = b"\xef\xbb\xbf"

Reader = Callable[[int, int], bytes]
"""``read(offset, length)``: up to ``length`` bytes of the file from ``offset``."""


def _terminator_in(chunk: bytes) -> bool:
    return b"\n" in chunk or b"\r" in chunk


def _has_terminator(read: Reader, start: int, stop: int) -> bool:
    """Whether ``start..stop`` holds a terminator; a few KiB tell where lines are short."""
    at, probe = start, FIRST_PROBE_BYTES
    while at < stop:
        chunk = read(at, min(probe, stop - at))
        if not chunk:
            return False
        if _terminator_in(chunk):
            return True
        at += len(chunk)
        probe = min(2 * probe, PROBE_BYTES)
    return False


def _line_start(read: Reader, before: int) -> int:
    """Where the line holding byte ``before - 1`` starts: after the last terminator before."""
    at = before
    while at > 0:
        begin = max(0, at - PROBE_BYTES)
        chunk = read(begin, at - begin)
        last = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if last >= 0:
            return begin + last + 1
        at = begin
    return 0


def _line_end(read: Reader, start: int, size: int) -> tuple[int, int]:
    """The first terminator at or after ``start`` and its length (0 at the end of the file)."""
    at = start
    while at < size:
        chunk = read(at, min(PROBE_BYTES, size - at) + 1)
        if not chunk:
            break
        # One byte more than looked at, so a CR at the chunk's end shows whether LF follows.
        seen = min(PROBE_BYTES, size - at)
        hits = [i for i in (chunk.find(b"\n", 0, seen), chunk.find(b"\r", 0, seen)) if i >= 0]
        if hits:
            i = min(hits)
            crlf = chunk[i : i + 2] == b"\r\n"
            return at + i, 2 if crlf else 1
        at += seen
    return size, 0


def oversized_lines(read: Reader, size: int, limit: int) -> list[int]:
    """The offsets of the lines Hadoop's line reader skips with ``limit`` as its maximum: those
    whose bytes, terminator (LF, CR or CRLF) included, reach ``limit``; a UTF-8 byte order mark
    before the first line does not count (the reader drops it)."""
    run = max(2, limit - 2)
    half = run // 2
    found: list[int] = []
    block = 0
    while (block + 1) * half <= size:
        if _has_terminator(read, block * half, (block + 1) * half):
            block += 1
            continue
        first = block
        while (block + 1) * half <= size and not _has_terminator(
            read, block * half, (block + 1) * half
        ):
            block += 1
        start = _line_start(read, first * half)
        end, terminator = _line_end(read, block * half, size)
        consumed = end - start + terminator
        if start == 0 and read(0, 3) == _BOM:
            consumed -= len(_BOM)
        if consumed >= limit:
            found.append(start)
        # The line ran up to ``end``: go on from the block after it.
        block = max(block, (end + terminator) // half)
    return found


def local_reader(path: str) -> tuple[Reader, int, Callable[[], None]]:
    """A reader of a local file, its size and how to close it."""
    fd = os.open(path, os.O_RDONLY)
    return (
        (lambda offset, length: os.pread(fd, length, offset)),
        os.fstat(fd).st_size,
        (lambda: os.close(fd)),
    )
