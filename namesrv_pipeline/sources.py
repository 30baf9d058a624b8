"""Naming the inputs; free of Spark so the CLI can check paths before Spark starts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JournalSource:
    """One name server's journal directory; ``namesrv`` (HOST:PORT) ties it to telemetry."""

    directory: str
    namesrv: str | None = None

    @classmethod
    def parse(cls, text: str) -> JournalSource:
        """``DIR`` or ``HOST:PORT=DIR``."""
        label, sep, directory = text.partition("=")
        if sep and label and ":" in label and "/" not in label:
            return cls(directory, label)
        return cls(text)
