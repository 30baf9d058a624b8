"""docs/benchmarks.md stays a document a reader can follow: one section per thing measured, each
with the command that produced its figures, the commit measured and the machine's state; current
figures only (bounded in length), no tracker references (history lives in git), and every link
into it lands on a heading that exists."""

from __future__ import annotations

import re

from support.paths import REPO_ROOT

BENCHMARKS = REPO_ROOT / "docs" / "benchmarks.md"
MAX_LINES = 600
TRACKER_REFERENCE = re.compile(r"\bissues?\s+#?\d+|(?<![\w&/])#\d+\b", re.IGNORECASE)
COMMIT = re.compile(r"`[0-9a-f]{7,40}`")
MACHINE_STATE = re.compile(r"\b(quiet|loaded|shared|not recorded)\b|machine load", re.IGNORECASE)


def _text() -> str:
    return BENCHMARKS.read_text(encoding="utf-8")


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading: lower case, punctuation dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)$", _text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_stays_within_its_line_bound() -> None:
    count = len(_text().splitlines())
    assert count <= MAX_LINES, f"docs/benchmarks.md has {count} lines, the bound is {MAX_LINES}"


def test_names_no_tracker_references() -> None:
    hits = [
        f"line {number}: {line.strip()}"
        for number, line in enumerate(_text().splitlines(), start=1)
        if TRACKER_REFERENCE.search(line)
    ]
    assert hits == [], "describe what is measured, not which issue asked for it:\n" + "\n".join(
        hits
    )


def test_every_section_has_a_command_a_commit_and_the_machine_state() -> None:
    sections = _sections()
    assert len(sections) >= 8, sorted(sections)
    missing = [
        f"{title}: {what}"
        for title, body in sections.items()
        for what, present in (
            ("command", "```sh\n" in body),
            ("commit", COMMIT.search(body) is not None),
            ("machine state", MACHINE_STATE.search(body) is not None),
        )
        if not present
    ]
    assert missing == [], missing


def test_every_link_to_a_benchmarks_anchor_lands_on_a_heading() -> None:
    anchors = {_slug(match) for match in re.findall(r"^#{1,6} (.+)$", _text(), flags=re.MULTILINE)}
    own = [(BENCHMARKS, a) for a in re.findall(r"\]\(#([^)\s]+)\)", _text())]
    others = [
        (path, anchor)
        for path in REPO_ROOT.glob("**/*.md")
        if ".git" not in path.parts and path != BENCHMARKS
        for anchor in re.findall(r"benchmarks\.md#([^)\s]+)\)", path.read_text(encoding="utf-8"))
    ]
    broken = [
        f"{path.relative_to(REPO_ROOT)} -> #{anchor}"
        for path, anchor in own + others
        if anchor not in anchors
    ]
    assert own, "expected the document to link its own sections"
    assert broken == [], broken
