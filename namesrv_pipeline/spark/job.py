"""One run of the job on a Spark session: read, summarize, tune, write."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from namesrv.config import NamesrvConfig
from namesrv.config_file import load
from namesrv.config_text import keys_toml
from namesrv_pipeline.report.outputs import REPORT, TUNED_CONFIG, Findings, Outputs, write_report
from namesrv_pipeline.report.plots import PLOTTERS, Plot, Plotter, journal_plots
from namesrv_pipeline.report.summary import Summary
from namesrv_pipeline.report.tuning import Targets, how_to_apply, recommend, tuned, tuned_keys
from namesrv_pipeline.request import AnalysisRequest
from namesrv_pipeline.spark.aggregations import STEPS, Tables, summarize
from namesrv_pipeline.spark.beside import Beside
from namesrv_pipeline.spark.client_names import client_labels
from namesrv_pipeline.spark.inputs import InputError, Parsed, read_journal, read_telemetry
from namesrv_pipeline.spark.progress import Progress
from namesrv_pipeline.spark.replay_grid import replay

__all__ = ["InputError", "Outputs", "run"]

CHANGES = "changes"


def run(spark: SparkSession, request: AnalysisRequest) -> Outputs:
    """The job ``request`` asks for, on an existing session (its ``master`` is the session's
    business); raises InputError or ConfigError on unusable input, OSError when ``out``
    cannot be written. It clears the session's cache when done."""
    current = load(request.config)
    out = Path(request.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = request.tables_out or str((out / CHANGES).resolve())

    try:
        return _run(spark, request, current, out, tables)
    finally:
        # The job caches what it reads; a later run in the same session must read the files
        # afresh, and a long-lived session must not keep the data.
        spark.catalog.clearCache()


def _run(
    spark: SparkSession, request: AnalysisRequest, current: NamesrvConfig, out: Path, tables: str
) -> Outputs:
    limit = request.max_line_bytes
    journal = read_journal(spark, request.journals, limit)
    telemetry = read_telemetry(spark, request.telemetry, limit) if request.telemetry else None
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
            summary, kept = summarize(
                journal,
                telemetry,
                request.window,
                progress.step,
                # The journal's plots are drawn while Spark computes the telemetry's figures.
                lambda s: drawn.update(journal_plots(s)),
                write_table,
            )
            progress.step("per-change table, replay, report and plots")
            found = _findings(spark, journal, summary, kept, current, request.targets, drawn)
            outputs = _write(request, current, out, tables, found, drawn)
    finally:
        for writer in writers:
            writer.join()
    if failed:
        raise failed[0]
    return outputs


def _findings(
    spark: SparkSession,
    journal: Parsed,
    summary: Summary,
    kept: Tables,
    current: NamesrvConfig,
    targets: Targets,
    drawn: dict[Plotter, Plot | None],
) -> Findings:
    """The suggestions and the replay of the summary's journal; the summary's plots not yet in
    ``drawn`` are drawn into it meanwhile (they need no Spark, and the replay's short Spark
    jobs leave the cores idle between their tasks)."""
    # The ten clients shown are named as their telemetry names them.
    shown = summary.charts.top_clients
    names = client_labels(spark, [c for c, _, _, _ in shown])
    named = [(names[c], n, mean, worst) for c, n, mean, worst in shown]
    summary = replace(summary, charts=replace(summary.charts, top_clients=named))
    drawing = Beside(lambda: {p: p(summary) for p in PLOTTERS if p not in drawn}, "plots")
    try:
        recs = recommend(summary, current, targets)
        changes = journal.usable.where(F.col("event") == "route_changed")
        replayed = replay(
            changes, journal.usable, kept.per_change, kept.replay, summary, current, recs, targets
        )
    finally:
        drawn.update(drawing.join())
    return Findings(summary, recs, replayed)


def _write(
    request: AnalysisRequest,
    current: NamesrvConfig,
    out: Path,
    tables: str,
    found: Findings,
    drawn: dict[Plotter, Plot | None],
) -> Outputs:
    report, html, summary = write_report(out, found, drawn)
    outputs = Outputs(report, html, summary, out / TUNED_CONFIG, tables)
    recs = found.recommendations
    changed = tuned_keys(recs)
    base = Path(request.config).name if request.config else "the embedded defaults"
    header = (
        "name-server keys namesrv-pipeline tuned from the journal and client telemetry: only "
        f"those whose value changes ({len(changed)})\n"
        f"base: {base}; reasons and how to apply each in {REPORT} (Applying the tuned keys)\n"
        "merge them into the config file under their tables; every other key stays as it is"
    )
    notes = {
        r.key: f"tuned from {r.current}: {r.reason}\napply: {how_to_apply(r)}"
        for r in recs
        if r.changed
    }
    # Validated like a loaded file: the keys as merged into the base must load.
    tuned(current, recs)
    outputs.config.write_text(keys_toml(changed, notes, header), encoding="utf-8")
    return outputs
