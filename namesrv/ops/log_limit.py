"""Every log line escaped on its way out, whatever produced it.

Lines a peer can provoke are paced and their peer strings escaped by
:class:`protocol.paced_log.PacedLog`; :class:`EscapingFilter` does the escaping for every line a
handler writes, for lines that name a peer's string outside the pacer.
"""

from __future__ import annotations

import logging

from protocol.peer_text import printable

MAX_LINE_CHARS = 4_096
"""A whole log line's message is cut here by :class:`EscapingFilter`."""


class EscapingFilter(logging.Filter):
    """A handler's filter: each line's message with its control characters escaped and cut to
    ``MAX_LINE_CHARS``, so no string (a peer's name in any line) breaks a line or drives a
    terminal. Tracebacks keep their lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = printable(message, MAX_LINE_CHARS)
        if shown != message:
            record.msg, record.args = shown, None
        return True
