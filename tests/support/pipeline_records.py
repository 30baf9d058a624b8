"""Journal and telemetry records as the name server and clients write them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NS = "127.0.0.1:9876"


def write_lines(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for rec in records:
            fh.write((rec if isinstance(rec, str) else json.dumps(rec)) + "\n")
    return path


def journal_file(directory: Path, records: list[Any], start: int = 1, seq: int = 1) -> Path:
    return write_lines(directory / f"journal-{start}-{seq:06d}.jsonl", records)


def changed(ts: int, topic: str, version: int, notify: bool = True, kind: str = "UPDATED") -> dict:
    return {
        "ts_ms": ts,
        "event": "route_changed",
        "topic": topic,
        "version": version,
        "kind": kind,
        "causes": ["wipe_write_perm"],
        "notify": notify,
    }


def fetch(topic: str, version: int, cause: str, at: int, notified: int | None = None) -> dict:
    return {
        "topic": topic,
        "version": version,
        "exists": True,
        "cause": cause,
        "notified_at_ms": notified,
        "requested_at_ms": at - 1,
        "fetched_at_ms": at,
        "namesrv": NS,
    }
