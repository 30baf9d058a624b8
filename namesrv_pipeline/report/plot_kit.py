"""What every plot of the report shares: the ``Plot`` value, the figure and its PNG, the time
axis, the degraded spans drawn behind a timeline, and log axes that start at 1 ms.

Plain values in, bytes out: no Spark here, so the plots can be drawn from a hand-made summary.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullFormatter

from namesrv_pipeline.report.summary import Summary, degraded_spans

WIDTH_IN, HEIGHT_IN, DPI = 9.0, 4.2, 100
DEGRADED_COLOR = "tab:red"
LOG_FLOOR_MS = 1.0
"""Log time axes start here: a value below it (0 ms, same millisecond) is drawn at it."""


@dataclass(frozen=True, slots=True)
class Plot:
    key: str
    title: str
    how_to_read: str
    png: bytes


def time_axis(first_ms: int, last_ms: int) -> tuple[float, str]:
    """Divisor and unit for times since the journal's start."""
    span = last_ms - first_ms
    if span <= 300_000:
        return 1_000.0, "s"
    if span <= 3 * 3_600_000:
        return 60_000.0, "min"
    return 3_600_000.0, "h"


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def figure(rows: int = 1, share_x: bool = False) -> tuple[Figure, list[Axes]]:
    fig, axes = plt.subplots(
        rows,
        1,
        figsize=(WIDTH_IN, HEIGHT_IN * (1 if rows == 1 else 0.7 * rows)),
        sharex=share_x,
        squeeze=False,
    )
    return fig, [row[0] for row in axes]


def beside(ax: Axes, handles: list[Artist] | None = None) -> None:
    """The axes' legend to the right of them, where it covers no data; ``png``'s tight layout
    narrows every panel of the figure alike, so shared time axes stay aligned."""
    if handles is None:
        handles = ax.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def shade_degraded(ax: Axes, s: Summary, div: float, label: bool = True) -> bool:
    """The spans push was off, drawn behind the data; whether there were any."""
    if s.first_ts_ms is None or not s.episodes:
        return False
    last = s.last_ts_ms or s.first_ts_ms
    for i, span in enumerate(degraded_spans(s.episodes, last)):
        ax.axvspan(
            (span.start_ms - s.first_ts_ms) / div,
            (min(span.end_ms, last) - s.first_ts_ms) / div,
            color=DEGRADED_COLOR,
            alpha=0.12,
            lw=0,
            label="push degraded" if label and i == 0 else None,
            zorder=0,
        )
    return True


def log_ms_axis(ax: Axes) -> None:
    """A log x axis in ms from ``LOG_FLOOR_MS``: decades labelled, no tick at 0 (a log axis
    has none; a symlog one drew a lone "0" at its origin)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(left=LOG_FLOOR_MS)


def at_least_floor(values: list[float]) -> list[float]:
    return [max(LOG_FLOOR_MS, v) for v in values]
