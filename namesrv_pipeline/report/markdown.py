"""The human-readable report (Markdown) of one run of the job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from namesrv_pipeline.report.headline import Headline, headline
from namesrv_pipeline.report.replay_model import MAX_MODEL_ERROR, ReplayResult
from namesrv_pipeline.report.summary import SPREAD_CAUSES, Distribution, InputQuality, Summary
from namesrv_pipeline.report.tuning import (
    Recommendation,
    Targets,
    changes_live,
    counted,
    how_to_apply,
)

TUNED_FILE = "namesrv-tuned.toml"


def _ts(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:,.1f}"


def _int(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _dist_row(label: str, d: Distribution) -> str:
    return (
        f"| {label} | {d.count:,} | {_num(d.p50)} | {_num(d.p90)} | {_num(d.p99)} | {_num(d.max)} |"
    )


def _dist_table(title: str, rows: Sequence[tuple[str, Distribution]]) -> list[str]:
    return [
        f"| {title} | count | p50 | p90 | p99 | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *(_dist_row(label, d) for label, d in rows),
    ]


def _counts_table(title: str, counts: Mapping[str, int]) -> list[str]:
    if not counts:
        return [f"No {title.lower()}."]
    return [
        f"| {title} | count |",
        "| --- | ---: |",
        *(f"| {k} | {v:,} |" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
    ]


def _quality(name: str, q: InputQuality) -> str:
    return (
        f"| {name} | {q.files:,} | {q.lines:,} | {q.used:,} | {q.corrupt:,} | {q.invalid:,} "
        f"| {q.unknown_events:,} | {q.oversized:,} |"
    )


def _suggested(r: Recommendation) -> str:
    return f"**{r.suggested}**" if r.changed else str(r.suggested)


def render(
    summary: Summary,
    recommendations: Sequence[Recommendation],
    replayed: ReplayResult | None = None,
    targets: Targets | None = None,
) -> str:
    """The Markdown report: the headline, then each section."""
    s = summary
    head = headline(s, replayed, targets or Targets())
    out: list[str] = [
        "# Route push report",
        "",
        *_headline(head),
    ]
    for section in (_inputs(s), _changes(s), _notifications(s), _slow(s), _degradation(s)):
        out += [*section, ""]
    out += [*_propagation(s), ""]
    out += [*_tuning(recommendations), ""]
    out += [*applying(recommendations), ""]
    out += _replay(replayed)
    return "\n".join(out)


def _headline(h: Headline) -> list[str]:
    stale = [f"**{h.staleness}**", ""] if h.staleness else []
    notes = [line for n in h.notes for line in (n, "")]
    return [f"**{h.figure}**", "", h.scope, "", *stale, f"**{h.replay}**", "", *notes]


def _inputs(s: Summary) -> list[str]:
    rows = [_quality("journal", s.journal)]
    if s.telemetry is not None:
        rows.append(_quality("telemetry", s.telemetry))
    return [
        "## Inputs",
        "",
        f"Journal from {_ts(s.first_ts_ms)} to {_ts(s.last_ts_ms)} (name-server clock, UTC).",
        "",
        "| input | files | lines | used | corrupt | invalid | unknown events | too long |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
        "Corrupt lines are not JSON or have fields of the wrong type; invalid records lack a "
        "field their event needs. Both are left out of every figure below. Lines of "
        "`--max-line-bytes` or more (too long) are not records: they are left out unread and "
        "not among the lines (where Spark splits a file inside one, the part after the split "
        "is read as a line of its own and counted as corrupt).",
    ]


def _changes(s: Summary) -> list[str]:
    return [
        "## Route changes",
        "",
        f"{s.changes:,} changes, {s.notified_changes:,} of them notified; "
        f"{s.changes - s.notified_changes:,} suppressed. Of the notified, {s.held_changes:,} "
        "were held: detected while push was degraded, sent only with the backlog after "
        "recovery.",
        "",
        *_counts_table("Kind", s.changes_by_kind),
        "",
        *_counts_table("Cause", s.changes_by_cause),
        "",
        causes_reconciled(s),
        "",
        *_counts_table("Suppressed by rule", s.suppressed_by_rule),
        "",
        rules_reconciled(s),
        "",
        *_counts_table("Broker events", s.broker_events),
    ]


def _sum_of_products(by_count: Mapping[str, int]) -> tuple[str, int]:
    """``1 x a + 2 x b ...`` of changes by how many items they have, and its value."""
    terms = sorted((int(k), n) for k, n in by_count.items())
    total = sum(k * n for k, n in terms)
    text = " + ".join(f"{k} x {n:,}" for k, n in terms) or "0"
    return text, total


def causes_reconciled(s: Summary) -> str:
    """How the cause table's total follows from the changes: one count per cause."""
    text, total = _sum_of_products(s.changes_by_cause_count)
    listed = sum(s.changes_by_cause.values())
    counted = sum(s.changes_by_cause_count.values())
    out = (
        f"The cause table adds up to {listed:,} for {s.changes:,} changes: a change with "
        f"several causes counts once under each ({text} = {total:,}, over "
        f"{counted:,} changes by their number of causes)."
    )
    if counted != s.changes:
        out += f" {s.changes - counted:,} changes list no causes."
    return out


def rules_reconciled(s: Summary) -> str:
    """How the rule table's total follows from the silent changes: one count per rule."""
    suppressed = s.changes - s.notified_changes
    text, total = _sum_of_products(s.suppressed_by_rule_count)
    listed = sum(s.suppressed_by_rule.values())
    records = sum(s.suppressed_by_rule_count.values())
    out = (
        f"The rule table adds up to {listed:,} for {suppressed:,} suppressed changes: a "
        f"change silenced by several rules counts once under each ({text} = {total:,}, over "
        f"the {records:,} silent changes whose rules the journal names)."
    )
    if records < suppressed:
        out += f" {suppressed - records:,} suppressed changes have no rules in the journal."
    elif records > suppressed:
        out += (
            f" {records - suppressed:,} `suppressed` records have no change of their own in "
            "the journal (it was cut, or a record lost)."
        )
    return out


def _notifications(s: Summary) -> list[str]:
    per_tick = [
        ("frames (connections notified)", s.frames_per_tick),
        ("bytes per frame", s.frame_bytes),
    ]
    return [
        "## Notifications",
        "",
        f"{s.notification_frames:,} frames ({s.notification_bytes:,} bytes) in "
        f"{s.notification_ticks:,} ticks.",
        "",
        *_dist_table("per tick", per_tick),
        "",
        f"Subscriptions: {s.subscribed_topics:,} topics subscribed, "
        f"{s.unsubscribed_topics:,} unsubscribed; {s.connections_closed:,} subscribed "
        "connections closed.",
    ]


def _slow(s: Summary) -> list[str]:
    out = [
        "## Slow subscribers",
        "",
        f"{counted(s.slow_skips, 'skip')} of {counted(s.slow_connections, 'connection')}.",
    ]
    if s.slowest:
        out += [
            "",
            "| name server | conn | skips | most topics owed |",
            "| --- | ---: | ---: | ---: |",
            *(
                f"| {c.namesrv or '-'} | {c.conn} | {c.skips:,} | {c.max_pending_topics:,} |"
                for c in s.slowest
            ),
        ]
    return out


def _degradation(s: Summary) -> list[str]:
    if not s.episodes:
        return ["## Degradation", "", "Push never degraded."]
    return [
        "## Degradation",
        "",
        "| name server | degraded at | for ms | cpu % | memory % | backlog conns "
        "| drained in ms | frames | relapsed |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        *(
            f"| {e.namesrv or '-'} | {_ts(e.degraded_at_ms)} | {_int(e.degraded_ms)} "
            f"| {_num(e.cpu_percent)} | {_num(e.memory_percent)} "
            f"| {_int(e.backlog_connections)} | {_int(e.drain_ms)} | {_int(e.drain_frames)} "
            f"| {'yes' if e.relapsed else 'no'} |"
            for e in s.episodes
        ),
    ]


PROPAGATION_INTRO = (
    "Propagation is end to end: from the route change (the first registry mutation behind "
    "it, `mutated_at_ms` in the journal) to each client first holding that version, by the "
    "cause of the fetch that brought it. It is the sum of *detection* (mutation to the tick "
    "that detected it) and *delivery after detection* (that tick to the client holding the "
    "route). Delivery of notified fetches (telemetry alone) is a NOTIFY's emission "
    "(name-server clock) to the route applied (client clock)."
)


def _propagation_rows(s: Summary) -> list[tuple[str, Distribution]]:
    """Each distribution once, named for what it is; the target's figure is the headline."""
    every = Distribution()
    return [
        ("end to end, the target's figure (without the deliberate spread)", s.propagation_unspread),
        ("end to end, every cause (spread refetches included)", s.propagation.get("all", every)),
        ("  its detection part (mutation to tick)", s.propagation_detection.get("all", every)),
        ("  its part after detection (tick to client)", s.propagation_delivery.get("all", every)),
        *(
            (f"end to end, learned by {cause}", d)
            for cause, d in sorted(s.propagation.items())
            if cause != "all"
        ),
        *(
            (f"  {cause}: detection to request, spread on purpose", d)
            for cause, d in sorted(s.propagation_request.items())
            if cause in SPREAD_CAUSES
        ),
        ("end to end of suppressed changes (nobody notified)", s.propagation_quiet),
        ("delivery: NOTIFY emitted to route applied", s.delivery),
        ("detection of every journal change, learned or not", s.detection),
    ]  # fmt: skip


def _propagation(s: Summary) -> list[str]:
    if s.telemetry is None:
        return ["## Propagation", "", "No client telemetry given (`--telemetry`)."]
    out = [
        "## Propagation",
        "",
        *_counts_table("Client fetches by cause", s.fetches_by_cause),
        "",
        PROPAGATION_INTRO,
        "",
        *_dist_table("ms", _propagation_rows(s)),
        "",
        fetches_reconciled(s),
    ]
    if s.learned_changes:
        out.append(
            f"{s.learned_inline / s.learned_changes:.1%} of them learned inline "
            f"({s.learned_inline:,}: the route came in the notification, no request)."
        )
    if s.changes_without_mutation_time:
        out += [
            "",
            f"{s.changes_without_mutation_time:,} changes come from a journal without "
            "`mutated_at_ms` (an older name server): their propagation starts at "
            "detection and misses the tick wait.",
        ]
    if any(c in s.propagation for c in SPREAD_CAUSES):
        out += [
            "",
            "Causes " + ", ".join(f"`{c}`" for c in SPREAD_CAUSES) + " are refetches a client "
            "spreads on purpose over a window after a broker arrival or departure (so that not "
            "every client asks at once): their detection-to-request part is that chosen wait, "
            "not a delay.",
        ]
    return out


def fetches_reconciled(s: Summary) -> str:
    """How the fetch table's total splits: versions tied to a change, versions no journal
    change explains, and fetches that told the client nothing new."""
    fetched = sum(s.fetches_by_cause.values())
    nothing_new = fetched - s.learned_changes - s.unmatched_fetches
    return (
        f"Of the {fetched:,} fetches above, {s.learned_changes:,} brought a client-version "
        f"tied to a journal change; {s.unmatched_fetches:,} brought one tied to none (another "
        "name server's journal, a journal gap, or an upstream name server); "
        f"{nothing_new:,} told the client nothing new (its first route of a topic, or a "
        "version it already held)."
    )


def _tuning(recommendations: Sequence[Recommendation]) -> list[str]:
    return [
        "## Tuned thresholds",
        "",
        "| key | current | suggested | optimises, computed over | expected effect | why |",
        "| --- | ---: | ---: | --- | --- | --- |",
        *(
            f"| `{r.key}` | {r.current} | {_suggested(r)} | {r.optimises or '-'} "
            f"| {r.effect or 'none: kept'} | {r.reason} |"
            for r in recommendations
        ),
    ]


def applying(recommendations: Sequence[Recommendation]) -> list[str]:
    """How to put the tuned keys into effect: which change at run time, which at a restart."""
    out = ["## Applying the tuned keys", ""]
    changed = [r for r in recommendations if r.changed]
    if not changed:
        return [
            *out,
            f"No key changes: `{TUNED_FILE}` holds none, and the name server runs on as it is.",
        ]
    live = sum(changes_live(r.key) for r in changed)
    each, them = ("", "it") if len(changed) == 1 else ("each ", "them")
    return [
        *out,
        f"`{TUNED_FILE}` holds only the {_keys(len(changed))} whose value changes, {each}under "
        f"its table with its reason above it; merge {them} into the config file the name server "
        "runs with (every other key stays as that file has it). Changing at run time: "
        f"{_keys(live)}; taking a restart: {_keys(len(changed) - live)}.",
        "",
        "| key | from | to | how it takes effect |",
        "| --- | ---: | ---: | --- |",
        *(f"| `{r.key}` | {r.current} | {r.suggested} | {how_to_apply(r)} |" for r in changed),
    ]


def _keys(n: int) -> str:
    return counted(n, "key")


REPLAY_MODEL = (
    "Each client-version of the target's figure is run again. One a NOTIFY brought: "
    "detected at the tested tick's next tick after its mutation, held while "
    "push is degraded (the spans the tested pressure thresholds give on the recorded CPU and "
    "memory readings), then sent at its recorded place in the backlog drain (stretched by the "
    "tested recovery rate); plus a client part "
    "drawn from the recorded delivery of notified fetches. Any other (a poll, a version check, a "
    "lookup) keeps its recorded lag: no replayed key changes it."
)


def _replay(r: ReplayResult | None) -> list[str]:
    out = ["## Replay of the journal", ""]
    if r is None:
        return [*out, "No route changes to replay.", ""]
    cal = r.calibration
    out += [
        REPLAY_MODEL,
        "",
        "Calibration: the recorded thresholds replayed beside what was recorded, over the same "
        f"client-versions (the model must be within {MAX_MODEL_ERROR:.0%} at p99 to give a "
        "verdict):",
        "",
        *_dist_table(
            "end to end, ms",
            [("recorded", cal.recorded), ("replayed, current thresholds", cal.replayed)],
        ),
        "",
        f"Model error at p99: **{_error(cal.error)}**.",
        "",
        *_verdict_lines(r),
        "",
        "| thresholds | tick ms | client-versions | p50 | p90 | p99 | max | target |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        *(_scenario_row(r, name, d) for name, d in r.scenarios.items()),
        "",
        *_grid_tables(r),
    ]  # fmt: skip
    return out


def _error(error: float | None) -> str:
    return "unknown" if error is None else f"{error:+.1%}"


def _verdict_lines(r: ReplayResult) -> list[str]:
    why = r.no_verdict
    if why is not None:
        return [f"**No verdict**: {why}. The figures below are shown, not judged."]
    word = "**met**" if r.met else "**missed**"
    return [
        f"With the suggested thresholds the {r.target_ms:,} ms end-to-end target would have "
        f"been {word} on this journal (model error {_error(r.calibration.error)})."
    ]


def _scenario_row(r: ReplayResult, name: str, d: Distribution) -> str:
    if d.p99 is None or r.no_verdict is not None:
        met = "-"
    else:
        met = "met" if d.p99 <= r.target_ms else "missed"
    return (
        f"| {name} | {r.ticks[name]:,} | {d.count:,} | {_num(d.p50)} | {_num(d.p90)} "
        f"| {_num(d.p99)} | {_num(d.max)} | {met} |"
    )


def _grid_tables(r: ReplayResult) -> list[str]:
    # A miscalibrated replay's grid is kept as figures, never as a verdict or a curve.
    unjudged = (
        f" No verdict on any key: {r.no_verdict}; the rows are shown, not judged, and no "
        "what-if curve is drawn."
        if r.no_verdict is not None
        else ""
    )
    out = [
        "What-if grid: each replayed key alone at other values, the rest current "
        f"(model error {_error(r.calibration.error)}).{unjudged}",
        "",
        "| key | value | end-to-end p50 | p90 | p99 | frames per tick |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in r.curves:
        for p in c.points:
            mark = " (current)" if p.value == c.current else ""
            mark += " (suggested)" if p.value == c.suggested and c.suggested != c.current else ""
            mark += " (no verdict)" if c.no_verdict is not None or r.no_verdict else ""
            d = p.end_to_end
            out.append(
                f"| `{c.key}` | {p.value:g}{mark} | {_num(d.p50)} | {_num(d.p90)} "
                f"| {_num(d.p99)} | {_num(p.frames_per_tick)} |"
            )
    keys = [f"- `{c.key}`: **no verdict**: {c.no_verdict}." for c in r.curves if c.no_verdict]
    if keys:
        out += ["", "Keys the journal cannot judge (their rows are shown, not judged):", *keys]
    return [*out, ""]
