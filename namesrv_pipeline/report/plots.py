"""The report's pictures: matplotlib (Agg, no display needed) figures of a ``Summary``'s charts,
as PNG bytes. Each plot comes with its title and one sentence on how to read it.

This module holds the journal's plots and the list of all of them; the telemetry's are in
``namesrv_pipeline.report.plots_propagation``. Plain values in, bytes out: no Spark here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from matplotlib.axes import Axes

from namesrv_pipeline.report.plot_kit import (
    DEGRADED_COLOR,
    Plot,
    beside,
    figure,
    png,
    shade_degraded,
    time_axis,
)
from namesrv_pipeline.report.plots_propagation import (
    detection_and_delivery,
    propagation_distribution,
    top_clients,
)
from namesrv_pipeline.report.plots_whatif import whatif_plots
from namesrv_pipeline.report.replay_model import ReplayResult
from namesrv_pipeline.report.summary import Summary

__all__ = ["PLOTTERS", "Plot", "Plotter", "journal_plots", "plots", "tick_series"]


def changes_over_time(s: Summary) -> Plot | None:
    c = s.charts
    if not c.changes_notified or s.first_ts_ms is None:
        return None
    div, unit = time_axis(s.first_ts_ms, s.last_ts_ms or s.first_ts_ms)
    x0 = s.first_ts_ms
    fig, (top, bottom) = figure(2, share_x=True)
    # Every bucket from the first to the last with a change, drawn as one filled step line per
    # series (a bar per bucket was a few hundred artists, most of the report's drawing time).
    seen = [b for b, _, _ in c.changes_by_cause] + [row[0] for row in c.changes_notified]
    first, last = min(seen), max(seen)
    buckets = list(range(first, last + 1, c.bucket_ms))
    edges = [(b - x0) / div for b in [*buckets, last + c.bucket_ms]]
    base = [0] * len(buckets)
    for cause in sorted({cause for _, cause, _ in c.changes_by_cause}):
        counts = {b: n for b, k, n in c.changes_by_cause if k == cause}
        stacked = [below + counts.get(b, 0) for below, b in zip(base, buckets, strict=True)]
        top.stairs(stacked, edges, baseline=base, fill=True, label=cause)
        base = stacked
    top.set_ylabel(f"changes per {c.bucket_ms / 1000:g} s")
    top.set_title("Route changes over time, by cause")
    beside(top)
    per_bucket = {b: (n, h, q) for b, n, h, q in c.changes_notified}
    base = [0] * len(buckets)
    for part, (label, color, hatch) in enumerate(
        (
            ("notified at once", "tab:green", None),
            ("held: push degraded, sent at recovery", DEGRADED_COLOR, "///"),
            ("suppressed (learned by polling)", "tab:gray", None),
        )
    ):
        stacked = [
            below + per_bucket.get(b, (0, 0, 0))[part]
            for below, b in zip(base, buckets, strict=True)
        ]
        if any(s_ != b_ for s_, b_ in zip(stacked, base, strict=True)):
            bottom.stairs(
                stacked, edges, baseline=base, fill=True, color=color, hatch=hatch, label=label
            )
        base = stacked
    shade_degraded(bottom, s, div)
    bottom.set_ylabel(f"changes per {c.bucket_ms / 1000:g} s")
    bottom.set_xlabel(f"time since the journal's first record ({unit})")
    bottom.set_title("Notified, held while push was degraded, or suppressed")
    beside(bottom)
    return Plot(
        "changes",
        "Route changes over time",
        "Each step is one time bucket: the upper panel splits its changes by the registry "
        "mutation that caused them (a change with two causes counts under both), the lower "
        "says what subscribers got: notified at once, held while push was degraded (red, "
        "sent only with the backlog at recovery) or suppressed.",
        png(fig),
    )


def tick_series(s: Summary) -> tuple[list[float], list[float], list[float]]:
    """Per time bucket from the first to the last with a sending tick: its start (ms since
    the journal's first record), the mean frames and the mean KiB of a tick that sent in it;
    NaN where no tick sent, so the line breaks there instead of bridging the gap."""
    c = s.charts
    if not c.ticks or s.first_ts_ms is None:
        return [], [], []
    by_bucket = {b: (t, f, by) for b, t, f, by in c.ticks}
    first, last = c.ticks[0][0], c.ticks[-1][0]
    xs: list[float] = []
    frames: list[float] = []
    kib: list[float] = []
    for b in range(first, last + 1, c.bucket_ms):
        xs.append(float(b - s.first_ts_ms))
        ticks, f, by = by_bucket.get(b, (0, 0, 0))
        frames.append(f / ticks if ticks else math.nan)
        kib.append(by / ticks / 1024 if ticks else math.nan)
    return xs, frames, kib


def notifications_per_tick(s: Summary) -> Plot | None:
    xs_ms, frames, kib = tick_series(s)
    if not xs_ms or s.first_ts_ms is None:
        return None
    div, unit = time_axis(s.first_ts_ms, s.last_ts_ms or s.first_ts_ms)
    # Each sample at the middle of its bucket.
    xs = [(x + s.charts.bucket_ms / 2) / div for x in xs_ms]
    fig, (upper, lower) = figure(2, share_x=True)
    for ax, values, color, title, ylabel in (
        (upper, frames, "tab:blue", "Frames per sending tick (mean in bucket)", "frames per tick"),
        (lower, kib, "tab:orange", "KiB per sending tick (mean in bucket)", "KiB per tick"),
    ):
        shade_degraded(ax, s, div, label=ax is upper)
        ax.plot(xs, values, marker="o", markersize=3, color=color, lw=1.2)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=10)
    if s.episodes:
        beside(upper)
    lower.set_xlabel(f"time since the journal's first record ({unit})")
    return Plot(
        "ticks",
        "Notification frames and bytes per tick",
        "Per time bucket, the mean frames (connections notified, upper) and KiB written "
        "(lower) by a tick that sent; a break in a line is a stretch in which no tick sent "
        "(red: push degraded), a rise more subscribers or larger notifications per tick.",
        png(fig),
    )


def _drains(s: Summary, div: float, cpu_ax: Axes, mem_ax: Axes) -> None:
    """Each backlog drain after a recovery, shaded on both panels, annotated on the upper."""
    assert s.first_ts_ms is not None
    last = s.last_ts_ms or s.first_ts_ms
    x0 = s.first_ts_ms
    drained_once = False
    for e in s.episodes:
        end = ((e.recovered_at_ms or last) - x0) / div
        if e.recovered_at_ms is not None and e.drain_ms is not None:
            drained = (e.recovered_at_ms + e.drain_ms - x0) / div
            for ax in (cpu_ax, mem_ax):
                ax.axvspan(
                    end,
                    drained,
                    color="tab:orange",
                    alpha=0.3,
                    lw=0,
                    label=None if drained_once or ax is mem_ax else "backlog draining",
                )
            drained_once = True
            cpu_ax.annotate(
                f"{e.backlog_connections or 0} conns, {e.drain_ms} ms",
                (drained, 97),
                fontsize=7,
                ha="left",
                va="top",
            )


def degradation_timeline(s: Summary) -> Plot | None:
    if not s.episodes or s.first_ts_ms is None:
        return None
    last = s.last_ts_ms or s.first_ts_ms
    div, unit = time_axis(s.first_ts_ms, last)
    x0 = s.first_ts_ms
    # One panel per reading: CPU and memory markers at the same transition never overlap.
    fig, (cpu_ax, mem_ax) = figure(2, share_x=True)
    _drains(s, div, cpu_ax, mem_ax)
    for ax, name, color, marker, reading in (
        (cpu_ax, "CPU", "tab:red", "^", lambda e: (e.cpu_percent, e.recovered_cpu_percent)),
        (
            mem_ax,
            "memory",
            "tab:purple",
            "o",
            lambda e: (e.memory_percent, e.recovered_memory_percent),
        ),
    ):
        shade_degraded(ax, s, div, label=ax is cpu_ax)
        xs: list[float] = []
        ys: list[float] = []
        for e in s.episodes:
            at_start, at_end = reading(e)
            for t, value in (
                (e.degraded_at_ms, at_start),
                (e.recovered_at_ms, at_end),
            ):
                if t is not None and value is not None:
                    xs.append((t - x0) / div)
                    ys.append(value)
        # Not clipped: a reading of 0 % sits on the axis, whole.
        ax.scatter(
            xs,
            ys,
            marker=marker,
            color=color,
            zorder=3,
            s=22,
            clip_on=False,
            label=f"{name} % read",
        )
        ax.set_xlim(0, max((last - x0) / div, 1e-9))
        ax.set_ylim(0, 100)
        ax.set_ylabel(f"{name} at the transition (%)")
        beside(ax)
    cpu_ax.set_title("Degradation episodes and backlog drain")
    mem_ax.set_xlabel(f"time since the journal's first record ({unit})")
    return Plot(
        "degradation",
        "Degradation episodes",
        "Red spans are push switched off under pressure, orange the backlog draining after "
        "recovery (annotated with connections owed and drain time); the markers are the CPU "
        "(upper) and memory (lower) readings of the samples that switched push off and on.",
        png(fig),
    )


def top_topics(s: Summary) -> Plot | None:
    rows = s.charts.top_topics
    if not rows:
        return None
    fig, (ax,) = figure()
    names = [t for t, _, _ in rows][::-1]
    notified = [n for _, _, n in rows][::-1]
    quiet = [total - n for _, total, n in rows][::-1]
    ax.barh(names, notified, color="tab:green", label="notified (or held and sent later)")
    ax.barh(names, quiet, left=notified, color="tab:gray", label="suppressed")
    ax.set_xlabel("route changes (count)")
    ax.set_ylabel("topic")
    ax.set_title(f"The {len(rows)} topics with the most route changes")
    beside(ax)
    return Plot(
        "topics",
        "Most changed topics",
        "Longer bars are topics whose routes changed most often; the grey part was never "
        "notified (suppressed), so clients learned it only by polling.",
        png(fig),
    )


Plotter = Callable[[Summary], Plot | None]

PLOTTERS: tuple[Plotter, ...] = (
    changes_over_time,
    propagation_distribution,
    detection_and_delivery,
    notifications_per_tick,
    degradation_timeline,
    top_topics,
    top_clients,
)

JOURNAL_PLOTTERS: frozenset[Plotter] = frozenset(
    {changes_over_time, notifications_per_tick, degradation_timeline, top_topics}
)
"""The plots drawn from the journal's figures alone."""


def journal_plots(s: Summary) -> dict[Plotter, Plot | None]:
    """The plots of ``JOURNAL_PLOTTERS``: the job draws them while Spark still computes the
    telemetry's figures, so fewer are left for the end of the run."""
    return {plot: plot(s) for plot in PLOTTERS if plot in JOURNAL_PLOTTERS}


def plots(
    s: Summary,
    drawn: Mapping[Plotter, Plot | None] | None = None,
    replayed: ReplayResult | None = None,
) -> list[Plot]:
    """Every plot the summary has data for (those in ``drawn`` taken from it), then the
    replay's what-if curves."""
    done = drawn or {}
    found = [p for p in (done[f] if f in done else f(s) for f in PLOTTERS) if p is not None]
    return found + whatif_plots(replayed)
