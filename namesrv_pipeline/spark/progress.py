"""A one-line progress display while the job runs: the job's step, and Spark's stages and tasks
done of that step (from the status tracker). Only on a terminal; a redirected stdout (a log
file, a pipe, the tests) gets nothing."""

from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

POLL_S = 0.3


class Progress:
    """``step(name)`` names what runs next; Spark jobs started meanwhile are counted under it."""

    def __init__(self, spark: Any, steps: int, stream: TextIO | None = None) -> None:
        self._sc = spark.sparkContext
        self._steps = steps
        self._stream = stream if stream is not None else sys.stdout
        self._on = self._stream.isatty()
        self._n = 0
        self._name = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0

    def __enter__(self) -> Progress:
        if self._on:
            self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        # Later jobs of this thread belong to no step.
        self._sc.setLocalProperty("spark.jobGroup.id", None)
        self._sc.setLocalProperty("spark.job.description", None)
        if self._thread is not None:
            self._thread.join()
            self._write(f"namesrv-pipeline: {self._steps}/{self._steps} steps done")
            self._stream.write("\n")
            self._stream.flush()

    def step(self, name: str) -> None:
        self._n += 1
        self._name = name
        # Spark jobs started by this thread from now on carry the step as their group.
        self._sc.setJobGroup(f"step-{self._n}", name)

    def line(self) -> str:
        """The current state, as the display shows it."""
        stages_done = stages = tasks_done = tasks = 0
        tracker = self._sc.statusTracker()
        for job_id in tracker.getJobIdsForGroup(f"step-{self._n}"):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stages += 1
                info = tracker.getStageInfo(stage_id)
                if info is None:
                    continue
                tasks += info.numTasks
                tasks_done += info.numCompletedTasks
                if info.numTasks and info.numCompletedTasks >= info.numTasks:
                    stages_done += 1
        return (
            f"namesrv-pipeline: step {self._n}/{self._steps} {self._name}: "
            f"stages {stages_done}/{stages} done, tasks {tasks_done}/{tasks}"
        )

    def _write(self, text: str) -> None:
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self._stream.write("\r" + text + " " * pad)
        self._stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self._write(self.line())
            except Exception:  # the session is stopping: the display is not worth an error
                return
