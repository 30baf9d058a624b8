"""The what-if pictures: per replayed key, the end-to-end p99 the replay gives for each value
of the grid, and the notification frames per tick it costs, with the current and suggested
values marked and the target as a line. A curve is drawn only from a calibrated replay: for a
key the journal cannot judge, or for every key when the replay itself gives no verdict (its
model misses the recorded figure), no picture but the reason. Plain values in, PNG bytes
out."""

from __future__ import annotations

import math

from namesrv_pipeline.report.plot_kit import Plot, figure, png
from namesrv_pipeline.report.replay_model import (
    CPU_LOW,
    MEMORY_LOW,
    RATE,
    SAMPLE,
    TICK,
    Curve,
    ReplayResult,
)

_AXIS = {
    TICK: ("tick interval (ms)", "log"),
    CPU_LOW: ("CPU low mark (% of a core)", "linear"),
    MEMORY_LOW: ("memory low mark (% of the host)", "linear"),
    SAMPLE: ("pressure sample interval (ms)", "log"),
    RATE: ("recovery rate (notifications/s)", "log"),
}

_HOW_TO_READ = {
    TICK: "Each dot is the journal replayed with that tick: read the blue line where it crosses "
    "the red target, and pick the longest tick left of the crossing whose frames per tick "
    "(orange, the cost) you can afford.",
    CPU_LOW: "Each dot is the journal replayed with that CPU low mark: a lower mark keeps push "
    "off longer after a CPU spike, so the blue p99 rises as the mark falls; keep the mark "
    "where the blue line stays under the red target.",
    MEMORY_LOW: "Each dot is the journal replayed with that memory low mark: a lower mark keeps "
    "push off longer after memory pressure, so the blue p99 rises as the mark falls; keep the "
    "mark where the blue line stays under the red target.",
    SAMPLE: "Each dot is the journal replayed with that pressure sample interval: a longer one "
    "sees recovery later, so held changes wait longer (the blue p99 rises to the right); "
    "choose the longest interval still under the red target.",
    RATE: "Each dot is the journal replayed with that recovery rate: a faster drain brings held "
    "changes out sooner (blue p99 falls to the right) at the cost of a burst after recovery; "
    "choose the slowest rate under the red target.",
}


def _title(key: str) -> str:
    return f"What if {key} were different"


def whatif(curve: Curve, replayed: ReplayResult) -> Plot | None:
    """One key's curve: p99 (left axis) and frames per tick (right) against the value."""
    points = [p for p in curve.points if p.end_to_end.p99 is not None]
    if not points:
        return None
    if _unjudged(curve, replayed) is not None:
        # A line drawn from a replay that cannot be trusted (a key the journal cannot judge,
        # or a model that misses the recording) would still be read as a verdict: the reason
        # stands in for the picture, the figures stay in the report's what-if table.
        return Plot(f"whatif-{curve.key}", _title(curve.key), _how_to_read(curve, replayed), b"")
    label, scale = _AXIS[curve.key]
    fig, (ax,) = figure()
    xs = [float(p.value) for p in points]
    p90s = [math.nan if p.end_to_end.p90 is None else p.end_to_end.p90 for p in points]
    ax.plot(xs, p90s, marker=".", color="tab:blue", alpha=0.45, ls=":",
            label="end-to-end p90, replayed")  # fmt: skip
    p99s = [math.nan if p.end_to_end.p99 is None else p.end_to_end.p99 for p in points]
    ax.plot(xs, p99s, marker="o", color="tab:blue",
            label="end-to-end p99, replayed")  # fmt: skip
    ax.axhline(replayed.target_ms, color="tab:red", lw=1.2, ls="-",
               label=f"target {replayed.target_ms:,} ms")  # fmt: skip
    ax.axvline(float(curve.current), color="black", ls=":", lw=1.2,
               label=f"current {curve.current:g}")  # fmt: skip
    if curve.suggested != curve.current:
        ax.axvline(float(curve.suggested), color="tab:green", ls="--", lw=1.2,
                   label=f"suggested {curve.suggested:g}")  # fmt: skip
    ax.set_xscale(scale)
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.minorticks_off()
    ax.set_xlabel(label)
    ax.set_ylabel("end-to-end p99 (ms)")
    ax.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0]
    cost = [(x, p.frames_per_tick) for x, p in zip(xs, points, strict=True)]
    if any(f is not None and not math.isnan(f) for _, f in cost):
        right = ax.twinx()
        frames = [math.nan if f is None else f for _, f in cost]
        right.plot(xs, frames, marker="s", color="tab:orange", ls="--",
                   label="frames per sending tick")  # fmt: skip
        right.set_ylabel("notification frames per tick")
        right.set_ylim(bottom=0)
        handles += right.get_legend_handles_labels()[0]
    ax.set_title(f"{curve.key}: end-to-end p99 and cost per value", fontsize=10)
    # Below the axes: beside them it would cover the right axis' label.
    ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
    return Plot(f"whatif-{curve.key}", _title(curve.key), _how_to_read(curve, replayed), png(fig))


def _unjudged(curve: Curve, replayed: ReplayResult) -> str | None:
    """Why the replay cannot judge ``curve``'s key (the whole replay first), or None."""
    if replayed.no_verdict is not None:
        return f"the replay gives no verdict ({replayed.no_verdict})"
    return curve.no_verdict


def _how_to_read(curve: Curve, replayed: ReplayResult) -> str:
    """The picture's sentence; where the replay cannot judge the key, why it has none."""
    why = _unjudged(curve, replayed)
    if why is None:
        return _HOW_TO_READ[curve.key]
    return (
        f"No verdict for this key: {why}. No curve is drawn from it; its replayed figures "
        "are in the what-if table, shown, not judged."
    )


def whatif_plots(replayed: ReplayResult | None) -> list[Plot]:
    if replayed is None:
        return []
    drawn = (whatif(c, replayed) for c in replayed.curves)
    return [p for p in drawn if p is not None]
