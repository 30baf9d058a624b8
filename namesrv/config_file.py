"""A config file read into a ``NamesrvConfig``: our TOML, or an upstream ``namesrv.properties``.

It sits above both config modules: ``config`` declares and validates the settings, ``properties``
maps upstream's keys onto them, and neither needs the other to read a file.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from namesrv.config import ConfigError, NamesrvConfig, from_mapping
from namesrv.properties import looks_like_properties, parse_properties, to_mapping


def looks_like_properties_file(path: str | Path) -> bool:
    """Whether ``load`` reads ``path`` as an upstream ``namesrv.properties`` (False when it
    cannot be read: ``load`` says why)."""
    try:
        text = Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return False
    return looks_like_properties(str(path), text)


def load(path: str | Path | None, tuning: str | Path | None = None) -> NamesrvConfig:
    """The embedded defaults, overlaid with the file at ``path`` when one is given: our TOML,
    or an upstream ``namesrv.properties`` (by its extension, or by having no TOML table).
    Tuning keys are refused there; ``tuning`` names a TOML file that may set them too (for
    benchmarks and tests: ``namesrv --tuning FILE``)."""
    raw = _raw(path) if path is not None else {}
    config = from_mapping(raw, with_tuning=False)
    if tuning is None:
        return config
    text = _read(tuning).decode("utf-8", errors="replace")
    return from_mapping(_merged(raw, _toml(tuning, text)))


def _read(path: str | Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc


def _toml(path: str | Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


def _raw(path: str | Path) -> dict[str, Any]:
    """The file's keys, TOML-shaped."""
    data = _read(path)
    text = data.decode("utf-8", errors="replace")
    if looks_like_properties(str(path), text):
        # Properties files are ISO-8859-1 by upstream's loader; \uXXXX escapes cover the rest.
        return to_mapping(parse_properties(data.decode("latin-1")))
    return _toml(path, text)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over``'s keys on ``base``, tables merged key by key."""
    out = dict(base)
    for key, value in over.items():
        below = out.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            out[key] = _merged(below, value)
        else:
            out[key] = value
    return out
