"""The package version: the one declaration ``pyproject.toml`` and every tool's ``--version``
read."""

VERSION = "0.1.0"
PACKAGE = "rocketmq-routepush"


def version_line(prog: str) -> str:
    """What ``PROG --version`` prints."""
    return f"{prog} {VERSION} ({PACKAGE})"
