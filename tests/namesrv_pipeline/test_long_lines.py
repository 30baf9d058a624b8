"""Finding the lines Hadoop's line reader skips under a maximum, in a few reads per file."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from namesrv_pipeline.spark.long_lines import FIRST_PROBE_BYTES, local_reader, oversized_lines


def skipped_by_line_reader(data: bytes, limit: int) -> list[int]:
    """What Hadoop's line reader does, written out: LF, CR and CRLF end a line, a line is
    skipped when its bytes with their terminator reach ``limit``, and a UTF-8 byte order mark
    before the first line is dropped first."""
    found, start = [], 0
    ends = [m.end() for m in re.finditer(rb"\r\n|\r|\n", data)]
    if not ends or ends[-1] < len(data):
        ends.append(len(data))
    for end in ends:
        consumed = end - start
        if start == 0 and data.startswith(b"\xef\xbb\xbf"):
            consumed -= 3
        if consumed >= limit:
            found.append(start)
        start = end
    return found


class Counted:
    def __init__(self, data: bytes) -> None:
        self.data, self.reads, self.bytes = data, 0, 0

    def __call__(self, offset: int, length: int) -> bytes:
        self.reads += 1
        chunk = self.data[offset : offset + length]
        self.bytes += len(chunk)
        return chunk


LINE = st.tuples(
    st.integers(0, 80) | st.sampled_from([14, 15, 16, 17, 300, 5_000]),
    st.sampled_from([b"\n", b"\r\n", b"\r", b""]),
    st.sampled_from([b"x", b"{", b"\0"]),
)


@settings(max_examples=400, deadline=None)
@given(
    lines=st.lists(LINE, max_size=30),
    bom=st.booleans(),
    limit=st.sampled_from([3, 4, 16, 17, 64, 1024]),
)
def test_it_finds_exactly_the_lines_the_reader_skips(lines, bom, limit):
    data = (b"\xef\xbb\xbf" if bom else b"") + b"".join(fill * n + end for n, end, fill in lines)
    assert oversized_lines(Counted(data), len(data), limit) == skipped_by_line_reader(data, limit)


def test_a_file_of_short_lines_costs_one_small_read_per_half_limit():
    data = b'{"topic":"t","version":1}\n' * 400_000  # 10.4 MB
    limit = 1 << 20
    read = Counted(data)
    assert oversized_lines(read, len(data), limit) == []
    assert read.reads <= len(data) // (limit // 2 - 1) + 1
    assert read.bytes <= read.reads * FIRST_PROBE_BYTES


def test_a_crash_left_zero_bytes_after_the_last_record(tmp_path):
    path = tmp_path / "journal-1-000001.jsonl"
    records = b'{"ts_ms":1,"event":"route_changed"}\n' * 1000
    path.write_bytes(records + b"\0" * (3 << 20))
    read, size, close = local_reader(str(path))
    try:
        assert oversized_lines(read, size, 1 << 20) == [len(records)]
    finally:
        close()
