"""What one analysis is asked to do: its inputs, outputs and thresholds, typed.

Free of Spark, so the command line and the demo build a request, and its local paths are
checked, before Spark starts (it takes seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from namesrv_pipeline.report.summary import MatchWindow
from namesrv_pipeline.report.tuning import Targets
from namesrv_pipeline.sources import JournalSource

DEFAULT_MAX_LINE_BYTES = 64 * 2**20
"""A line this long or longer is no record (``namesrv_pipeline.spark.long_lines``). Far above any
record the name server or the client writes (a subscribe record lists the topics of one request
frame, at most ``server.max_frame_size``, 16 MiB by default)."""

MIN_MAX_LINE_BYTES = 1024
MAX_MAX_LINE_BYTES = 2**31 - 1
"""Hadoop's line reader takes the maximum as a Java int."""


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
