"""What one analysis is asked to do: its inputs, outputs and thresholds, typed.

Free of Spark, so the command line and the demo build a request, and its local paths are
checked, before Spark starts (it takes seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.report.summary import MatchWindow
from pipeline.report.tuning import Targets
from pipeline.sources import JournalSource
from pipeline.spark.long_lines import DEFAULT_MAX_LINE_BYTES


@dataclass(frozen=True, slots=True)
class AnalysisRequest:
    """One run of the job: read ``journals`` (and ``telemetry``), write into ``out``.

    ``config`` is the name server's config file the "current" values come from (None: the
    embedded defaults); ``tables_out`` where Spark writes the per-change table (None:
    ``out``/changes); ``master`` the Spark master (None: ``local[*]``, or ``spark-submit``'s).
    """

    journals: tuple[JournalSource, ...]
    out: str
    telemetry: tuple[str, ...] = ()
    config: str | None = None
    tables_out: str | None = None
    master: str | None = None
    targets: Targets = field(default_factory=Targets)
    window: MatchWindow = field(default_factory=MatchWindow)
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
