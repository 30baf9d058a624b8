"""``report.html``: one self-contained page (plots embedded as PNG data URIs, no scripts, no
external files) with the headline figures, the plots and the Markdown report's tables."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence

from namesrv_pipeline.report.headline import headline
from namesrv_pipeline.report.plot_kit import Plot
from namesrv_pipeline.report.replay_model import ReplayResult
from namesrv_pipeline.report.summary import Summary
from namesrv_pipeline.report.tuning import Targets

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1000px;color:#222;line-height:1.45;padding:0 1em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.2em .6em}
th{background:#f3f3f3}td.r,th.r{text-align:right}figure{margin:1.5em 0}
figure img{max-width:100%;border:1px solid #ddd}figcaption{font-size:.92em;color:#444}
.head{border:2px solid #ccc;border-radius:6px;padding:.6em 1em}.head>b{font-size:1.5em;
display:block}.head.met{border-color:#2a2}.head.missed{border-color:#c22}code{background:#f3f3f3}
"""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def headline_html(s: Summary, replayed: ReplayResult | None = None) -> str:
    """The headline (``namesrv_pipeline.report.headline``): the target's figure, met or missed, and
    the replay's verdict with its model error."""
    h = headline(s, replayed, Targets())
    state = {True: "met", False: "missed", None: "unknown"}[h.met]
    notes = "".join(f"<p>{_inline(n)}</p>" for n in h.notes)
    stale = f"<p><b>{html.escape(h.staleness)}</b></p>" if h.staleness else ""
    return (
        f'<div class="head {state}"><b>{html.escape(h.figure)}</b>'
        f"<p>{html.escape(h.scope)}</p>{stale}<p><b>{html.escape(h.replay)}</b></p>{notes}</div>"
    )


def _inline(text: str) -> str:
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"\*(.+?)\*", r"<i>\1</i>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def markdown_tables(md: str) -> str:
    """The subset of Markdown ``markdown.render`` writes: headings, paragraphs, pipe tables."""
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


def _figure(p: Plot) -> str:
    """One plot with its caption; a plot without a picture (a what-if key the journal cannot
    judge) is its caption alone."""
    image = (
        f'<img alt="{html.escape(p.title)}" '
        f'src="data:image/png;base64,{base64.b64encode(p.png).decode("ascii")}">'
        if p.png
        else ""
    )
    caption = f"<b>{html.escape(p.title)}.</b> {html.escape(p.how_to_read)}"
    return f'<figure id="{p.key}">{image}<figcaption>{caption}</figcaption></figure>'


def render_html(
    s: Summary, plots: Sequence[Plot], markdown: str, replayed: ReplayResult | None = None
) -> str:
    figures = "\n".join(_figure(p) for p in plots)
    # The Markdown's headline is the page's own, above the plots.
    body = markdown_tables("## " + markdown.split("\n## ", 1)[-1])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>Route push report</title>"
        f"<style>{_STYLE}</style></head><body>\n"
        "<h1>Route push report</h1>\n"
        f"{headline_html(s, replayed)}\n<h2>Plots</h2>\n{figures}\n"
        f"<h2>Tables</h2>\n{body}\n</body></html>\n"
    )
