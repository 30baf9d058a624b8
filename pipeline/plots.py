"""The report's pictures: matplotlib (Agg, no display needed) figures of a ``Summary``'s charts,
as PNG bytes. Each plot comes with its title and one sentence on how to read it.

Plain values in, bytes out: no Spark here, so the plots can be drawn from a hand-made summary.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pipeline.summary import CDF_POINTS, Summary

WIDTH_IN, HEIGHT_IN, DPI = 9.0, 4.2, 100


@dataclass(frozen=True, slots=True)
class Plot:
    key: str
    title: str
    how_to_read: str
    png: bytes


def _time_axis(first_ms: int, last_ms: int) -> tuple[float, str]:
    """Divisor and unit for times since the journal's start."""
    span = last_ms - first_ms
    if span <= 300_000:
        return 1_000.0, "s"
    if span <= 3 * 3_600_000:
        return 60_000.0, "min"
    return 3_600_000.0, "h"


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def _figure(rows: int = 1) -> tuple[Figure, list[Axes]]:
    fig, axes = plt.subplots(
        rows, 1, figsize=(WIDTH_IN, HEIGHT_IN * (1 if rows == 1 else 0.7 * rows))
    )
    return fig, list(axes) if rows > 1 else [axes]


def changes_over_time(s: Summary) -> Plot | None:
    c = s.charts
    if not c.changes_notified or s.first_ts_ms is None:
        return None
    div, unit = _time_axis(s.first_ts_ms, s.last_ts_ms or s.first_ts_ms)
    x0 = s.first_ts_ms
    fig, (top, bottom) = _figure(2)
    # Every bucket from the first to the last with a change, drawn as one filled step line per
    # series (a bar per bucket was a few hundred artists, most of the report's drawing time).
    seen = [b for b, _, _ in c.changes_by_cause] + [b for b, _, _ in c.changes_notified]
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
    top.legend(fontsize=7, ncol=4, loc="upper right")
    per_bucket = {b: (n, q) for b, n, q in c.changes_notified}
    notified = [per_bucket.get(b, (0, 0))[0] for b in buckets]
    both = [n + per_bucket.get(b, (0, 0))[1] for n, b in zip(notified, buckets, strict=True)]
    bottom.stairs(notified, edges, fill=True, color="tab:green", label="notified")
    bottom.stairs(both, edges, baseline=notified, fill=True, color="tab:gray", label="suppressed")
    bottom.set_ylabel(f"changes per {c.bucket_ms / 1000:g} s")
    bottom.set_xlabel(f"time since the journal's first record ({unit})")
    bottom.set_title("Notified vs suppressed")
    bottom.legend(fontsize=7, loc="upper right")
    return Plot(
        "changes",
        "Route changes over time",
        "Each step is one time bucket: the upper panel splits its changes by the registry "
        "mutation that caused them (a change with two causes counts under both), the lower by "
        "whether subscribers were notified or the change was suppressed.",
        _png(fig),
    )


def propagation_distribution(s: Summary) -> Plot | None:
    curves = {k: v for k, v in s.charts.propagation_cdf.items() if k != "all"}
    if not curves:
        return None
    fig, (ax,) = _figure()
    shares = [100.0 * i / (CDF_POINTS - 1) for i in range(CDF_POINTS)]
    for cause, values in sorted(curves.items()):
        n = s.propagation[cause].count if cause in s.propagation else 0
        ax.step(values, shares, where="post", label=f"{cause} ({n:,})")
    if "all" in s.charts.propagation_cdf:
        ax.step(
            s.charts.propagation_cdf["all"], shares, where="post", color="black",
            linestyle="--", label="all",
        )  # fmt: skip
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlabel("route change (registry mutation) to the client holding it (ms, log scale)")
    ax.set_ylabel("client-versions at or below (%)")
    ax.set_title("Propagation end to end, by how the client learned it")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return Plot(
        "propagation",
        "Propagation end to end",
        "A curve per learning cause: read across at 50 % or 99 % to find the median or p99 "
        "delay from the route change (tick wait included) to a client holding the new route; "
        "curves further left are faster.",
        _png(fig),
    )


def notifications_per_tick(s: Summary) -> Plot | None:
    c = s.charts
    if not c.ticks or s.first_ts_ms is None:
        return None
    div, unit = _time_axis(s.first_ts_ms, s.last_ts_ms or s.first_ts_ms)
    xs = [(b - s.first_ts_ms) / div for b, _, _, _ in c.ticks]
    frames = [f / t for _, t, f, _ in c.ticks]
    kib = [by / t / 1024 for _, t, _, by in c.ticks]
    fig, (ax,) = _figure()
    ax.plot(xs, frames, marker="o", markersize=3, color="tab:blue", label="frames per tick")
    ax.set_ylabel("frames per tick (mean in bucket)", color="tab:blue")
    ax.set_xlabel(f"time since the journal's first record ({unit})")
    right = ax.twinx()
    right.plot(xs, kib, marker="s", markersize=3, color="tab:orange", label="KiB per tick")
    right.set_ylabel("KiB per tick (mean in bucket)", color="tab:orange")
    ax.set_ylim(bottom=0)
    right.set_ylim(bottom=0)
    ax.set_title("Notification frames and bytes per sending tick")
    return Plot(
        "ticks",
        "Notification frames and bytes per tick",
        "Per time bucket, the mean frames (connections notified) and bytes written by a tick "
        "that sent: a rising line means more subscribers or larger notifications per tick.",
        _png(fig),
    )


def degradation_timeline(s: Summary) -> Plot | None:
    if not s.episodes or s.first_ts_ms is None:
        return None
    last = s.last_ts_ms or s.first_ts_ms
    div, unit = _time_axis(s.first_ts_ms, last)
    x0 = s.first_ts_ms
    fig, (ax,) = _figure()
    labelled = set()

    def once(name: str) -> str | None:
        if name in labelled:
            return None
        labelled.add(name)
        return name

    for e in s.episodes:
        start = (e.degraded_at_ms - x0) / div
        end = ((e.recovered_at_ms or last) - x0) / div
        ax.axvspan(start, end, color="tab:red", alpha=0.2, label=once("push degraded"))
        if e.recovered_at_ms is not None and e.drain_ms is not None:
            drained = (e.recovered_at_ms + e.drain_ms - x0) / div
            ax.axvspan(end, drained, color="tab:orange", alpha=0.3, label=once("backlog draining"))
            ax.annotate(
                f"{e.backlog_connections or 0} conns\n{e.drain_ms} ms",
                (drained, 95),
                fontsize=7,
                ha="left",
                va="top",
            )
        for t, cpu, mem in (
            (start, e.cpu_percent, e.memory_percent),
            (end if e.recovered_at_ms is not None else None, e.recovered_cpu_percent,
             e.recovered_memory_percent),
        ):  # fmt: skip
            if t is None:
                continue
            if cpu is not None:
                ax.scatter([t], [cpu], marker="^", color="tab:red", zorder=3, label=once("CPU %"))
            if mem is not None:
                ax.scatter([t], [mem], marker="o", color="tab:purple", zorder=3,
                           label=once("memory %"))  # fmt: skip
    ax.set_xlim(0, max((last - x0) / div, 1e-9))
    ax.set_ylim(0, 100)
    ax.set_xlabel(f"time since the journal's first record ({unit})")
    ax.set_ylabel("reading at the transition (%)")
    ax.set_title("Degradation episodes and backlog drain")
    ax.legend(fontsize=7, loc="upper left")
    return Plot(
        "degradation",
        "Degradation episodes",
        "Red spans are push switched off under pressure, orange the backlog draining after "
        "recovery (annotated with connections owed and drain time); markers are the CPU and "
        "memory readings that decided each transition.",
        _png(fig),
    )


def top_topics(s: Summary) -> Plot | None:
    rows = s.charts.top_topics
    if not rows:
        return None
    fig, (ax,) = _figure()
    names = [t for t, _, _ in rows][::-1]
    notified = [n for _, _, n in rows][::-1]
    quiet = [total - n for _, total, n in rows][::-1]
    ax.barh(names, notified, color="tab:green", label="notified")
    ax.barh(names, quiet, left=notified, color="tab:gray", label="suppressed")
    ax.set_xlabel("route changes (count)")
    ax.set_ylabel("topic")
    ax.set_title(f"The {len(rows)} topics with the most route changes")
    ax.legend(fontsize=8, loc="lower right")
    return Plot(
        "topics",
        "Most changed topics",
        "Longer bars are topics whose routes changed most often; the grey part was never "
        "notified (suppressed), so clients learned it only by polling.",
        _png(fig),
    )


def top_clients(s: Summary) -> Plot | None:
    rows = s.charts.top_clients
    if not rows:
        return None
    fig, (ax,) = _figure()
    names = [_short(c) for c, _, _, _ in rows][::-1]
    worst = [m for _, _, _, m in rows][::-1]
    mean = [a for _, _, a, _ in rows][::-1]
    ax.barh(names, worst, color="tab:red", label="largest lag")
    ax.scatter(mean, names, color="black", zorder=3, label="mean lag", s=14)
    ax.set_xlabel("end-to-end propagation (ms)")
    ax.set_ylabel("client (telemetry file)")
    ax.set_title(f"The {len(rows)} clients with the largest lag")
    ax.legend(fontsize=8, loc="lower right")
    return Plot(
        "clients",
        "Clients with the largest lag",
        "Bars are the longest any route change took to reach that client, dots its mean: a "
        "long bar with a low dot is one late change, a high dot a client that is slow overall.",
        _png(fig),
    )


def detection_and_delivery(s: Summary) -> Plot | None:
    causes = sorted(k for k in s.propagation if k != "all")
    if not causes:
        return None
    fig, (ax,) = _figure()
    det = [s.propagation_detection[c].p50 or 0.0 for c in causes]
    dlv = [s.propagation_delivery[c].p50 or 0.0 for c in causes]
    ax.barh(causes, det, color="tab:blue", label="detection (mutation to tick), p50")
    ax.barh(causes, dlv, left=det, color="tab:orange", label="delivery (tick to client), p50")
    ax.set_xlabel("ms (median of each part)")
    ax.set_ylabel("learning cause")
    ax.set_title("Where the time goes: detection and delivery")
    ax.legend(fontsize=8, loc="lower right")
    return Plot(
        "parts",
        "Detection and delivery",
        "Per learning cause, the median wait from the registry mutation to its detection at a "
        "tick (blue) and from detection to the client holding the route (orange).",
        _png(fig),
    )


def _short(client: str) -> str:
    name = client.rsplit("/", 1)[-1]
    return name if len(name) <= 30 else name[:27] + "..."


PLOTTERS: tuple[Callable[[Summary], Plot | None], ...] = (
    changes_over_time,
    propagation_distribution,
    detection_and_delivery,
    notifications_per_tick,
    degradation_timeline,
    top_topics,
    top_clients,
)


Plotter = Callable[[Summary], Plot | None]

JOURNAL_PLOTTERS: frozenset[Plotter] = frozenset(
    {changes_over_time, notifications_per_tick, degradation_timeline, top_topics}
)
"""The plots drawn from the journal's figures alone."""


def journal_plots(s: Summary) -> dict[Plotter, Plot | None]:
    """The plots of ``JOURNAL_PLOTTERS``: the job draws them while Spark still computes the
    telemetry's figures, so fewer are left for the end of the run."""
    return {plot: plot(s) for plot in PLOTTERS if plot in JOURNAL_PLOTTERS}


def plots(s: Summary, drawn: Mapping[Plotter, Plot | None] | None = None) -> list[Plot]:
    """Every plot the summary has data for; those in ``drawn`` are taken from it."""
    done = drawn or {}
    return [p for p in (done[f] if f in done else f(s) for f in PLOTTERS) if p is not None]
