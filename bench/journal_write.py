"""The name server's cost of journaling a tick's route changes: one ``route_changed`` record
per change (the older form, through ``EventJournal.record``) against ``route_changes`` records
(``EventJournal.route_changed``). Prints CPU ms and bytes written per form, best of rounds.

    python bench/journal_write.py --changes 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from namesrv.ops.journal import EventJournal

NOW_MS = 1_700_000_000_000


def changes(count: int) -> list[dict[str, Any]]:
    return [
        {
            "topic": f"T{i:06d}",
            "version": 2,
            "kind": "UPDATED",
            "causes": ["wipe_write_perm"],
            "notify": True,
            "mutated_at_ms": NOW_MS - 40,
        }
        for i in range(count)
    ]


def write(items: list[dict[str, Any]], compact: bool) -> tuple[float, int]:
    """(CPU seconds, bytes on disk) of journaling ``items`` in one tick."""
    with tempfile.TemporaryDirectory() as directory:
        journal = EventJournal(
            directory, max_file_bytes=1 << 40, max_files=0, clock_ms=lambda: NOW_MS
        )
        start = time.process_time()
        if compact:
            for fields in items:
                journal.route_changed(fields)
        else:
            for fields in items:
                journal.record("route_changed", **fields)
        journal.flush()
        took = time.process_time() - start
        journal.close()
        size = sum(p.stat().st_size for p in Path(directory).iterdir())
    return took, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    opts = ap.parse_args()
    items = changes(opts.changes)
    for label, compact in (("route_changed records", False), ("route_changes records", True)):
        runs = [write(items, compact) for _ in range(opts.rounds)]
        took, size = min(runs)
        print(f"{label:>22}: {took * 1000:8.1f} ms CPU, {size / 1e6:6.2f} MB")


if __name__ == "__main__":
    main()
