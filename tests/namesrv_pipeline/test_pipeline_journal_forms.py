"""The journal's two forms of route changes: one record per change (older name servers) and
``route_changes`` records listing a tick's changes. The job reads both to the same figures."""

from __future__ import annotations

import json
from itertools import groupby

from support.pipeline_records import fetch, journal_file, write_lines

from namesrv_pipeline.cli import parse
from namesrv_pipeline.spark.aggregations import summarize
from namesrv_pipeline.spark.inputs import JournalSource, read_journal
from namesrv_pipeline.spark.job import run

T0 = 1_700_000_000_000


def changes() -> list[dict]:
    """Ticks of changes (the fields each change's old record held), detected at the tick,
    some of them silent and some without a mutation time."""
    out = []
    for tick in range(12):
        ts = T0 + 200 * tick
        for i in range(7):
            causes = ["broker_startup"] if i == 6 else ["wipe_write_perm"]
            change = {
                "ts_ms": ts,
                "topic": f"T{i}",
                "version": tick + 1,
                "kind": "CREATED" if tick == 0 else "UPDATED",
                "causes": causes,
                "notify": i != 6,
            }
            if tick != 3:
                change["mutated_at_ms"] = ts - 10 * i
            out.append(change)
    return out


def old_form(items: list[dict]) -> list[dict]:
    lines = []
    for c in items:
        lines.append({"event": "route_changed", **c})
        if not c["notify"]:
            rules = ["broker_startup"]
            lines.append(
                {"ts_ms": c["ts_ms"], "event": "suppressed", "topic": c["topic"]}
                | {"version": c["version"], "rules": rules}
            )
    return lines


def new_form(items: list[dict], per_record: int = 4) -> list[dict]:
    def key(c: dict) -> tuple:
        return (c["ts_ms"], c["kind"], c["causes"], c["notify"], "mutated_at_ms" in c)

    lines = []
    for (ts, kind, causes, notify, timed), group in groupby(sorted(items, key=key), key):
        listed = list(group)
        for start in range(0, len(listed), per_record):
            part = listed[start : start + per_record]
            record = {"ts_ms": ts, "event": "route_changes", "kind": kind, "causes": causes}
            record["notify"] = notify
            if not notify:
                record["rules"] = ["broker_startup"]
            record["topics"] = [c["topic"] for c in part]
            record["versions"] = [c["version"] for c in part]
            if timed:
                record["waited_ms"] = [ts - c["mutated_at_ms"] for c in part]
            lines.append(record)
    return lines


def telemetry(items: list[dict]) -> list[dict]:
    return [
        fetch(c["topic"], c["version"], "notify", c["ts_ms"] + 30, notified=c["ts_ms"] + 2)
        for c in items
        if c["notify"]
    ]


def test_both_forms_of_the_same_changes_give_the_same_summary_and_table(spark, tmp_path):
    items = changes()
    journal_file(tmp_path / "old", old_form(items))
    journal_file(tmp_path / "new", new_form(items))
    write_lines(tmp_path / "t" / "c.jsonl", telemetry(items))
    outputs = {}
    for form in ("old", "new"):
        args = ["--journal", str(tmp_path / form), "--telemetry", str(tmp_path / "t")]
        outputs[form] = run(spark, parse([*args, "--out", str(tmp_path / f"o-{form}")]))
    old, new = (json.loads(outputs[f].summary.read_text()) for f in ("old", "new"))
    assert new == old
    s = new["summary"]
    assert s["changes"] == len(items) == 84
    assert s["notified_changes"] == 72
    assert s["suppressed_by_rule"] == {"broker_startup": 12}
    assert s["changes_without_mutation_time"] == 7
    tables = [
        sorted(map(tuple, spark.read.parquet(str(tmp_path / f"o-{f}" / "changes")).collect()))
        for f in ("old", "new")
    ]
    assert tables[0] == tables[1] and len(tables[0]) == 84


def test_a_journal_of_both_forms_reads_every_change_once(spark, tmp_path):
    """A name server upgraded mid-journal: older files hold a record per change, newer ones
    route_changes records."""
    items = changes()
    half = len(items) // 2
    journal_file(tmp_path / "j", old_form(items[:half]), start=T0, seq=1)
    journal_file(tmp_path / "j", new_form(items[half:]), start=T0 + 1_000, seq=2)
    s, _ = summarize(read_journal(spark, [JournalSource(str(tmp_path / "j"))]), None)
    assert s.changes == 84 and s.notified_changes == 72
    assert s.changes_by_cause == {"wipe_write_perm": 72, "broker_startup": 12}
    assert s.journal.invalid == 0 and s.journal.corrupt == 0


def test_a_route_changes_record_whose_lists_disagree_is_invalid_and_left_out(spark, tmp_path):
    good = new_form(changes()[:7])
    [loud] = [r for r in good if len(r["topics"]) == 4]
    [silent] = [r for r in good if not r["notify"]]
    bad = [
        {**loud, "versions": loud["versions"][:-1]},  # one version short
        {k: v for k, v in loud.items() if k != "versions"},
        {**loud, "waited_ms": [1]},
        {**loud, "topics": "T1"},  # not a list
        {**loud, "topics": [], "versions": [], "waited_ms": []},
        {k: v for k, v in silent.items() if k != "rules"},  # silent, without its rules
    ]
    journal_file(tmp_path / "j", [*good, *bad])
    s, _ = summarize(read_journal(spark, [JournalSource(str(tmp_path / "j"))]), None)
    assert s.changes == 7 + 1  # the silent change without rules is still a change
    assert s.journal.invalid == 5 + 1  # ... whose suppressed row is invalid
    assert s.journal.unknown_events == 0
