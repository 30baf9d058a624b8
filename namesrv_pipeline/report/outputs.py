"""The job's files in ``--out``: the report (HTML and Markdown), ``summary.json`` and the tuned
config, written from plain values; and the report rendered again from a ``summary.json``
alone, with no Spark (``python -m namesrv_pipeline.report SUMMARY_JSON OUT_DIR``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from namesrv_pipeline.report.html import render_html
from namesrv_pipeline.report.markdown import TUNED_FILE, render
from namesrv_pipeline.report.plots import Plot, Plotter, plots
from namesrv_pipeline.report.replay_model import ReplayResult
from namesrv_pipeline.report.summary import Summary
from namesrv_pipeline.report.tuning import Recommendation

REPORT = "report.md"
REPORT_HTML = "report.html"
SUMMARY = "summary.json"
TUNED_CONFIG = TUNED_FILE


@dataclass(frozen=True, slots=True)
class Outputs:
    report: Path
    html: Path
    summary: Path
    config: Path
    changes: str


@dataclass(frozen=True, slots=True)
class Findings:
    """Everything the report says: the summary, the suggestions and the replay."""

    summary: Summary
    recommendations: list[Recommendation]
    replayed: ReplayResult | None

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary.to_json(),
            "recommendations": [dict(asdict(r), changed=r.changed) for r in self.recommendations],
            "replay": None if self.replayed is None else self.replayed.to_json(),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Findings:
        names = {f.name for f in fields(Recommendation)}
        return cls(
            Summary.from_json(doc["summary"]),
            [
                Recommendation(**{k: v for k, v in r.items() if k in names})
                for r in doc["recommendations"]
            ],
            None if doc.get("replay") is None else ReplayResult.from_json(doc["replay"]),
        )


def write_report(
    out: Path, found: Findings, drawn: Mapping[Plotter, Plot | None] | None = None
) -> tuple[Path, Path, Path]:
    """``report.md``, ``report.html`` and ``summary.json`` in ``out``; plots in ``drawn``
    are taken from it, the others drawn here."""
    markdown = render(found.summary, found.recommendations, found.replayed)
    paths = out / REPORT, out / REPORT_HTML, out / SUMMARY
    paths[0].write_text(markdown, encoding="utf-8")
    page = render_html(
        found.summary, plots(found.summary, drawn, found.replayed), markdown, found.replayed
    )
    paths[1].write_text(page, encoding="utf-8")
    paths[2].write_text(json.dumps(found.to_json(), indent=2, sort_keys=True) + "\n", "utf-8")
    return paths


def report_from_summary(summary_json: Path, out: Path) -> tuple[Path, Path, Path]:
    """The report of a ``summary.json`` (written by the job), rendered again in ``out``."""
    found = Findings.from_json(json.loads(summary_json.read_text(encoding="utf-8")))
    out.mkdir(parents=True, exist_ok=True)
    return write_report(out, found)
