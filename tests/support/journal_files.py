"""The journal files a server or a journal under test wrote, read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def journal_files(directory: Path) -> list[Path]:
    """``directory``'s journal files, oldest first."""
    return sorted(directory.glob("journal-*.jsonl"))


def journal_records(directory: Path, event: str | None = None) -> list[dict[str, Any]]:
    """Every record of ``directory``'s journal files in order (of ``event`` only, when given)."""
    records = [
        json.loads(line)
        for path in journal_files(directory)
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    return [r for r in records if event is None or r["event"] == event]
