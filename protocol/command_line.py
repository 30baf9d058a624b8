"""What every command of the package shares in its ``--help``: the version and one way of
stating defaults.

A default is stated as ``[default: X]`` at the end of an option's help, as click's
``show_default`` writes it (``namesrv-admin``), so every console script reads the same.
"""

from __future__ import annotations

import argparse

from protocol.version import version_line

DEFAULT_MARK = "[default:"


class DefaultsHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``[default: X]`` to the help of an option with a default (flags and empty lists
    excepted; help that states its default already is left as it is). Descriptions and
    epilogs keep their line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            DEFAULT_MARK in text
            or default is None
            or default is argparse.SUPPRESS
            or isinstance(default, bool)
            or default in ([], "")
            or not action.option_strings
        ):
            return text
        return f"{text} {DEFAULT_MARK} %(default)s]"


def add_version(parser: argparse.ArgumentParser, prog: str) -> None:
    """``--version``: the package version."""
    parser.add_argument(
        "--version",
        action="version",
        version=version_line(prog),
        help="print the package version and exit",
    )
