from __future__ import annotations

import errno
import json
import logging
from pathlib import Path
from typing import BinaryIO

import pytest
from support.journal_files import journal_files

from namesrv.ops import journal as journal_mod
from namesrv.ops.events import RouteChanged, RouteSuppressed
from namesrv.ops.journal import EventJournal, NullJournal, file_name


class Clock:
    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now


def make(directory: Path, clock: Clock | None = None, **kwargs: int) -> EventJournal:
    kwargs.setdefault("max_file_bytes", 1 << 20)
    kwargs.setdefault("max_files", 0)
    return EventJournal(directory, clock_ms=clock or Clock(), **kwargs)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_records_are_compact_json_lines_with_timestamp_and_event(tmp_path: Path) -> None:
    clock = Clock()
    j = make(tmp_path, clock)
    j.record(
        "route_changed", topic="a", version=3, kind="UPDATED", causes=["register"], notify=True
    )
    clock.now += 5
    j.record("degradation", degraded=True, cpu_percent=97.5, memory_percent=40.0)
    j.close()
    (path,) = journal_files(tmp_path)
    assert path.name == file_name(1_700_000_000_000, 1) == "journal-1700000000000-000001.jsonl"
    raw = path.read_text(encoding="utf-8").splitlines()
    assert raw[0] == (
        '{"ts_ms":1700000000000,"event":"route_changed","topic":"a","version":3,'
        '"kind":"UPDATED","causes":["register"],"notify":true}'
    )
    assert lines(path)[1] == {
        "ts_ms": 1_700_000_000_005,
        "event": "degradation",
        "degraded": True,
        "cpu_percent": 97.5,
        "memory_percent": 40.0,
    }


def test_nothing_is_created_until_something_is_written(tmp_path: Path) -> None:
    target = tmp_path / "journal"
    j = make(target)
    j.flush()
    j.close()
    assert not target.exists()


def test_values_json_cannot_encode_are_written_as_text(tmp_path: Path) -> None:
    j = make(tmp_path)
    j.record("subscribe", conn=("10.0.0.1", 5000), topics={"a"}, path=tmp_path)
    j.close()
    (entry,) = lines(journal_files(tmp_path)[0])
    assert entry["conn"] == ["10.0.0.1", 5000]
    assert entry["topics"] == "{'a'}"
    assert entry["path"] == str(tmp_path)


def test_reserved_field_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reserved"):
        make(tmp_path).record("x", ts_ms=1)


def test_records_are_buffered_until_flush(tmp_path: Path) -> None:
    j = make(tmp_path)
    j.record("a")
    assert journal_files(tmp_path) == []
    j.flush()
    assert len(lines(journal_files(tmp_path)[0])) == 1


def test_rotation_keeps_every_file_under_the_limit_and_never_splits_a_line(
    tmp_path: Path,
) -> None:
    clock = Clock()
    j = make(tmp_path, clock, max_file_bytes=300, buffer_bytes=0)
    for i in range(40):
        clock.now += 1
        j.record("subscribe", conn=f"c{i}", topics=[f"T{i}"])
    j.close()
    written = journal_files(tmp_path)
    assert len(written) > 3
    seen = []
    for path in written:
        assert path.stat().st_size <= 300
        seen.extend(entry["conn"] for entry in lines(path))
    assert seen == [f"c{i}" for i in range(40)]
    assert j.files_opened == len(written)


def test_a_record_larger_than_the_limit_gets_a_file_of_its_own(tmp_path: Path) -> None:
    j = make(tmp_path, max_file_bytes=100)
    j.record("small")
    j.record("big", topic_list=["x" * 50] * 4)
    j.record("small")
    j.close()
    assert [len(lines(path)) for path in journal_files(tmp_path)] == [1, 1, 1]


def test_retention_keeps_the_newest_files_and_logs_deletions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / file_name(1_600_000_000_000, 7)).write_text("{}\n")  # an earlier run's file
    (tmp_path / "unrelated.txt").write_text("keep me")
    clock = Clock()
    j = make(tmp_path, clock, max_file_bytes=60, max_files=2, buffer_bytes=0)
    caplog.set_level(logging.INFO, logger="namesrv.ops.journal")
    for i in range(6):
        clock.now += 1
        j.record("tick", n=i)
    j.close()
    kept = journal_files(tmp_path)
    assert len(kept) == 2
    assert [entry["n"] for path in kept for entry in lines(path)] == [4, 5]
    assert (tmp_path / "unrelated.txt").exists()
    assert j.files_deleted == 5
    deleted = [r for r in caplog.records if "deleted" in r.getMessage()]
    assert len(deleted) == 5
    assert any("1600000000000" in r.getMessage() for r in deleted)


def test_max_files_zero_keeps_every_file(tmp_path: Path) -> None:
    j = make(tmp_path, max_file_bytes=40, max_files=0, buffer_bytes=0)
    for i in range(10):
        j.record("tick", n=i)
    j.close()
    assert len(journal_files(tmp_path)) == 10
    assert j.files_deleted == 0


def test_unwritable_directory_is_counted_not_raised_and_retried_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the directory should be")
    j = make(blocker / "journal", buffer_bytes=0)
    with caplog.at_level(logging.ERROR, logger="namesrv.ops.journal"):
        j.record("a")
        j.record("b")
    assert (j.write_errors, j.dropped_records) == (2, 2)
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1, "once per streak"
    blocker.unlink()
    j.record("c")
    j.close()
    (path,) = journal_files(blocker / "journal")
    assert [entry["event"] for entry in lines(path)] == ["c"]
    assert j.write_errors == 2


def test_a_failed_write_is_cut_back_so_the_file_stays_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = make(tmp_path)
    j.record("ok", n=1)
    j.flush()
    real_write_all = journal_mod._write_all

    def disk_full(handle: BinaryIO, data: bytes) -> None:
        handle.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_mod, "_write_all", disk_full)
    j.record("lost", n=2)
    j.record("lost", n=3)
    j.flush()
    assert (j.write_errors, j.dropped_records) == (1, 2)
    monkeypatch.setattr(journal_mod, "_write_all", real_write_all)
    j.record("ok", n=4)
    j.close()
    (path,) = journal_files(tmp_path)
    assert [entry["n"] for entry in lines(path)] == [1, 4]


def test_records_after_close_are_dropped_and_counted(tmp_path: Path) -> None:
    j = make(tmp_path)
    j.close()
    j.record("late")
    j.close()
    assert j.dropped_records == 1
    assert journal_files(tmp_path) == []


def test_null_journal_accepts_everything() -> None:
    j = NullJournal()
    j.record("anything", x=1)
    j.route_changed(RouteChanged("a", 1, "CREATED", ["register"], True))
    j.route_suppressed(RouteSuppressed("a", 1, ["register"]))
    j.flush()
    j.close()
    assert (j.write_errors, j.dropped_records) == (0, 0)


def test_notification_sent_fields_summarise_a_tick() -> None:
    topics = {"b", "a", *(f"T{i:03d}" for i in range(150))}
    fields = journal_mod.notification_sent_fields(4, topics, frame_bytes=1234, broker_entries=1)
    assert fields["connections"] == fields["frames"] == 4
    assert fields["broker_entries"] == 1
    assert fields["topics"] == 152
    assert fields["bytes"] == 1234
    assert fields["topic_list"][:3] == ["T000", "T001", "T002"]
    assert len(fields["topic_list"]) == journal_mod.TOPIC_LIST_LIMIT


def test_retention_by_total_bytes_keeps_the_directory_under_the_bound(tmp_path: Path) -> None:
    clock = Clock()
    j = make(tmp_path, clock, max_file_bytes=1_000, max_total_bytes=3_000, buffer_bytes=0)
    for i in range(500):  # about 30 kB of records: ten times the bound
        clock.now += 1
        j.record("route_changed", topic=f"t{i}", version=i)
        on_disk = sum(p.stat().st_size for p in journal_files(tmp_path))
        assert on_disk <= 3_000
    j.close()
    assert j.files_deleted > 0
    kept = journal_files(tmp_path)
    assert lines(kept[-1])[-1]["topic"] == "t499"  # the newest records are the ones kept


def test_a_flood_is_cut_at_the_rate_and_summarized(tmp_path: Path) -> None:
    clock = Clock(start=1_700_000_000_000)
    j = make(tmp_path, clock, max_records_per_second=10, buffer_bytes=0)
    for i in range(1_000):  # a thousand connections skipped in one second
        j.record("slow_subscriber_skipped", conn=i, pending_topics=1)
    for i in range(5):
        j.record("subscribe", conn=i, topics=["a"])
    clock.now += 1_000
    j.flush()
    j.record("connection_closed", conn=1, released_topics=1)
    j.close()
    records = lines(journal_files(tmp_path)[0])
    assert [r["event"] for r in records].count("slow_subscriber_skipped") == 10
    summary = next(r for r in records if r["event"] == "journal_suppressed")
    assert summary["dropped"] == 995
    assert summary["events"] == {"slow_subscriber_skipped": 990, "subscribe": 5}
    assert summary["since_ms"] == 1_700_000_000_000
    assert records[-1]["event"] == "connection_closed"
    assert j.suppressed_records == 995


def test_the_flood_cut_never_drops_route_changes_or_the_ticks_own_records(
    tmp_path: Path,
) -> None:
    """A broker restart changes thousands of routes in one tick while clients flood the
    per-connection records: every change and every tick record is kept, the rest is cut."""
    clock = Clock(start=1_700_000_000_000)
    j = make(tmp_path, clock, max_records_per_second=10, max_topics_per_record=100)
    for i in range(50):
        j.record("slow_subscriber_skipped", conn=i, pending_topics=1)
    for i in range(5_000):
        j.route_changed(route_change(f"t{i:04d}", 2, mutated_at_ms=clock.now - 40))
    j.record("notification_sent", connections=3, frames=3, topics=5_000, bytes=1)
    j.record("degradation", degraded=True)
    j.record("backlog_drained", frames=3, duration_ms=9)
    j.flush()
    clock.now += 1_000
    j.close()
    records = [r for path in journal_files(tmp_path) for r in lines(path)]
    batches = [r for r in records if r["event"] == "route_changes"]
    assert len(batches) == 50
    assert [t for r in batches for t in r["topics"]] == [f"t{i:04d}" for i in range(5_000)]
    assert {v for r in batches for v in r["versions"]} == {2}
    assert {w for r in batches for w in r["waited_ms"]} == {40}
    events = [r["event"] for r in records]
    for tick_event in ("notification_sent", "degradation", "backlog_drained"):
        assert events.count(tick_event) == 1
    assert events.count("slow_subscriber_skipped") == 10
    (summary,) = [r for r in records if r["event"] == "journal_suppressed"]
    assert summary["events"] == {"slow_subscriber_skipped": 40}
    assert j.suppressed_records == 40


def route_change(
    topic: str,
    version: int,
    kind: str = "UPDATED",
    causes: tuple[str, ...] = ("wipe_write_perm",),
    notify: bool = True,
    mutated_at_ms: int | None = None,
) -> RouteChanged:
    """A settled change as the change detector reports it."""
    return RouteChanged(topic, version, kind, list(causes), notify, mutated_at_ms)


def test_route_changes_of_a_tick_are_one_compact_record_per_kind_and_causes(
    tmp_path: Path,
) -> None:
    clock = Clock()
    t0 = clock.now
    j = make(tmp_path, clock)
    j.route_changed(route_change("a", 4, mutated_at_ms=t0 - 92))
    j.route_changed(route_change("b", 1, kind="CREATED", causes=("register",), mutated_at_ms=t0))
    j.route_changed(route_change("c", 7, mutated_at_ms=t0 - 15))
    j.route_changed(route_change("q", 3, causes=("broker_startup",), notify=False))
    j.route_suppressed(RouteSuppressed("q", 3, ["broker_startup"]))
    assert journal_files(tmp_path) == []  # written at the tick's flush
    clock.now += 3
    j.flush()
    (path,) = journal_files(tmp_path)
    raw = path.read_text(encoding="utf-8").splitlines()
    assert raw[0] == (
        '{"ts_ms":1700000000000,"event":"route_changes","kind":"UPDATED",'
        '"causes":["wipe_write_perm"],"notify":true,"topics":["a","c"],"versions":[4,7],'
        '"waited_ms":[92,15]}'
    )
    assert lines(path)[1:] == [
        {
            "ts_ms": t0,
            "event": "route_changes",
            "kind": "CREATED",
            "causes": ["register"],
            "notify": True,
            "topics": ["b"],
            "versions": [1],
            "waited_ms": [0],
        },
        {
            "ts_ms": t0,
            "event": "route_changes",
            "kind": "UPDATED",
            "causes": ["broker_startup"],
            "notify": False,
            "rules": ["broker_startup"],
            "topics": ["q"],
            "versions": [3],
        },
    ]


def test_a_change_detected_later_opens_a_record_of_its_own_time(tmp_path: Path) -> None:
    """A lookup settles a topic between ticks: its record carries its own detection time."""
    clock = Clock()
    j = make(tmp_path, clock)
    j.route_changed(route_change("a", 1))
    clock.now += 40
    j.route_changed(route_change("b", 1))
    j.close()
    records = lines(journal_files(tmp_path)[0])
    assert [(r["ts_ms"] - 1_700_000_000_000, r["topics"]) for r in records] == [
        (0, ["a"]),
        (40, ["b"]),
    ]


def test_a_suppressed_record_stands_alone_when_no_change_record_holds_it(
    tmp_path: Path,
) -> None:
    j = make(tmp_path)
    j.route_suppressed(RouteSuppressed("q", 3, ["expiry"]))
    j.close()
    [record] = lines(journal_files(tmp_path)[0])
    assert (record["event"], record["topic"], record["rules"]) == ("suppressed", "q", ["expiry"])


def test_route_changes_after_close_are_dropped_and_counted(tmp_path: Path) -> None:
    j = make(tmp_path)
    j.close()
    j.route_changed(route_change("a", 1))
    assert j.dropped_records == 1
    assert journal_files(tmp_path) == []
