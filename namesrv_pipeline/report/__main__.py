"""``python -m namesrv_pipeline.report SUMMARY_JSON OUT_DIR``: the report of a ``summary.json``
the job wrote, rendered again without Spark (``report.md``, ``report.html`` and the summary)."""

from __future__ import annotations

import sys
from pathlib import Path

from namesrv_pipeline.report.outputs import report_from_summary


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m namesrv_pipeline.report SUMMARY_JSON OUT_DIR", file=sys.stderr)
        return 2
    for path in report_from_summary(Path(argv[0]), Path(argv[1])):
        print(path)
    return 0


raise SystemExit(main(sys.argv[1:]))
