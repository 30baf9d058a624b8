"""``report.html``: one self-contained page (plots embedded as PNG data URIs, no scripts, no
external files) with the headline figures, the plots and the Markdown report's tables."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipeline.plots import Plot
from pipeline.summary import Distribution, Summary

if TYPE_CHECKING:  # the page stays free of Spark: it only reads the replay's result
    from pipeline.replay import ReplayResult

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1000px;color:#222;line-height:1.45;padding:0 1em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.2em .6em}
th{background:#f3f3f3}td.r,th.r{text-align:right}figure{margin:1.5em 0}
figure img{max-width:100%;border:1px solid #ddd}figcaption{font-size:.92em;color:#444}
.head{display:flex;gap:1em;flex-wrap:wrap}.head div{border:1px solid #ccc;border-radius:6px;
padding:.6em 1em;min-width:12em}.head b{font-size:1.5em;display:block}code{background:#f3f3f3}
"""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _tile(label: str, d: Distribution, note: str) -> str:
    return (
        f"<div><span>{html.escape(label)}</span><b>p50 {_ms(d.p50)}</b>"
        f"p99 {_ms(d.p99)} &middot; {d.count:,} {html.escape(note)}</div>"
    )


def headline(s: Summary, replayed: ReplayResult | None = None) -> str:
    """End to end first, then its two parts, then what they include and the replay's
    verdict."""
    if "all" not in s.propagation:
        return "<p>No client telemetry tied to journal changes: no propagation figures.</p>"
    tiles = [
        _tile("change to client holds it (end to end)", s.propagation["all"], "client-versions"),
        _tile("of which detection (mutation to tick)", s.propagation_detection["all"], "the same"),
        _tile("of which delivery (tick to client)", s.propagation_delivery["all"], "the same"),
    ]
    note = ""
    if s.changes_without_mutation_time:
        note = (
            f"<p>{s.changes_without_mutation_time:,} changes come from a journal without "
            "<code>mutated_at_ms</code>: for them propagation starts at detection.</p>"
        )
    if s.propagation_unspread.count and s.propagation_unspread != s.propagation["all"]:
        note += (
            "<p>Without the refetches clients spread on purpose after broker arrivals and "
            f"departures: p50 {_ms(s.propagation_unspread.p50)}, p99 "
            f"{_ms(s.propagation_unspread.p99)} (the figure the tuning holds to the target).</p>"
        )
    if s.held_changes:
        note += (
            f"<p>These figures include {s.held_changes:,} changes held while push was "
            "degraded (sent only with the backlog after recovery).</p>"
        )
    if replayed is not None and replayed.met is not None:
        tuned = replayed.scenarios["tuned"]
        note += (
            f"<p>Replay of the journal with the suggested thresholds: end-to-end p99 "
            f"{_ms(tuned.p99)} against the {replayed.target_ms:,} ms target, "
            f"<b>{'met' if replayed.met else 'missed'}</b> (see the replay table).</p>"
        )
    return f'<div class="head">{"".join(tiles)}</div>{note}'


def _inline(text: str) -> str:
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"\*(.+?)\*", r"<i>\1</i>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def markdown_tables(md: str) -> str:
    """The subset of Markdown ``report.render`` writes: headings, paragraphs, pipe tables."""
    out: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level + 1}>{_inline(line.lstrip('#').strip())}</h{level + 1}>")
        elif line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            head = [c.strip() for c in line.strip("|").split("|")]
            align = [
                "r" if c.strip().endswith(":") else "" for c in lines[i + 1].strip("|").split("|")
            ]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip("|").split("|")])
                i += 1
            cells = "".join(
                f'<th class="{a}">{_inline(h)}</th>' for h, a in zip(head, align, strict=False)
            )
            body = "".join(
                "<tr>"
                + "".join(
                    f'<td class="{a}">{_inline(c)}</td>' for c, a in zip(r, align, strict=False)
                )
                + "</tr>"
                for r in rows
            )
            out.append(f"<table><tr>{cells}</tr>{body}</table>")
            continue
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "\n".join(out)


def render_html(
    s: Summary, plots: Sequence[Plot], markdown: str, replayed: ReplayResult | None = None
) -> str:
    figures = "\n".join(
        f'<figure id="{p.key}"><img alt="{html.escape(p.title)}" '
        f'src="data:image/png;base64,{base64.b64encode(p.png).decode("ascii")}">'
        f"<figcaption><b>{html.escape(p.title)}.</b> {html.escape(p.how_to_read)}</figcaption>"
        "</figure>"
        for p in plots
    )
    body = markdown_tables(markdown.removeprefix("# Route push report\n"))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>Route push report</title>"
        f"<style>{_STYLE}</style></head><body>\n"
        "<h1>Route push report</h1>\n"
        f"{headline(s, replayed)}\n<h2>Plots</h2>\n{figures}\n"
        f"<h2>Tables</h2>\n{body}\n</body></html>\n"
    )
