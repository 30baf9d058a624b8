"""A config written back as text: what ``namesrv --print-config -c FILE`` prints.

A TOML config prints as TOML with every key (the file ``namesrv --config`` would load to run the
same way); an upstream ``namesrv.properties`` prints as upstream's keys with the values the
server runs with, as upstream's ``mqnamesrv -p`` prints them. Secrets (``metadata["secret"]``
and ACL secret keys) print as ``SECRET_MASK``: the output is for reading and sharing.
"""

from __future__ import annotations

import json
from dataclasses import Field, fields, is_dataclass
from typing import Any

from namesrv.config import NamesrvConfig
from namesrv.properties import upstream_properties

SECRET_MASK = "********"
SECRET_FIELDS = frozenset({"secret_key"})
"""Fields that hold a secret without saying so in their metadata (ACL accounts')."""


def _secret(f: Field[Any]) -> bool:
    return bool(f.metadata.get("secret")) or f.name in SECRET_FIELDS


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string: same escapes
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _scalar(f: Field[Any], value: Any) -> str:
    shown = _value(SECRET_MASK if _secret(f) and value else value)
    return f"{f.name} = {shown}"


def _table(lines: list[str], name: str, obj: Any, header: str) -> None:
    scalars, nested, arrays = [], [], []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if is_dataclass(value):
            nested.append(f)
        elif isinstance(value, list) and value and is_dataclass(value[0]):
            arrays.append(f)
        else:
            scalars.append(f)
    lines.append(header.format(name=name))
    lines.extend(_scalar(f, getattr(obj, f.name)) for f in scalars)
    lines.append("")
    for f in nested:
        _table(lines, f"{name}.{f.name}", getattr(obj, f.name), "[{name}]")
    for f in arrays:
        for item in getattr(obj, f.name):
            _table(lines, f"{name}.{f.name}", item, "[[{name}]]")


def config_toml(config: NamesrvConfig, title: str = "") -> str:
    """``config`` as TOML, every key, secrets masked; ``title`` as a comment on top."""
    lines = [f"# {part}" for part in title.splitlines()]
    if lines:
        lines.append("")
    for f in fields(config):
        _table(lines, f.name, getattr(config, f.name), "[{name}]")
    return "\n".join(lines).rstrip() + "\n"


def config_properties(config: NamesrvConfig, title: str = "") -> str:
    """``config``'s upstream keys as ``key=value`` lines (a ``namesrv.properties``)."""
    lines = [f"# {part}" for part in title.splitlines()]
    lines.extend(f"{key}={value}" for key, value in upstream_properties(config))
    return "\n".join(lines) + "\n"
