"""How a config value is declared: once, with everything said about it.

A field of a config section is declared with :func:`setting`: its default, one line of doc, its
range or choices, its upstream ``namesrv.properties`` key, whether it is internal tuning. From
that one declaration the server validates a file, maps upstream's keys, answers
GET_NAMESRV_CONFIG, and ``namesrv.config_text`` writes the commented default TOML and the
tables of ``docs/config.md``.

*Tuning* values are the server's own working figures (slice sizes, cache bytes, per-turn
budgets, protocol sanity bounds): fixed for an operator, so a config file that sets one is
refused like an unknown key, and neither the printed config nor the docs list them as settings.
They stay fields of their section so the code reads them where it reads any setting, and
:func:`namesrv.config.from_mapping` (tests, benchmarks, embedding programs) may override them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

Bound = int | float | str | tuple[int | float | str, ...]
"""A range end: a number, a sibling key's name (its value), or a tuple of those (the least)."""
NO_CEILING = 2**62
"""The upper end of a range declared without one."""


class ConfigError(ValueError):
    """The configuration file or a value in it is not acceptable."""


@dataclass(frozen=True, slots=True)
class Setting:
    """What one declaration says about a config value (see :func:`setting`)."""

    doc: str
    low: Bound | None = None
    high: Bound | None = None
    zero_off: bool = False
    """0 is accepted outside ``low .. high`` and turns the thing off."""
    choices: tuple[str, ...] = ()
    check: Callable[[str, Any], None] | None = None
    """Called with the dotted key and the value; raises :class:`ConfigError`."""
    upstream: str = ""
    """The upstream ``namesrv.properties`` key standing for this value, if any."""
    runtime: bool = False
    """UPDATE_NAMESRV_CONFIG may change it while the server runs."""
    path: bool = False
    """A file or directory path: ``~`` (and upstream's ``${user.home}``) expanded."""
    tuning: bool = False
    secret: bool = False
    example: Any = None
    """Shown in the commented example of an array of tables (``[[acl.accounts]]``)."""


def setting(default: Any, doc: str, **kw: Any) -> Any:
    """A config field: ``default`` (a list is copied per instance), ``doc`` and the
    :class:`Setting` keywords."""
    declared = Setting(doc, **kw)
    metadata = {"setting": declared, "secret": declared.secret, "tuning": declared.tuning}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def tuning(default: Any, doc: str, **kw: Any) -> Any:
    """A tuning field (see the module's doc): ``doc`` says why the value is what it is."""
    return setting(default, doc, tuning=True, **kw)


def section(cls: type, doc: str) -> Any:
    """A nested section of the config, with one line saying what it holds."""
    return field(default_factory=cls, metadata={"doc": doc})


def items(cls: type, doc: str) -> Any:
    """An array of tables (``[[acl.accounts]]``), each a ``cls``; none by default."""
    declared = Setting(doc)
    return field(default_factory=list, metadata={"setting": declared, "item": cls, "secret": False})


def declared(f: Field[Any]) -> Setting:
    """The declaration of a setting field."""
    found = f.metadata.get("setting")
    if not isinstance(found, Setting):
        raise TypeError(f"config field {f.name} is not declared with setting()")
    return found


def is_section(f: Field[Any]) -> bool:
    return "doc" in f.metadata


def walk(cls: type, prefix: str = "") -> Iterator[tuple[str, Field[Any], Setting]]:
    """Every setting of ``cls`` and its sections, with its dotted key, in declaration order
    (an array of tables counts as one setting)."""
    for f in fields(cls):
        if is_section(f):
            assert f.default_factory is not MISSING
            yield from walk(f.default_factory, f"{prefix}{f.name}.")  # type: ignore[arg-type]
        else:
            yield f"{prefix}{f.name}", f, declared(f)


def resolve(section: Any, bound: Bound) -> int | float:
    """A range end's value in ``section``."""
    if isinstance(bound, tuple):
        return min(resolve(section, b) for b in bound)
    if isinstance(bound, str):
        value = getattr(section, bound)
        assert isinstance(value, int | float)
        return value
    return bound


def check_section(section: Any, prefix: str) -> None:
    """Each value of ``section`` (not its subsections) against its declaration."""
    for f in fields(section):
        if is_section(f) or f.metadata.get("item") is not None:
            continue
        s = declared(f)
        value = getattr(section, f.name)
        name = f"{prefix}{f.name}"
        if s.choices and value not in s.choices:
            raise ConfigError(
                f"config key {name} must be one of {', '.join(s.choices)}, got {value!r}"
            )
        if s.low is not None and not (s.zero_off and value == 0):
            low = resolve(section, s.low)
            high = resolve(section, s.high) if s.high is not None else NO_CEILING
            if s.high is None and low == 1 and value < 1:
                raise ConfigError(f"config key {name} must be positive, got {value}")
            if not low <= value <= high:
                raise ConfigError(
                    f"config key {name} must be between {low} and {high}, got {value}"
                )
        if s.check is not None:
            s.check(name, value)


def show_bound(bound: Bound) -> str:
    """A range end as the docs write it: ``2^31-1``, ``max_frame_size``, ``min(a, b)``."""
    if isinstance(bound, tuple):
        return "min(" + ", ".join(show_bound(b) for b in bound) + ")"
    if isinstance(bound, str):
        return bound
    if isinstance(bound, int) and bound >= 2**20:
        for power in range(20, 64):
            if bound == 2**power:
                return f"2^{power}"
            if bound == 2**power - 1:
                return f"2^{power}-1"
    return f"{bound:,}" if isinstance(bound, int) else str(bound)


def show_range(s: Setting) -> str:
    """The accepted values in a few words (empty: any value of the type)."""
    if s.choices:
        return " | ".join(s.choices)
    if s.low is None:
        return ""
    off = "0 (off) or " if s.zero_off else ""
    if s.high is None:
        return f"{off}>= {show_bound(s.low)}"
    return f"{off}{show_bound(s.low)} .. {show_bound(s.high)}"
