"""The report's plots of client telemetry tied to the journal: propagation end to end, its
parts, and the clients that waited longest. Plain values in, PNG bytes out (``plot_kit``)."""

from __future__ import annotations

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from namesrv_pipeline.report.plot_kit import (
    LOG_FLOOR_MS,
    Plot,
    at_least_floor,
    beside,
    figure,
    log_ms_axis,
    png,
)
from namesrv_pipeline.report.summary import CDF_POINTS, SPREAD_CAUSES, Distribution, Summary


def propagation_distribution(s: Summary) -> Plot | None:
    curves = {k: v for k, v in s.charts.propagation_cdf.items() if k != "all"}
    if not curves:
        return None
    fig, (ax,) = figure()
    shares = [100.0 * i / (CDF_POINTS - 1) for i in range(CDF_POINTS)]
    for cause, values in sorted(curves.items()):
        n = s.propagation[cause].count if cause in s.propagation else 0
        spread = " (spread on purpose)" if cause in SPREAD_CAUSES else ""
        style = ":" if spread else "-"
        ax.step(
            at_least_floor(values), shares, where="post", ls=style, label=f"{cause}{spread} ({n:,})"
        )
    if "all" in s.charts.propagation_cdf:
        ax.step(
            at_least_floor(s.charts.propagation_cdf["all"]), shares, where="post", color="black",
            linestyle="--", label="all",
        )  # fmt: skip
    log_ms_axis(ax)
    ax.set_xlabel("route change (registry mutation) to the client holding it (ms, log scale)")
    ax.set_ylabel("client-versions at or below (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Propagation end to end, by how the client learned it")
    ax.grid(True, which="major", alpha=0.3)
    beside(ax)  # the slow curves end at the lower right
    return Plot(
        "propagation",
        "Propagation end to end",
        "A curve per learning cause: read across at 50 % or 99 % to find the median or p99 "
        "delay from the route change (tick wait included) to a client holding the new route; "
        f"curves further left are faster, dotted ones include a delay clients add on purpose, "
        f"and values under {LOG_FLOOR_MS:g} ms sit on the left edge.",
        png(fig),
    )


_PARTS = (
    ("detection: mutation to tick", "tab:blue"),
    ("tick to the client's request", "tab:orange"),
    ("after detection: tick to client holding it", "tab:green"),
)
_SPREAD_PART = "tick to request: refetch spread on purpose"


def _bands(ax: Axes, causes: list[str], s: Summary, spread: bool) -> None:
    """Per cause, one band per part: p50 to p90 thick, on to p99 thin, a tick at p50."""
    for i, cause in enumerate(causes):
        parts = (
            s.propagation_detection.get(cause, Distribution()),
            s.propagation_request.get(cause, Distribution()),
            s.propagation_delivery.get(cause, Distribution()),
        )
        for j, (d, (_, color)) in enumerate(zip(parts, _PARTS, strict=True)):
            if not d.count or d.p50 is None or d.p90 is None or d.p99 is None:
                continue
            y = i + (1 - j) * 0.27  # detection on top, in the order the parts happen
            p50, p90, p99 = at_least_floor([d.p50, d.p90, d.p99])
            hatch = "////" if spread and j == 1 else None
            ax.barh(y, p90 - p50, left=p50, height=0.22, color=color, alpha=0.55, hatch=hatch)
            ax.hlines(y, p90, p99, color=color, lw=1.5)
            # A dot of the part's colour at p50: a part with p50 = p99 is still seen.
            ax.plot([p50], [y], marker="o", color=color, mec="black", ms=5, ls="none")
    ax.set_yticks(range(len(causes)), causes)
    ax.set_ylim(-0.6, len(causes) - 0.4)
    log_ms_axis(ax)
    ax.grid(True, axis="x", which="major", alpha=0.3)


def detection_and_delivery(s: Summary) -> Plot | None:
    causes = sorted(k for k in s.propagation if k != "all")
    if not causes:
        return None
    plain = [c for c in causes if c not in SPREAD_CAUSES]
    spread = [c for c in causes if c in SPREAD_CAUSES]
    panels = [(plain, False), (spread, True)] if plain and spread else [(causes, bool(spread))]
    fig, axes = figure(len(panels), share_x=True)
    for ax, (group, is_spread) in zip(axes, panels, strict=True):
        _bands(ax, group, s, is_spread)
        ax.set_ylabel("learning cause")
        ax.set_title(
            "Deliberate: refetches spread after a broker arrival or departure"
            if is_spread
            else "Where the time goes: detection, the wait for the request, delivery",
            fontsize=10,
        )
    handles: list[Artist] = [
        Line2D([], [], color=color, lw=6, alpha=0.55, label=label) for label, color in _PARTS
    ]
    if spread:
        handles.insert(
            2, Patch(facecolor=_PARTS[1][1], alpha=0.55, hatch="////", label=_SPREAD_PART)
        )
    handles.append(
        Line2D([], [], color="white", marker="o", mec="black", ms=5, ls="none", label="p50")
    )
    # Beside the panels, never over a band.
    beside(axes[0], handles)
    # Shared x: the right end must hold every panel's p99, not only the first panel's.
    axes[0].set_xlim(LOG_FLOOR_MS, 1.5 * max(LOG_FLOOR_MS, *_p99s(s, causes)))
    axes[-1].set_xlabel("ms, log scale: thick p50 to p90, thin on to p99")
    return Plot(
        "parts",
        "Detection and delivery",
        "Per learning cause, the spread of each part of the delay (a dot at the median, thick "
        "to p90, thin to p99): mutation to its detection at a tick (blue), that tick to the "
        "client's request (orange) and to the client holding the route (green); the lower "
        "panel, hatched, is a wait clients take on purpose after broker arrivals and "
        "departures, not a delay.",
        png(fig),
    )


def _p99s(s: Summary, causes: list[str]) -> list[float]:
    parts = (s.propagation_detection, s.propagation_request, s.propagation_delivery)
    return [d.p99 for part in parts for c in causes if (d := part.get(c)) and d.p99 is not None]


def top_clients(s: Summary) -> Plot | None:
    rows = s.charts.top_clients
    if not rows:
        return None
    fig, (ax,) = figure()
    names = [_short(c) for c, _, _, _ in rows][::-1]
    worst = [m for _, _, _, m in rows][::-1]
    mean = [a for _, _, a, _ in rows][::-1]
    ax.barh(names, worst, color="tab:red", label="largest lag")
    ax.scatter(mean, names, color="black", zorder=3, label="mean lag", s=14)
    ax.set_xlabel("end-to-end propagation (ms)")
    ax.set_ylabel("client")
    ax.set_title(f"The {len(rows)} clients with the largest lag")
    beside(ax)
    return Plot(
        "clients",
        "Clients with the largest lag",
        "Bars are the longest any route change took to reach that client, dots its mean: a "
        "long bar with a low dot is one late change, a high dot a client that is slow overall.",
        png(fig),
    )


def _short(client: str) -> str:
    name = client.rsplit("/", 1)[-1]
    return name if len(name) <= 40 else name[:37] + "..."
