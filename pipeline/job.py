"""One run of the job on a Spark session: read, summarize, tune, write."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from namesrv.config import NamesrvConfig, load
from pipeline.client_names import client_labels
from pipeline.config_toml import to_toml
from pipeline.html_report import render_html
from pipeline.inputs import InputError, JournalSource, read_journal, read_telemetry
from pipeline.plots import Plot, Plotter, journal_plots, plots
from pipeline.progress import Progress
from pipeline.replay import ReplayResult, replay
from pipeline.report import render
from pipeline.stats import STEPS, summarize
from pipeline.summary import MatchWindow, Summary
from pipeline.tuning import Recommendation, Targets, recommend, tuned

__all__ = ["InputError", "Outputs", "run"]

REPORT = "report.md"
REPORT_HTML = "report.html"
SUMMARY = "summary.json"
TUNED_CONFIG = "namesrv-tuned.toml"
CHANGES = "changes"


@dataclass(frozen=True, slots=True)
class Outputs:
    report: Path
    html: Path
    summary: Path
    config: Path
    changes: str


def run(spark: SparkSession, args: argparse.Namespace) -> Outputs:
    """The job on an existing session (``args`` from ``pipeline.cli.parser``); raises
    InputError or ConfigError on unusable input, OSError when ``--out`` cannot be written.
    It clears the session's cache when done."""
    current = load(args.config)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = args.tables_out or str((out / CHANGES).resolve())

    try:
        return _run(spark, args, current, out, tables)
    finally:
        # The job caches what it reads; a later run in the same session must read the files
        # afresh, and a long-lived session must not keep the data.
        spark.catalog.clearCache()


def _run(
    spark: SparkSession, args: argparse.Namespace, current: NamesrvConfig, out: Path, tables: str
) -> Outputs:
    limit = args.max_line_bytes
    journal = read_journal(spark, [JournalSource.parse(j) for j in args.journal], limit)
    telemetry = read_telemetry(spark, args.telemetry, limit) if args.telemetry else None
    drawn: dict[Plotter, Plot | None] = {}
    failed: list[BaseException] = []
    writers: list[InheritableThread] = []

    def write_table(table: DataFrame) -> None:
        """Spark writes the per-change table as soon as its figures exist, while the rest of
        the job goes on: the plots need no Spark, so neither waits for the other."""

        def write() -> None:
            try:
                table.write.mode("overwrite").parquet(tables)
            except BaseException as exc:  # re-raised in the job's thread below
                failed.append(exc)

        # Inheritable: its Spark jobs count under the step that started it.
        writer = InheritableThread(target=write, name="change-table")
        writer.start()
        writers.append(writer)

    try:
        with Progress(spark, len(STEPS) + 1) as progress:
            summary, _ = summarize(
                journal,
                telemetry,
                MatchWindow(args.clock_skew_ms, args.max_lag_ms),
                progress.step,
                # The journal's plots are drawn while Spark computes the telemetry's figures.
                lambda s: drawn.update(journal_plots(s)),
                write_table,
            )
            progress.step("per-change table, replay, report and plots")
            # The ten clients shown are named as their telemetry names them.
            names = client_labels(spark, [c for c, _, _, _ in summary.charts.top_clients])
            summary.charts.top_clients = [
                (names[c], n, mean, worst) for c, n, mean, worst in summary.charts.top_clients
            ]
            recs = recommend(summary, current, Targets(args.target_p99_ms))
            changes = journal.usable.where(F.col("event") == "route_changed")
            replayed = replay(changes, summary, current, recs, Targets(args.target_p99_ms))
            outputs = _write(args, current, out, tables, summary, drawn, recs, replayed)
    finally:
        for writer in writers:
            writer.join()
    if failed:
        raise failed[0]
    return outputs


def _write(
    args: argparse.Namespace,
    current: NamesrvConfig,
    out: Path,
    tables: str,
    summary: Summary,
    drawn: dict[Plotter, Plot | None],
    recs: list[Recommendation],
    replayed: ReplayResult | None,
) -> Outputs:
    outputs = Outputs(out / REPORT, out / REPORT_HTML, out / SUMMARY, out / TUNED_CONFIG, tables)
    markdown = render(summary, recs, replayed)
    outputs.report.write_text(markdown, encoding="utf-8")
    outputs.html.write_text(
        render_html(summary, plots(summary, drawn), markdown, replayed), encoding="utf-8"
    )
    outputs.summary.write_text(
        json.dumps(
            {
                "summary": summary.to_json(),
                "recommendations": [_rec_json(r) for r in recs],
                "replay": None if replayed is None else replayed.to_json(),
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    header = (
        "name server config tuned by namesrv-pipeline from its journal and client telemetry\n"
        f"base: {args.config or 'embedded defaults'}; reasons in {REPORT}"
    )
    notes = {r.key: f"tuned from {r.current}: {r.reason}" for r in recs if r.changed}
    outputs.config.write_text(to_toml(tuned(current, recs), notes, header), encoding="utf-8")
    return outputs


def _rec_json(r: Recommendation) -> dict[str, Any]:
    return dict(asdict(r), changed=r.changed)
