"""Telemetry with and without ``news`` (docs/telemetry.md): the pipeline takes the field from
files whose client wrote it and works it out for the others, with the same figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.pipeline_records import changed, fetch, journal_file, write_lines

from client_push.routes.telemetry import JsonLinesTelemetry, RefetchRecord
from namesrv_pipeline.spark.aggregations import summarize
from namesrv_pipeline.spark.inputs import (
    HEAD_BYTES,
    JournalSource,
    _carries_news,
    read_journal,
    read_telemetry,
)

JOURNAL = [
    changed(10_000, "T", 1, kind="CREATED"),
    changed(20_000, "T", 2),
    changed(30_000, "Q", 1, notify=False),
    changed(900_000, "T", 1, kind="CREATED"),  # the name server restarted
]
CLIENT_A = [
    fetch("T", 1, "first", 10_500),
    fetch("T", 1, "poll", 15_000),
    fetch("T", 2, "notify", 20_040, notified=20_000),
    fetch("T", 2, "poll", 50_000),
    fetch("Q", 0, "first", 25_000),
    fetch("Q", 1, "poll", 45_000),
    fetch("T", 1, "epoch", 900_100, notified=900_000),
]
CLIENT_B = [
    fetch("T", 1, "first", 12_000),
    fetch("T", 2, "notify", 19_600, notified=20_000),
    fetch("T", 3, "notify", 20_100, notified=20_000),
]


def written_by_client(path: Path, records: list[dict[str, Any]]) -> Path:
    """The file the route client's telemetry writer makes of these records."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sink = JsonLinesTelemetry(str(path))
    for rec in records:
        sink.record(RefetchRecord(**rec))
    sink.close()
    return path


def figures(spark, journal: Path, telemetry: Path) -> tuple[dict[str, Any], list[Any]]:
    t = read_telemetry(spark, [str(telemetry)])
    s, table = summarize(read_journal(spark, [JournalSource(str(journal))]), t)
    doc = s.to_json()
    # clients are named by their files, which differ between the layouts compared
    doc["charts"]["top_clients"] = [c[1:] for c in doc["charts"]["top_clients"]]
    rows = sorted(tuple(r) for r in table.changes.drop("namesrv").collect())
    return doc, rows


def test_new_old_and_mixed_telemetry_give_the_same_figures(spark, tmp_path):
    journal_file(tmp_path / "j", JOURNAL)
    write_lines(tmp_path / "old" / "client-a.jsonl", CLIENT_A)
    write_lines(tmp_path / "old" / "client-b.jsonl", CLIENT_B)
    written_by_client(tmp_path / "new" / "client-a.jsonl", CLIENT_A)
    written_by_client(tmp_path / "new" / "client-b.jsonl", CLIENT_B)
    written_by_client(tmp_path / "mixed" / "client-a.jsonl", CLIENT_A)
    write_lines(tmp_path / "mixed" / "client-b.jsonl", CLIENT_B)
    assert [json.loads(line)["news"] for line in (tmp_path / "new/client-a.jsonl").open()] == [
        False,
        False,
        True,
        False,
        False,
        True,
        True,
    ]
    old = figures(spark, tmp_path / "j", tmp_path / "old")
    assert old[0]["learned_changes"] == 4 and old[0]["unmatched_fetches"] == 1
    assert figures(spark, tmp_path / "j", tmp_path / "new") == old
    assert figures(spark, tmp_path / "j", tmp_path / "mixed") == old


def test_a_marked_file_is_taken_at_its_word_and_a_record_without_the_field_is_invalid(
    spark, tmp_path
):
    journal_file(tmp_path / "j", [changed(10_000, "T", 1), changed(20_000, "T", 2)])
    marked = [
        dict(fetch("T", 1, "first", 10_100), news=False),
        # Differs from the record before, but the client says it taught nothing: the field
        # is read, not worked out again.
        dict(fetch("T", 2, "notify", 20_050, notified=20_000), news=False),
        fetch("T", 2, "poll", 30_000),  # no field in a file whose client writes it
        dict(fetch("T", 2, "poll", 40_000), news=False),
    ]
    write_lines(tmp_path / "t" / "c.jsonl", marked)
    s, _ = summarize(
        read_journal(spark, [JournalSource(str(tmp_path / "j"))]),
        read_telemetry(spark, [str(tmp_path / "t")]),
    )
    assert s.learned_changes == 0
    assert s.telemetry is not None and (s.telemetry.lines, s.telemetry.invalid) == (4, 1)

    # Its last record without the field (an older client appended): worked out from the
    # records, all of them usable.
    write_lines(tmp_path / "t" / "c.jsonl", [*marked[:3]])
    s, _ = summarize(
        read_journal(spark, [JournalSource(str(tmp_path / "j"))]),
        read_telemetry(spark, [str(tmp_path / "t")]),
    )
    assert s.learned_changes == 1
    assert s.telemetry is not None and s.telemetry.invalid == 0


def test_the_first_and_last_lines_decide_through_either_file_system_api(spark, tmp_path):
    line = json.dumps(dict(fetch("T", 1, "first", 1), news=False))
    bare = json.dumps(fetch("T", 1, "first", 1))
    cases = {
        "empty": ("", True),
        "one": (line + "\n", True),
        "one-unterminated": (line, True),
        "blank-lines-after": (line + "\n" + line + "\n\n", True),
        "bare-last": (line + "\n" + bare + "\n", False),
        "bare-first": (bare + "\n" + line + "\n", False),
        "cut-last": (line + "\n" + line[:20], False),
        "long": (line + "\n" + (line + "\n") * (2 * HEAD_BYTES // len(line)), True),
        "long-first": ('{"x":"' + "y" * HEAD_BYTES + '"}\n' + line + "\n", False),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(text)
        # file: URIs are read here; other paths through Hadoop's file system API
        assert _carries_news(spark, path.as_uri()) is expected, name
        assert _carries_news(spark, str(path)) is expected, name
