"""The pipeline CLI's checks before Spark starts, and its progress display (no Spark)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field

import pytest

from namesrv_pipeline.analysis import check_paths
from namesrv_pipeline.cli import demo_args, main, parse, parser
from namesrv_pipeline.spark.progress import Progress


def args(tmp_path, *extra: str):
    return parse(["--out", str(tmp_path / "out"), *extra])


def test_local_paths_are_checked_before_spark_starts(tmp_path, capsys):
    (tmp_path / "j").mkdir()
    (tmp_path / "file").write_text("")
    assert check_paths(args(tmp_path, "--journal", str(tmp_path / "j"))) is None
    assert (tmp_path / "out").is_dir()
    missing = check_paths(args(tmp_path, "--journal", f"10.0.0.1:9876={tmp_path / 'nowhere'}"))
    assert missing == f"journal directory {tmp_path / 'nowhere'} does not exist"
    assert check_paths(args(tmp_path, "--journal", str(tmp_path / "file"))) == (
        f"journal directory {tmp_path / 'file'} is not a directory"
    )
    telemetry = check_paths(
        args(tmp_path, "--journal", str(tmp_path / "j"), "--telemetry", str(tmp_path / "t-*.jsonl"))
    )
    assert telemetry == f"telemetry path {tmp_path / 't-*.jsonl'} does not exist"
    (tmp_path / "t-1.jsonl").write_text("")
    assert (
        check_paths(
            args(
                tmp_path,
                "--journal",
                f"file://{tmp_path / 'j'}",
                "--telemetry",
                str(tmp_path / "t-*.jsonl"),
            )
        )
        is None
    )
    # other file systems are the job's to check
    assert check_paths(args(tmp_path, "--journal", "hdfs:///namesrv/journal")) is None
    blocked = parse(["--journal", str(tmp_path / "j"), "--out", str(tmp_path / "file" / "out")])
    assert "cannot create --out" in (check_paths(blocked) or "")
    for bad in ("12", "-1", str(2**31), "lots"):
        with pytest.raises(SystemExit):
            args(tmp_path, "--journal", "j", "--max-line-bytes", bad)
    assert "between 1024 and" in capsys.readouterr().err
    assert args(tmp_path, "--journal", "j", "--max-line-bytes", "1024").max_line_bytes == 1024
    # main answers at once, without starting Spark
    assert main(["--journal", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 2
    assert "nowhere does not exist" in capsys.readouterr().err


def test_an_unusable_spark_driver_memory_is_refused_by_name_before_spark_starts(
    tmp_path, capsys, monkeypatch
):
    (tmp_path / "j").mkdir()
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "lots")
    assert main(["--journal", str(tmp_path / "j"), "--out", str(tmp_path / "o")]) == 2
    assert "SPARK_DRIVER_MEMORY='lots': not a heap size" in capsys.readouterr().err


@dataclass
class StageInfo:
    numTasks: int
    numCompletedTasks: int


@dataclass
class JobInfo:
    stageIds: list[int]


@dataclass
class Tracker:
    groups: dict[str, list[int]] = field(default_factory=dict)
    jobs: dict[int, JobInfo] = field(default_factory=dict)
    stages: dict[int, StageInfo] = field(default_factory=dict)

    def getJobIdsForGroup(self, group):
        return self.groups.get(group, [])

    def getJobInfo(self, job_id):
        return self.jobs.get(job_id)

    def getStageInfo(self, stage_id):
        return self.stages.get(stage_id)


class Context:
    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.properties: dict[str, str | None] = {}

    def statusTracker(self):
        return self.tracker

    def setJobGroup(self, group, description):
        self.properties["spark.jobGroup.id"] = group

    def setLocalProperty(self, key, value):
        self.properties[key] = value


@dataclass
class Session:
    sparkContext: Context


def test_progress_counts_the_current_steps_stages_and_is_quiet_off_a_terminal():
    tracker = Tracker(
        groups={"step-2": [7]},
        jobs={7: JobInfo([1, 2, 3])},
        stages={1: StageInfo(4, 4), 2: StageInfo(4, 1)},  # stage 3 not started
    )
    context = Context(tracker)
    stream = io.StringIO()
    with Progress(Session(context), 5, stream) as progress:
        progress.step("journal: parse and totals")
        progress.step("journal: grouped figures")
        assert context.properties["spark.jobGroup.id"] == "step-2"
        assert progress.line() == (
            "namesrv-pipeline: step 2/5 journal: grouped figures: stages 1/3 done, tasks 5/8"
        )
    assert stream.getvalue() == ""  # not a terminal
    assert context.properties["spark.jobGroup.id"] is None


def test_help_lists_the_demo_and_the_demo_writes_under_the_system_temp_unless_told(
    tmp_path, capsys, monkeypatch
):
    assert "namesrv-pipeline demo [--out DIR]" in parser().format_help()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    given = demo_args(["--seconds", "5"])
    out = given[given.index("--out") + 1]
    assert os.path.dirname(out) == str(tmp_path) and os.listdir(out) == []
    assert capsys.readouterr().out == f"demo: writing into {out}\n"
    assert demo_args(["--out", "mine"]) == ["--out", "mine"]
    assert demo_args(["--out=mine"]) == ["--out=mine"]
    assert demo_args(["--help"]) == ["--help"]
    assert os.listdir(tmp_path) == [os.path.basename(out)]  # one directory, made once
