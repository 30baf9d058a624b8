"""What the report opens with: the end-to-end figure the target is held to, the target and
whether it was met, and the replay's verdict with its model error. The Markdown and HTML
pages both say it with these words."""

from __future__ import annotations

from dataclasses import dataclass

from namesrv_pipeline.report.replay_model import ReplayResult
from namesrv_pipeline.report.summary import SPREAD_CAUSES, Distribution, Summary
from namesrv_pipeline.report.tuning import Targets, end_to_end


@dataclass(frozen=True, slots=True)
class Headline:
    figure: str
    """The figure, its target and met or missed."""
    scope: str
    """What the figure counts."""
    replay: str
    """The replay's verdict, or why there is none, with the model error."""
    notes: tuple[str, ...] = ()
    met: bool | None = None
    staleness: str = ""
    """How long clients held a superseded route: every change's, and the held changes',
    those that never reached a client included."""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def headline(s: Summary, replayed: ReplayResult | None, targets: Targets) -> Headline:
    target = replayed.target_ms if replayed is not None else targets.propagation_p99_ms
    d = end_to_end(s)
    if d.p99 is None:
        return Headline(
            "End-to-end p99: unknown (no client telemetry tied to the journal's changes)",
            f"The target is {target:,} ms; without telemetry there is nothing to hold to it.",
            _replay_line(replayed),
            staleness=staleness_line(s),
        )
    met = d.p99 <= target
    notes = []
    if s.held_changes:
        notes.append(
            f"Of the {s.held_changes:,} changes held while push was degraded, it includes "
            f"only the {s.held_reached:,} some client learned; the time clients held the "
            "routes the others replaced is the held staleness above."
        )
    if s.changes_without_mutation_time:
        notes.append(
            f"{s.changes_without_mutation_time:,} changes come from a journal without "
            "`mutated_at_ms`: for them it starts at detection."
        )
    return Headline(
        f"End-to-end p99 {_ms(d.p99)} against the {target:,} ms target: "
        f"{'met' if met else 'missed'}",
        f"Route change to client holding it, over {d.count:,} client-versions, degraded "
        "windows included, without the refetches clients spread on purpose "
        f"({', '.join(SPREAD_CAUSES)}): p50 {_ms(d.p50)}, p90 {_ms(d.p90)}, max {_ms(d.max)}.",
        _replay_line(replayed),
        tuple(notes),
        met,
        staleness_line(s),
    )


STALENESS = (
    "staleness: from a change's first registry mutation until a version at or after it "
    "reached every client that learned that version"
)


def _spread(d: Distribution) -> str:
    return f"p50 {_ms(d.p50)}, p99 {_ms(d.p99)}, max {_ms(d.max)}"


def staleness_line(s: Summary) -> str:
    """Every held change's fate and how long clients held the route it replaced, then the
    staleness of every change."""
    if s.telemetry is None:
        held = (
            f"{s.held_changes:,} changes held while push was degraded; " if s.held_changes else ""
        )
        return f"{held}how long clients held older routes is unknown without telemetry."
    parts = []
    if s.held_changes:
        h = s.staleness_held
        unlearned = s.held_unlearned_topic
        why = (
            "no client held their topic, or the telemetry ends first"
            if unlearned is None
            else f"{unlearned:,} of topics no client learned any version of, "
            f"{s.held_unresolved - unlearned:,} after the last version clients learned of theirs"
        )
        fate = (
            f"{s.held_reached:,} reached clients, {s.held_superseded:,} were superseded "
            f"before reaching any, {s.held_unresolved:,} were followed by no version any "
            f"client learned: {why}"
        )
        parts.append(
            f"Held while push was degraded: {s.held_changes:,} changes ({fate}); clients "
            f"held the route they replaced for {_spread(h)} over the {h.count:,} with a "
            f"staleness ({STALENESS})."
        )
    every = s.staleness
    parts.append(
        f"Staleness of every change: {_spread(every)} over {every.count:,} of "
        f"{s.changes:,} changes ({s.changes - every.count:,} had no version at or after "
        "them learned by any client)."
    )
    return " ".join(parts)


def _replay_line(r: ReplayResult | None) -> str:
    if r is None:
        return "Replay: no route changes to replay."
    error = r.calibration.error
    model = "model error unknown" if error is None else f"model error {error:+.1%} at p99"
    if r.no_verdict is not None:
        return f"Replay: no verdict ({r.no_verdict}; {model})."
    tuned = r.scenarios["tuned"]
    word = "met" if r.met else "missed"
    return f"Replay with the suggested thresholds: p99 {_ms(tuned.p99)}, target {word} ({model})."
