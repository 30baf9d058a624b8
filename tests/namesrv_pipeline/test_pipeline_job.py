"""The pipeline's Spark half on a local session: reading, figures, propagation, outputs."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tomllib
from typing import Any

import pytest
from support.pipeline_records import changed, fetch, journal_file, write_lines

from namesrv.config import from_mapping
from namesrv_pipeline.cli import parse
from namesrv_pipeline.report.summary import MatchWindow
from namesrv_pipeline.spark.aggregations import summarize
from namesrv_pipeline.spark.inputs import InputError, JournalSource, read_journal, read_telemetry
from namesrv_pipeline.spark.job import run

NS = "127.0.0.1:9876"


def analyse(spark, journals, telemetry=None, window=None):
    """The summary and the per-change table."""
    t = read_telemetry(spark, telemetry) if telemetry else None
    s, tables = summarize(read_journal(spark, journals), t, window)
    return s, tables.changes


def test_unusable_lines_are_counted_and_left_out(spark, tmp_path):
    journal_file(
        tmp_path / "j",
        [
            changed(1_000, "A", 1, kind="CREATED"),
            "not json at all",
            '{"ts_ms": "soon", "event": "route_changed"}',  # wrong type
            {"ts_ms": 2_000, "event": "route_changed", "topic": "B"},  # lacks version, kind...
            {"event": "subscribe", "conn": 1, "topics": ["A"]},  # lacks ts_ms
            {"ts_ms": 2_500, "event": "subscribe", "conn": 1, "topics": 7},  # topics not a list
            {"ts_ms": 3_000, "event": "from_a_newer_server", "x": [1]},
            "",
            '{"ts_ms": 4000, "event": "route_changed", "topic": "C", "vers',  # cut short by a crash
        ],
    )
    write_lines(tmp_path / "j" / "other.log", ["not a journal file"])
    write_lines(
        tmp_path / "t.jsonl",
        [fetch("A", 1, "notify", 1_100, 1_000), "{", {"topic": "A", "cause": "poll"}],
    )
    s, _ = analyse(spark, [JournalSource(str(tmp_path / "j"))], [str(tmp_path / "t.jsonl")])
    q = s.journal
    # the empty line is no record; other.log is no journal file
    assert (q.files, q.lines, q.corrupt, q.invalid, q.unknown_events) == (1, 8, 3, 3, 1)
    assert q.used == 1
    assert s.changes == 1 and s.changes_by_kind == {"CREATED": 1}
    assert s.subscribed_topics == 0
    t = s.telemetry
    assert t is not None and (t.lines, t.corrupt, t.invalid, t.used) == (3, 1, 1, 1)


def test_lines_too_long_for_a_record_are_counted_and_never_held_whole(spark, tmp_path):
    """A journal a crash left padded with zero bytes, and a client's file with a huge line in
    it: their records still count, each long line is counted once as too long, and no row
    Spark makes of them holds more than the bound."""
    limit = 4096
    path = journal_file(tmp_path / "j", [changed(1_000, "A", 1, kind="CREATED")])
    with path.open("ab") as fh:
        fh.write(b"\0" * (300 * limit))  # no newline: the rest of a preallocated file
    telemetry = write_lines(
        tmp_path / "t.jsonl",
        [
            {**fetch("A", 1, "notify", 1_100, 1_000), "news": True},
            "[" * (200 * limit),
            {**fetch("A", 1, "poll", 1_200), "news": False},
        ],
    )
    journal = read_journal(spark, [JournalSource(str(tmp_path / "j"))], limit)
    t = read_telemetry(spark, [str(telemetry)], limit)
    s, _ = summarize(journal, t)
    assert (s.journal.oversized, s.journal.used, s.changes) == (1, 1, 1)
    assert s.telemetry is not None
    assert (s.telemetry.oversized, s.telemetry.used) == (1, 2)
    assert s.learned_changes == 1

    from pyspark.sql import functions as F

    from namesrv_pipeline.spark.inputs import CORRUPT, JOURNAL_SCHEMA, _read_json

    raw = _read_json(spark, [str(path)], JOURNAL_SCHEMA, limit)
    longest = raw.select(F.max(F.length(CORRUPT)), F.count("ts_ms")).first()[0]
    assert longest is None or longest <= limit + 3


def test_journal_figures(spark, tmp_path):
    records = [
        changed(1_000, "A", 1, kind="CREATED"),
        changed(1_000, "B", 1, notify=False, kind="CREATED"),
        {
            "ts_ms": 1_000,
            "event": "suppressed",
            "topic": "B",
            "version": 1,
            "rules": ["broker_startup"],
        },
        changed(2_000, "A", 2),
        {
            "ts_ms": 1_000,
            "event": "notification_sent",
            "connections": 4,
            "frames": 4,
            "topics": 1,
            "bytes": 400,
            "topic_list": ["A"],
        },
        {
            "ts_ms": 2_000,
            "event": "notification_sent",
            "connections": 2,
            "frames": 2,
            "topics": 1,
            "bytes": 1_000,
            "topic_list": ["A"],
        },
        {"ts_ms": 500, "event": "subscribe", "conn": 1, "topics": ["A", "B"]},
        {"ts_ms": 600, "event": "subscribe", "conn": 2, "topics": ["A"]},
        # a record that lists its first topics and counts the rest
        {"ts_ms": 650, "event": "subscribe", "conn": 3, "topics": ["C"], "topics_omitted": 4},
        {"ts_ms": 700, "event": "unsubscribe", "conn": 2, "topics": ["A"]},
        {"ts_ms": 800, "event": "connection_closed", "conn": 1, "released_topics": 2},
        {"ts_ms": 900, "event": "slow_subscriber_skipped", "conn": 5, "pending_topics": 3},
        {"ts_ms": 901, "event": "slow_subscriber_skipped", "conn": 5, "pending_topics": 9},
        {"ts_ms": 902, "event": "slow_subscriber_skipped", "conn": 6, "pending_topics": 1},
        {
            "ts_ms": 3_000,
            "event": "degradation",
            "degraded": True,
            "cpu_percent": 97.0,
            "memory_percent": 30.0,
            "pending_connections": 0,
        },
        {
            "ts_ms": 5_000,
            "event": "degradation",
            "degraded": False,
            "cpu_percent": 20.0,
            "memory_percent": 30.0,
            "pending_connections": 6,
        },
        {"ts_ms": 6_000, "event": "backlog_drained", "frames": 6, "duration_ms": 1_000},
        {
            "ts_ms": 6_000,
            "event": "broker_event",
            "kind": "DEPARTED",
            "cause": "unregister",
            "cluster": "c",
            "broker_name": "b",
            "addrs": ["10.0.0.1:10911"],
            "name_gone": True,
            "topics": 3,
            "notify": True,
        },
    ]
    journal_file(tmp_path / "j", records[:8])
    journal_file(tmp_path / "j", records[8:], start=900, seq=2)
    s, table = analyse(spark, [JournalSource(str(tmp_path / "j"))])
    assert (s.first_ts_ms, s.last_ts_ms) == (500, 6_000)
    assert s.journal.files == 2 and s.journal.used == len(records)
    assert (s.changes, s.notified_changes) == (3, 2)
    assert s.changes_by_kind == {"CREATED": 2, "UPDATED": 1}
    assert s.changes_by_cause == {"wipe_write_perm": 3}
    assert s.suppressed_by_rule == {"broker_startup": 1}
    assert s.broker_events == {"DEPARTED unregister": 1}
    assert (s.notification_ticks, s.notification_frames, s.notification_bytes) == (2, 6, 1_400)
    assert (s.frames_per_tick.count, s.frames_per_tick.max) == (2, 4.0)
    assert (s.frame_bytes.p50, s.frame_bytes.max) == (100.0, 500.0)
    assert (s.subscribed_topics, s.unsubscribed_topics, s.connections_closed) == (8, 1, 1)
    assert (s.slow_skips, s.slow_connections) == (3, 2)
    assert [(c.conn, c.skips, c.max_pending_topics) for c in s.slowest] == [(5, 2, 9), (6, 1, 1)]
    [ep] = s.episodes
    assert (ep.degraded_ms, ep.backlog_connections, ep.drain_ms, ep.drain_frames) == (
        2_000,
        6,
        1_000,
        6,
    )
    rows = {(r["topic"], r["version"]): r for r in table.collect()}
    assert set(rows) == {("A", 1), ("B", 1), ("A", 2)}
    assert rows[("B", 1)]["clients"] == 0 and rows[("B", 1)]["notify"] is False


def test_each_client_is_tied_to_the_change_it_learned(spark, tmp_path):
    journal_file(
        tmp_path / "j",
        [
            changed(10_000, "T", 1, kind="CREATED"),
            changed(20_000, "T", 2),
            changed(30_000, "Q", 1, notify=False),
            # the name server restarted: versions start again
            changed(900_000, "T", 1, kind="CREATED"),
        ],
    )
    write_lines(
        tmp_path / "t" / "client-a.jsonl",
        [
            fetch("T", 1, "first", 10_500),  # a first lookup learns no change
            fetch("T", 1, "poll", 15_000),  # ... and polling it again is no news
            fetch("T", 2, "notify", 20_040, notified=20_000),
            fetch("T", 2, "poll", 50_000),  # already held since 20_040
            fetch("Q", 0, "first", 25_000),
            fetch("Q", 1, "poll", 45_000),  # a suppressed change, learned by polling
            fetch("T", 1, "epoch", 900_100, notified=900_000),  # tied to the restart's change
        ],
    )
    write_lines(
        tmp_path / "t" / "client-b.jsonl",
        [
            fetch("T", 1, "first", 12_000),
            fetch("T", 2, "notify", 19_600, notified=20_000),  # client clock 400 ms behind
            fetch("T", 3, "notify", 20_100, notified=20_000),  # no journal change explains it
        ],
    )
    write_lines(
        tmp_path / "t" / "client-c.jsonl",
        [
            fetch("T", 1, "first", 12_500),
            fetch("T", 2, "inline", 20_010, notified=20_000),  # the route came in the frame
        ],
    )
    s, table = analyse(spark, [JournalSource(str(tmp_path / "j"))], [str(tmp_path / "t")])
    assert s.fetches_by_cause == {"first": 4, "poll": 3, "notify": 3, "epoch": 1, "inline": 1}
    assert (s.delivery.count, s.delivery.p50, s.delivery.max) == (5, 40.0, 100.0)
    assert s.learned_changes == 5 and s.unmatched_fetches == 1
    assert s.learned_inline == 1 and s.propagation["inline"].max == 10.0
    assert s.propagation["all"].count == 5
    assert (s.propagation["notify"].count, s.propagation["notify"].max) == (2, 40.0)
    assert s.propagation["notify"].p50 == -400.0
    assert (s.propagation["poll"].count, s.propagation["poll"].max) == (1, 15_000.0)
    assert (s.propagation["epoch"].count, s.propagation["epoch"].max) == (1, 100.0)
    assert (s.propagation_quiet.count, s.propagation_quiet.max) == (1, 15_000.0)
    rows = {(r["topic"], r["version"], r["changed_at_ms"]): r for r in table.collect()}
    assert rows[("T", 2, 20_000)]["clients"] == 3
    assert (
        rows[("T", 2, 20_000)]["first_learned_ms"],
        rows[("T", 2, 20_000)]["last_learned_ms"],
    ) == (-400, 40)
    assert rows[("T", 1, 10_000)]["clients"] == 0
    assert rows[("T", 1, 900_000)]["clients"] == 1

    narrow, _ = analyse(
        spark,
        [JournalSource(str(tmp_path / "j"))],
        [str(tmp_path / "t")],
        MatchWindow(clock_skew_ms=100, max_lag_ms=10_000),
    )
    # 400 ms behind is past a 100 ms skew; 15 s after the change is past a 10 s lag
    assert narrow.learned_changes == 3 and narrow.unmatched_fetches == 3


def test_detection_counts_per_cause_every_line_that_learned_the_change(spark, tmp_path):
    """A change's detection (mutation to tick) counts once per client that learned it, under
    that client's cause; the change table counts each change once over its causes."""
    journal_file(
        tmp_path / "j",
        [
            dict(changed(10_000, "T", 1, kind="CREATED"), mutated_at_ms=9_700),
            dict(changed(20_000, "T", 2), mutated_at_ms=19_950),
        ],
    )
    for name, cause in (("a", "notify"), ("b", "notify"), ("c", "inline")):
        write_lines(
            tmp_path / "t" / f"client-{name}.jsonl",
            [fetch("T", 0, "first", 5_000), fetch("T", 1, cause, 10_020, notified=10_000)]
            + ([fetch("T", 2, "poll", 20_400)] if name != "c" else []),
        )
    s, table = analyse(spark, [JournalSource(str(tmp_path / "j"))], [str(tmp_path / "t")])
    detect = s.propagation_detection
    assert (detect["notify"].count, detect["notify"].p50, detect["notify"].max) == (2, 300, 300)
    assert (detect["inline"].count, detect["inline"].max) == (1, 300)
    assert (detect["poll"].count, detect["poll"].max) == (2, 50)
    assert (detect["all"].count, detect["all"].p50, detect["all"].max) == (5, 300, 300)
    rows = {r["version"]: r for r in table.collect()}
    assert (rows[1]["clients"], rows[1]["first_learned_ms"], rows[1]["last_learned_ms"]) == (
        3,
        20,
        20,
    )
    assert (rows[2]["clients"], rows[2]["first_learned_ms"]) == (2, 400)


class _Colliding:
    """``pyspark.sql.functions`` whose 64-bit hash gives every input the same value."""

    def __getattr__(self, name: str) -> Any:
        from pyspark.sql import functions

        return getattr(functions, name)

    def xxhash64(self, *cols: Any) -> Any:
        from pyspark.sql import functions

        return functions.lit(7).cast("long")


def test_pairs_whose_hashes_collide_are_tied_only_to_their_own_change(spark, tmp_path, monkeypatch):
    """The telemetry meets the journal's changes on a hash of (topic, version); with every
    pair hashing alike, each fetch must still find its own change, and only it."""
    from namesrv_pipeline.spark import aggregations as stats

    journal_file(
        tmp_path / "j",
        [changed(10_000, "T", 1), changed(20_000, "T", 2), changed(30_000, "Q", 1)],
    )
    write_lines(
        tmp_path / "t" / "client-a.jsonl",
        [
            fetch("T", 0, "first", 5_000),  # where the client started from: no news
            fetch("Q", 0, "first", 5_000),
            fetch("T", 1, "notify", 10_010, notified=10_000),
            fetch("T", 2, "notify", 20_020, notified=20_000),
            fetch("Q", 1, "notify", 30_030, notified=30_000),
            fetch("Q", 2, "notify", 30_040, notified=30_000),  # no such change
        ],
    )

    def figures() -> tuple[Any, ...]:
        s, table = analyse(spark, [JournalSource(str(tmp_path / "j"))], [str(tmp_path / "t")])
        rows = sorted(
            (r["topic"], r["version"], r["clients"], r["first_learned_ms"]) for r in table.collect()
        )
        return s.learned_changes, s.unmatched_fetches, s.propagation["all"].max, rows

    expected = (3, 1, 30.0, [("Q", 1, 1, 30), ("T", 1, 1, 10), ("T", 2, 1, 20)])
    assert figures() == expected
    monkeypatch.setattr(stats, "F", _Colliding())
    assert figures() == expected


def test_named_journals_are_tied_only_to_their_own_clients(spark, tmp_path):
    journal_file(tmp_path / "a", [changed(1_000, "T", 5)])
    journal_file(tmp_path / "b", [changed(5_000, "T", 5)])
    write_lines(
        tmp_path / "t.jsonl",
        [fetch("T", 4, "first", 500), fetch("T", 5, "notify", 6_000, notified=5_000)],
    )
    sources = [
        JournalSource(str(tmp_path / "a"), "10.0.0.1:9876"),
        JournalSource(str(tmp_path / "b"), NS),
    ]
    s, _ = analyse(spark, sources, [str(tmp_path / "t.jsonl")])
    assert s.propagation["all"].max == 1_000.0  # from b's change, not a's later-matching one
    unnamed, _ = analyse(spark, [JournalSource(str(tmp_path / "a"))], [str(tmp_path / "t.jsonl")])
    assert unnamed.propagation["all"].max == 5_000.0


def test_missing_inputs_are_refused_and_an_empty_journal_is_not(spark, tmp_path):
    with pytest.raises(InputError, match=r"journal directory .*nowhere does not exist"):
        read_journal(spark, [JournalSource(str(tmp_path / "nowhere"))])
    with pytest.raises(InputError, match=r"telemetry path .*missing\.jsonl does not exist"):
        read_telemetry(spark, [str(tmp_path / "missing.jsonl")])
    write_lines(tmp_path / "a-file", [changed(1, "T", 1)])
    with pytest.raises(InputError, match=r"journal directory .*a-file is not a directory"):
        read_journal(spark, [JournalSource(str(tmp_path / "a-file"))])
    (tmp_path / "empty").mkdir()
    s, table = analyse(spark, [JournalSource(str(tmp_path / "empty"))])
    assert s.journal.lines == 0 and s.changes == 0 and s.episodes == []
    assert table.count() == 0


def test_run_writes_report_summary_tuned_config_and_change_table(spark, tmp_path):
    records = []
    for i in range(30):
        records.append(changed(1_000 * i, "T", i + 1))
    journal_file(tmp_path / "j", records)
    # a 734 ms delivery p99 with a 1 s tick misses the 1.5 s target: the tick is tuned down
    write_lines(
        tmp_path / "t.jsonl",
        [fetch("T", i + 1, "notify", 1_000 * i + 734, notified=1_000 * i) for i in range(30)],
    )
    (tmp_path / "base.toml").write_text('[server]\nlisten = "127.0.0.1:9999"\n')
    args = parse(
        [
            "--journal",
            str(tmp_path / "j"),
            "--telemetry",
            str(tmp_path / "t.jsonl"),
            "--out",
            str(tmp_path / "out"),
            "--config",
            str(tmp_path / "base.toml"),
        ]
    )
    outputs = run(spark, args)
    report = outputs.report.read_text()
    assert "30 changes, 30 of them notified" in report
    assert "| `push.tick_interval_ms` | 1000 | **760** |" in report
    summary = json.loads(outputs.summary.read_text())
    assert summary["summary"]["changes"] == 30
    assert summary["summary"]["delivery"]["p99"] == 734.0
    # only the changed key, with how to apply it: merged into the base config, it loads
    text = outputs.config.read_text()
    keys = tomllib.loads(text)
    assert keys == {"push": {"tick_interval_ms": 760}}
    assert "listen" not in text and "apply: restart:" in text
    base = tomllib.loads((tmp_path / "base.toml").read_text())
    tuned = from_mapping({**base, **keys})
    assert tuned.push.tick_interval_ms == 760 and tuned.server.listen == "127.0.0.1:9999"
    assert "| `push.tick_interval_ms` | 1000 | 760 | restart: merge it" in report
    table = spark.read.parquet(outputs.changes)
    # the first fetch is where the client started from; each later one learned a change
    assert table.count() == 30 and table.where("clients = 1").count() == 29


def test_cli_refuses_bad_config_and_missing_journal_with_exit_2(tmp_path):
    (tmp_path / "bad.toml").write_text("[push]\ntick_interval_ms = 1\n")
    base = [sys.executable, "-m", "namesrv_pipeline", "--out", str(tmp_path / "out")]
    bad = subprocess.run(
        [*base, "--journal", str(tmp_path), "--config", str(tmp_path / "bad.toml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "push.tick_interval_ms must be between 10" in bad.stderr
    negative = subprocess.run(
        [*base, "--journal", str(tmp_path), "--max-lag-ms", "-5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert negative.returncode == 2 and "must not be negative: -5" in negative.stderr
    missing = subprocess.run(
        [*base, "--journal", str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2, missing.stderr
    assert f"journal directory {tmp_path / 'nowhere'} does not exist" in missing.stderr


def test_a_second_run_in_one_session_reads_the_files_afresh(spark, tmp_path):
    args = parse(["--journal", str(tmp_path / "j"), "--out", str(tmp_path / "o")])
    path = journal_file(tmp_path / "j", [changed(1_000, "T", 1)])
    assert "1 changes, 1 of them notified" in run(spark, args).report.read_text()
    write_lines(path, [changed(1_000 * i, "T", i) for i in range(1, 4)])
    assert "3 changes, 3 of them notified" in run(spark, args).report.read_text()


def test_end_to_end_propagation_runs_from_the_mutation_and_splits_into_its_parts(spark, tmp_path):
    """Known delays: change i's route mutated at m_i, detected d_i later, held by the client
    e_i after the mutation; e runs over 1..100 ms in shuffled order, so p50 is 50 and p99 99."""
    rng = random.Random(3)
    e2e = list(range(1, 101))
    rng.shuffle(e2e)
    records, fetches = [], [fetch("T", 0, "first", 500)]
    for i, total in enumerate(e2e):
        mutated = 10_000 + 1_000 * i
        detected = mutated + total // 3  # the wait for the tick
        records.append(dict(changed(detected, "T", i + 1), mutated_at_ms=mutated))
        fetches.append(fetch("T", i + 1, "notify", mutated + total, notified=detected))
    journal_file(tmp_path / "j", records)
    write_lines(tmp_path / "t.jsonl", fetches)
    args = ["--journal", str(tmp_path / "j"), "--telemetry", str(tmp_path / "t.jsonl")]
    outputs = run(spark, parse([*args, "--out", str(tmp_path / "out")]))
    s = json.loads(outputs.summary.read_text())["summary"]
    assert (s["propagation"]["all"]["p50"], s["propagation"]["all"]["p99"]) == (50.0, 99.0)
    detection = sorted(t // 3 for t in e2e)
    after = sorted(t - t // 3 for t in e2e)
    assert s["propagation_detection"]["all"]["p50"] == detection[49]
    assert s["propagation_delivery"]["all"]["p99"] == after[98]
    assert s["detection"]["max"] == 33.0 and s["changes_without_mutation_time"] == 0
    assert (
        "| end to end, every cause (spread refetches included) | 100 | 50 | 90 | 99 | 100 |"
        in outputs.report.read_text()
    )
    page = outputs.html.read_text()
    assert "End-to-end p99 99 ms against the 1,500 ms target: met" in page
    assert "p50 50 ms, p90 90 ms" in page


def test_a_local_session_sizes_its_heap_from_the_machine_or_spark_driver_memory(spark):
    from namesrv_pipeline.spark.session import local_heap_mib

    # the 1 GiB default left a 10 M-event journal's cache on disk
    assert 1024 <= local_heap_mib({}) <= 8192
    assert local_heap_mib({"SPARK_DRIVER_MEMORY": "1536m"}) == 1536
    assert local_heap_mib({"SPARK_DRIVER_MEMORY": "2G"}) == 2048
    assert local_heap_mib({"SPARK_DRIVER_MEMORY": "700"}) == 700
    for bad in ("lots", "0", "512k", "1.5g", "-1g"):
        with pytest.raises(ValueError, match="SPARK_DRIVER_MEMORY"):
            local_heap_mib({"SPARK_DRIVER_MEMORY": bad})
    # The suite's own runs set it (tests/conftest.py): the session was started with it.
    assert spark.sparkContext.getConf().get("spark.driver.memory") == f"{local_heap_mib()}m"


def test_a_second_run_in_one_session_generates_no_new_code(spark, tmp_path):
    """Spark compiles the code it generates once per distinct source; a lambda written in
    Python (a fresh variable name per query) or a cache too small for one run made every run
    compile again, and the JVM JIT-compile it again."""
    suppressed = {"ts_ms": 2_500, "event": "suppressed", "topic": "Q", "version": 1, "rules": ["r"]}
    journal_file(
        tmp_path / "j",
        [dict(changed(1_000, "T", 1), causes=["a", "b"]), changed(2_000, "T", 2), suppressed],
    )
    write_lines(
        tmp_path / "t" / "c.jsonl",
        [fetch("T", 1, "first", 1_100), fetch("T", 2, "notify", 2_050, notified=2_000)],
    )
    paths = ["--journal", str(tmp_path / "j"), "--telemetry", str(tmp_path / "t")]
    args = parse([*paths, "--out", str(tmp_path / "o")])
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    run(spark, args)
    before = compiled.METRIC_COMPILATION_TIME().getCount()
    run(spark, args)
    assert compiled.METRIC_COMPILATION_TIME().getCount() == before


def test_a_local_session_runs_four_even_tasks_per_core(spark):
    import os

    from namesrv_pipeline.spark.session import local_cores

    masters = ("local", "local[1]", "local[3]", "local[3,2]", "local-cluster[2,2,1024]")
    assert [local_cores(m) for m in masters] == [1, 1, 3, 3, 4]
    assert local_cores("local[*]") == len(os.sched_getaffinity(0))
    conf = spark.sparkContext.getConf()
    # the test session is local[2]
    assert conf.get("spark.sql.files.minPartitionNum") == "8"
    assert conf.get("spark.sql.codegen.cache.maxEntries") == "1000"


def test_a_local_session_on_two_cores_collects_its_garbage_for_throughput(spark):
    from namesrv_pipeline.spark.session import usable_cpus

    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    collectors = [b.getName() for b in beans.getGarbageCollectorMXBeans()]
    if usable_cpus() >= 2:
        assert sorted(collectors) == ["PS MarkSweep", "PS Scavenge"]
    else:  # the JVM's own choice on one core
        assert "PS Scavenge" not in collectors


def test_a_collector_named_in_the_environment_is_left_alone():
    from namesrv_pipeline.spark.session import throughput_collector

    assert throughput_collector({}, 2) == "-XX:+UseParallelGC"
    assert throughput_collector({"JAVA_TOOL_OPTIONS": "-Xss2m"}, 4) == "-XX:+UseParallelGC"
    assert throughput_collector({}, 1) is None  # the JVM's serial collector on one core
    # the JVM refuses to start with two collectors
    for name in ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS"):
        assert throughput_collector({name: "-Xmx2g -XX:+UseG1GC"}, 2) is None
    args = "--driver-java-options -XX:+UseZGC pyspark-shell"
    assert throughput_collector({"PYSPARK_SUBMIT_ARGS": args}, 2) is None
