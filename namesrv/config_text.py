"""A config written as text, all of it from the declarations in ``namesrv.config``.

- ``config_toml``: a config as TOML with every setting (what ``namesrv -p -c FILE`` prints, and
  the file ``namesrv --config`` loads to run the same way); ``keys_toml``: only some keys.
- ``config_properties``: upstream's keys with their values, as upstream's ``mqnamesrv -p``.
- ``default_toml`` and ``docs_tables``: the commented default file shipped with the package
  (``default_config.toml``) and the settings tables of ``docs/config.md``; ``python -m
  namesrv.config_text --write`` rewrites both, ``--check`` fails when either differs.

Tuning values are never written: a config file may not set them. Secrets (declared
``secret``) print as ``SECRET_MASK``: the output is for reading and sharing.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import MISSING, Field, fields
from pathlib import Path
from typing import Any

from namesrv.config import NamesrvConfig
from namesrv.config_setting import Setting, declared, is_section, show_range
from namesrv.properties import upstream_properties

SECRET_MASK = "********"
WIDTH = 99
GENERATE = "python -m namesrv.config_text --write"
BEGIN = "<!-- settings: generated from namesrv/config.py by `{}`; edit the declarations -->"
END = "<!-- end of generated settings -->"
HEADER = f"""\
Name-server configuration: every setting with its default. `namesrv --config THIS_FILE` reads
it; delete what you do not change. An unknown key, a wrong type or an out-of-range value stops
start-up with a message naming the key. docs/config.md explains each section.
Generated from the declarations in namesrv/config.py by `{GENERATE}`."""


def toml_value(value: Any) -> str:
    """A value as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string: same escapes
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _comment(text: str, indent: str = "") -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, WIDTH - 2 - len(indent))]


def _settings(obj: Any) -> list[Field[Any]]:
    """The fields of ``obj`` a config file may set, sections and arrays of tables included."""
    return [f for f in fields(obj) if not f.metadata.get("tuning")]


def _shown(f: Field[Any], value: Any) -> str:
    secret = f.metadata.get("secret") and value
    return toml_value(SECRET_MASK if secret else value)


def _table(lines: list[str], name: str, obj: Any, notes: Mapping[str, str], array: bool) -> None:
    own = [f for f in _settings(obj) if not is_section(f) and "item" not in f.metadata]
    lines.append(f"[[{name}]]" if array else f"[{name}]")
    for f in own:
        lines.extend(f"# {part}" for part in notes.get(f"{name}.{f.name}", "").splitlines())
        lines.append(f"{f.name} = {_shown(f, getattr(obj, f.name))}")
    lines.append("")
    for f in _settings(obj):
        value = getattr(obj, f.name)
        if is_section(f):
            _table(lines, f"{name}.{f.name}", value, notes, False)
        elif "item" in f.metadata:
            for item in value:
                _table(lines, f"{name}.{f.name}", item, notes, True)


def config_toml(
    config: NamesrvConfig, notes: Mapping[str, str] | None = None, header: str = ""
) -> str:
    """``config``'s settings as TOML, secrets masked; ``notes`` (dotted key to text) as
    comments above their keys, and ``header`` as a comment on top."""
    lines = [f"# {part}" for part in header.splitlines()]
    if lines:
        lines.append("")
    for f in fields(config):
        _table(lines, f.name, getattr(config, f.name), notes or {}, False)
    return "\n".join(lines).rstrip() + "\n"


def keys_toml(
    values: Mapping[str, Any], notes: Mapping[str, str] | None = None, header: str = ""
) -> str:
    """Only the dotted keys of ``values`` (``push.tick_interval_ms``), under their tables in
    the order given, each preceded by its note: merging the file into a config changes those
    keys and no other."""
    lines = [f"# {part}" for part in header.splitlines()]
    tables: dict[str, list[str]] = {}
    for key, value in values.items():
        table, _, name = key.rpartition(".")
        body = tables.setdefault(table, [])
        body.extend(f"# {part}" for part in (notes or {}).get(key, "").splitlines())
        body.append(f"{name} = {toml_value(value)}")
    for table, body in tables.items():
        lines += ["", f"[{table}]", *body]
    return "\n".join(lines).strip() + "\n"


def config_properties(config: NamesrvConfig, title: str = "") -> str:
    """``config``'s upstream keys as ``key=value`` lines (a ``namesrv.properties``)."""
    lines = [f"# {part}" for part in title.splitlines()]
    lines.extend(f"{key}={value}" for key, value in upstream_properties(config))
    return "\n".join(lines) + "\n"


def _about(s: Setting, indent: str = "") -> list[str]:
    """A setting's doc as comment lines, then its values, upstream key and run-time note."""
    notes = [part for part in (show_range(s), s.upstream and f"upstream: {s.upstream}") if part]
    if s.runtime:
        notes.append("changes at run time (UPDATE_NAMESRV_CONFIG)")
    lines = _comment(s.doc.rstrip("."), indent)
    if notes:
        lines.append(f"{indent}# ({'; '.join(notes)})")
    return lines


def _default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    assert f.default_factory is not MISSING
    return f.default_factory()


def _default_table(lines: list[str], name: str, cls: type, doc: str) -> None:
    lines += ["", *_comment(doc), f"[{name}]"]
    nested: list[Field[Any]] = []
    for f in _settings(cls):
        if is_section(f):
            nested.append(f)
        elif "item" in f.metadata:
            lines += _comment(declared(f).doc + ", e.g.")
            lines.append(f"# [[{name}.{f.name}]]")
            for sub in _settings(f.metadata["item"]):
                s = declared(sub)
                example = s.example if s.example is not None else _default(sub)
                lines += _about(s, "# ")
                lines.append(f"# {sub.name} = {toml_value(example)}")
        else:
            lines += _about(declared(f))
            lines.append(f"{f.name} = {toml_value(_default(f))}")
    for f in nested:
        _default_table(lines, f"{name}.{f.name}", _default(f).__class__, f.metadata["doc"])


def default_toml() -> str:
    """The commented default config: every setting, its default, doc and range."""
    lines = [f"# {line}" for line in HEADER.splitlines()]
    for f in fields(NamesrvConfig):
        _default_table(lines, f.name, _default(f).__class__, f.metadata["doc"])
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _rows(name: str, cls: type, want_tuning: bool, out: list[str]) -> None:
    for f in fields(cls):
        if is_section(f):
            if not want_tuning:
                out.append(f"| `[{name}.{f.name}]` | | | {_cell(f.metadata['doc'])}. |")
            _rows(f"{name}.{f.name}", _default(f).__class__, want_tuning, out)
            continue
        s = declared(f)
        if s.tuning != want_tuning:
            continue
        values = _cell(show_range(s))
        doc = _cell(s.doc.rstrip(".") + ".")
        if s.upstream:
            doc += f" Upstream: `{s.upstream}`."
        if s.runtime:
            doc += " Changes at run time."
        default = "none" if "item" in f.metadata else f"`{_cell(toml_value(_default(f)))}`"
        out.append(f"| `{name}.{f.name}` | {default} | {values} | {doc} |")


def docs_tables() -> str:
    """The settings tables of ``docs/config.md``: a table per section, then the accounts'
    keys, then the built-in limits (tuning), each from its declaration."""
    out = [BEGIN.format(GENERATE), ""]
    head = ["| key | default | values | meaning |", "| --- | --- | --- | --- |"]
    for f in fields(NamesrvConfig):
        out += [f"### `[{f.name}]`: {f.metadata['doc']}", "", *head]
        _rows(f.name, _default(f).__class__, False, out)
        out.append("")
    from namesrv.config import AclAccount

    out += ["### `[[acl.accounts]]`: one table per access key", "", *head]
    _rows("acl.accounts[]", AclAccount, False, out)
    out += [
        "",
        "### Built-in limits",
        "",
        "Internal tuning: the server's own working figures, not settings. A config file that "
        "sets one is refused (exit 2) like an unknown key; tests and benchmarks override them "
        "(`namesrv.config.from_mapping`, or `namesrv --tuning FILE`).",
        "",
        "| name | value | values | why |",
        "| --- | --- | --- | --- |",
    ]
    for f in fields(NamesrvConfig):
        _rows(f.name, _default(f).__class__, True, out)
    out += ["", END]
    return "\n".join(out)


DOCS = Path(__file__).resolve().parents[1] / "docs" / "config.md"
DEFAULT_TOML = Path(__file__).resolve().parent / "default_config.toml"


def docs_with_tables(text: str) -> str:
    """``docs/config.md``'s text with its generated region replaced by :func:`docs_tables`."""
    start = text.index(BEGIN.format(GENERATE))
    end = text.index(END, start) + len(END)
    return text[:start] + docs_tables() + text[end:]


def stale_files(root: Path = DOCS.parents[1]) -> list[Path]:
    """The generated files of the checkout at ``root`` whose committed text differs from what
    the declarations give. The root is a parameter because an installed package has no
    ``docs/`` beside it: a test names its checkout."""
    stale = []
    default = root / "namesrv" / DEFAULT_TOML.name
    if default.read_text(encoding="utf-8") != default_toml():
        stale.append(default)
    path = root / "docs" / DOCS.name
    docs = path.read_text(encoding="utf-8")
    if docs != docs_with_tables(docs):
        stale.append(path)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m namesrv.config_text",
        description="Write (or check) namesrv/default_config.toml and the settings tables of "
        "docs/config.md from the declarations in namesrv/config.py.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the generated files")
    args = parser.parse_args(argv)
    if args.write:
        DEFAULT_TOML.write_text(default_toml(), encoding="utf-8")
        DOCS.write_text(docs_with_tables(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    stale = stale_files()
    for path in stale:
        print(f"{path.name} differs from the config declarations: run `{GENERATE}`")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
