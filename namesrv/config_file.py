"""A config file read into a ``NamesrvConfig``: our TOML, or an upstream ``namesrv.properties``.

It sits above both config modules: ``config`` declares and validates the settings, ``properties``
maps upstream's keys onto them, and neither needs the other to read a file.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

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


def load(path: str | Path | None) -> NamesrvConfig:
    """The embedded defaults, overlaid with the file at ``path`` when one is given: our TOML,
    or an upstream ``namesrv.properties`` (by its extension, or by having no TOML table)."""
    if path is None:
        return NamesrvConfig()
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    text = data.decode("utf-8", errors="replace")
    if looks_like_properties(str(path), text):
        # Properties files are ISO-8859-1 by upstream's loader; \uXXXX escapes cover the rest.
        return from_mapping(to_mapping(parse_properties(data.decode("latin-1"))))
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    return from_mapping(raw)
