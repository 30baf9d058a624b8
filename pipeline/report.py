"""The human-readable report (Markdown) of one run of the job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pipeline.summary import SPREAD_CAUSES, Distribution, InputQuality, Summary
from pipeline.tuning import Recommendation

if TYPE_CHECKING:  # the report stays free of Spark: it only reads the replay's result
    from pipeline.replay import ReplayResult


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
) -> str:
    s = summary
    out: list[str] = ["# Route push report", ""]
    out += [
        f"Journal from {_ts(s.first_ts_ms)} to {_ts(s.last_ts_ms)} (name-server clock, UTC).",
        "",
        "## Inputs",
        "",
        "| input | files | lines | used | corrupt | invalid | unknown events | too long |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        _quality("journal", s.journal),
    ]
    if s.telemetry is not None:
        out.append(_quality("telemetry", s.telemetry))
    out += [
        "",
        "Corrupt lines are not JSON or have fields of the wrong type; invalid records lack a "
        "field their event needs. Both are left out of every figure below. Lines of "
        "`--max-line-bytes` or more (too long) are not records: they are left out unread and "
        "not among the lines (where Spark splits a file inside one, the part after the split "
        "is read as a line of its own and counted as corrupt).",
        "",
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
        *_counts_table("Suppressed by rule", s.suppressed_by_rule),
        "",
        *_counts_table("Broker events", s.broker_events),
        "",
        "## Notifications",
        "",
        f"{s.notification_frames:,} frames ({s.notification_bytes:,} bytes) in "
        f"{s.notification_ticks:,} ticks.",
        "",
        *_dist_table(
            "per tick",
            [
                ("frames (connections notified)", s.frames_per_tick),
                ("bytes per frame", s.frame_bytes),
            ],
        ),
        "",
        f"Subscriptions: {s.subscribed_topics:,} topics subscribed, "
        f"{s.unsubscribed_topics:,} unsubscribed; {s.connections_closed:,} subscribed "
        "connections closed.",
        "",
        "## Slow subscribers",
        "",
        f"{s.slow_skips:,} skips of {s.slow_connections:,} connections.",
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
    out += ["", "## Degradation", ""]
    if not s.episodes:
        out.append("Push never degraded.")
    else:
        out += [
            "| name server | degraded at | for ms | cpu % | memory % | backlog conns "
            "| drained in ms | frames | relapsed |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for e in s.episodes:
            out.append(
                f"| {e.namesrv or '-'} | {_ts(e.degraded_at_ms)} | {_int(e.degraded_ms)} "
                f"| {_num(e.cpu_percent)} | {_num(e.memory_percent)} "
                f"| {_int(e.backlog_connections)} | {_int(e.drain_ms)} | {_int(e.drain_frames)} "
                f"| {'yes' if e.relapsed else 'no'} |"
            )
    out += ["", "## Propagation", ""]
    if s.telemetry is None:
        out.append("No client telemetry given (`--telemetry`).")
    else:
        out += [
            *_counts_table("Client fetches by cause", s.fetches_by_cause),
            "",
            "Propagation is end to end: from the route change (the first registry mutation "
            "behind it, `mutated_at_ms` in the journal) to each client first holding that "
            "version, by the cause of the fetch that brought it. It is the sum of *detection* "
            "(mutation to the tick that detected it) and *delivery after detection* (that tick "
            "to the client holding the route). Delivery of notified fetches (telemetry alone) "
            "is a NOTIFY's emission (name-server clock) to the route applied (client clock).",
            "",
            *_dist_table(
                "ms",
                [
                    ("propagation end to end, all", s.propagation.get("all", Distribution())),
                    ("  without the deliberate spread", s.propagation_unspread),
                    (
                        "  of which detection",
                        s.propagation_detection.get("all", Distribution()),
                    ),
                    (
                        "  of which after detection",
                        s.propagation_delivery.get("all", Distribution()),
                    ),
                    *(
                        (f"propagation, {cause}", d)
                        for cause, d in sorted(s.propagation.items())
                        if cause != "all"
                    ),
                    *(
                        (f"  {cause}: detection to request, spread on purpose", d)
                        for cause, d in sorted(s.propagation_request.items())
                        if cause in SPREAD_CAUSES
                    ),
                    ("propagation of suppressed changes", s.propagation_quiet),
                    ("delivery (notified fetches)", s.delivery),
                    ("detection, every journal change", s.detection),
                ],
            ),
            "",
            f"{s.learned_changes:,} client-versions tied to a journal change; "
            f"{s.unmatched_fetches:,} not (another name server's journal, a journal gap, or "
            "an upstream name server).",
            *(
                [
                    f"{s.learned_inline / s.learned_changes:.1%} of them learned inline "
                    f"({s.learned_inline:,}: the route came in the notification, no request)."
                ]
                if s.learned_changes
                else []
            ),
            *(
                [
                    "",
                    f"{s.changes_without_mutation_time:,} changes come from a journal without "
                    "`mutated_at_ms` (an older name server): their propagation starts at "
                    "detection and misses the tick wait.",
                ]
                if s.changes_without_mutation_time
                else []
            ),
        ]
    if any(c in s.propagation for c in SPREAD_CAUSES):
        out += [
            "",
            "Causes " + ", ".join(f"`{c}`" for c in SPREAD_CAUSES) + " are refetches a client "
            "spreads on purpose over a window after a broker arrival or departure (so that not "
            "every client asks at once): their detection-to-request part is that chosen wait, "
            "not a delay.",
        ]
    out += [
        "",
        "## Tuned thresholds",
        "",
        "| key | current | suggested | optimises, computed over | expected effect | why |",
        "| --- | ---: | ---: | --- | --- | --- |",
        *(
            f"| `{r.key}` | {r.current} | {_suggested(r)} | {r.optimises or '-'} "
            f"| {r.effect or 'none: kept'} | {r.reason} |"
            for r in recommendations
        ),
        "",
        *_replay(replayed),
    ]
    return "\n".join(out)


def _replay(r: ReplayResult | None) -> list[str]:
    out = ["## Replay of the journal", ""]
    if r is None:
        return [*out, "No route changes to replay.", ""]
    verdict = {
        True: "**met**",
        False: "**missed**",
        None: "not known (no change owed a notification)",
    }
    delivery = (
        "no notified fetch was recorded, so the figures leave delivery out"
        if r.delivery_p99_ms is None
        else f"plus the recorded delivery p99 ({r.delivery_p99_ms:,.0f} ms)"
    )
    out += [
        f"With the suggested thresholds the {r.target_ms:,} ms end-to-end target would have "
        f"been {verdict[r.met]} on this journal. Each change owed a notification is run again: "
        "detected at the next tick, held while push is degraded (the degraded spans the "
        "tested pressure thresholds give on the recorded CPU and memory readings, the drain "
        f"at the tested recovery rate), {delivery}. Degraded windows are included. The "
        f"recorded end-to-end p99 (without the deliberate spread) was "
        f"{_num(r.recorded_p99_ms)} ms; set it beside the "
        "`current` row to see how far the model is from what happened.",
        "",
        "| thresholds | tick ms | changes | p50 | p90 | p99 | max | target |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, d in r.scenarios.items():
        met = "-" if d.p99 is None else ("met" if d.p99 <= r.target_ms else "missed")
        out.append(
            f"| {name} | {r.ticks[name]:,} | {d.count:,} | {_num(d.p50)} | {_num(d.p90)} "
            f"| {_num(d.p99)} | {_num(d.max)} | {met} |"
        )
    return [*out, ""]
