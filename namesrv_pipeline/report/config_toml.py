"""A name-server config written back as TOML that ``namesrv --config`` loads: the whole of it
(``to_toml``: every key, as the demo writes its own), or only some keys (``keys_toml``: the
tuned ones, each with its reason above it, to be merged into a config file by hand).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from namesrv.config import NamesrvConfig


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: same escapes
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _table(lines: list[str], name: str, obj: Any, notes: Mapping[str, str]) -> None:
    scalars = [f for f in fields(obj) if not is_dataclass(getattr(obj, f.name))]
    nested = [f for f in fields(obj) if is_dataclass(getattr(obj, f.name))]
    if scalars:
        lines.append(f"[{name}]")
        for f in scalars:
            note = notes.get(f"{name}.{f.name}")
            if note:
                lines.extend(f"# {part}" for part in note.splitlines())
            lines.append(f"{f.name} = {_value(getattr(obj, f.name))}")
        lines.append("")
    for f in nested:
        _table(lines, f"{name}.{f.name}", getattr(obj, f.name), notes)


def to_toml(config: NamesrvConfig, notes: Mapping[str, str] | None = None, header: str = "") -> str:
    """``notes`` maps dotted keys to a comment written above them."""
    lines = [f"# {part}" for part in header.splitlines()]
    if lines:
        lines.append("")
    for f in fields(config):
        _table(lines, f.name, getattr(config, f.name), notes or {})
    return "\n".join(lines).rstrip() + "\n"


def keys_toml(
    values: Mapping[str, Any], notes: Mapping[str, str] | None = None, header: str = ""
) -> str:
    """Only the dotted keys of ``values`` (``push.tick_interval_ms``), under their tables in
    the order given, each preceded by its note: nothing else of a config is written, so
    merging the file into one changes those keys and no other."""
    lines = [f"# {part}" for part in header.splitlines()]
    tables: dict[str, list[str]] = {}
    for key, value in values.items():
        table, _, name = key.rpartition(".")
        body = tables.setdefault(table, [])
        note = (notes or {}).get(key)
        if note:
            body.extend(f"# {part}" for part in note.splitlines())
        body.append(f"{name} = {_value(value)}")
    for table, body in tables.items():
        lines += ["", f"[{table}]", *body]
    return "\n".join(lines).strip() + "\n"
