"""docs/architecture.md names files that exist: its "where to change what" table and its room
tables are how a newcomer finds the code, so a moved or renamed module must fail here."""

from __future__ import annotations

import re

from support.paths import REPO_ROOT

ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
CHANGES = (
    "a new request code",
    "a new bound on client input",
    "a change to the notification format",
    "a new producer fault rule",
    "a new pipeline figure",
)


def _section(title: str) -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_where_to_change_what_names_existing_files_for_each_change() -> None:
    rows = {
        cells[0]: cells[1]
        for line in _section("Where to change what").splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    for change in CHANGES:
        paths = re.findall(r"`([\w/]+\.(?:py|proto))`", rows[change])
        assert paths, f"no file named for {change!r}"
        for path in paths:
            assert (REPO_ROOT / path).is_file(), f"{change!r} names {path}, which does not exist"


def test_every_module_the_room_tables_name_exists() -> None:
    for package in ("protocol", "namesrv", "client_push"):
        section = _section(f"{package}/")
        for line in section.splitlines():
            if not line.startswith("| ") or line.startswith("| ---"):
                continue
            room = line.strip("|").split("|")[0].strip().strip("`")
            base = REPO_ROOT / package
            if room.endswith("/"):
                base = base / room.rstrip("/")
            for name in re.findall(r"`([\w/]+\.py)`", line):
                candidates = [base / name, REPO_ROOT / package / name, REPO_ROOT / name]
                assert any(p.is_file() for p in candidates), f"{package}: {name} does not exist"
