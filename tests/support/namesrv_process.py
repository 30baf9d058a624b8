"""``python -m namesrv`` as a child process, started as from an interactive shell.

A process started with SIGINT ignored (a background job, ``nohup``, some CI runners) passes
SIG_IGN on to its children, and a child that inherits it stays immune to Ctrl-C, as upstream's
convention wants: Python then installs no KeyboardInterrupt handler and Twisted no SIGINT
shutdown. Tests that stop the server with SIGINT mean Ctrl-C of a terminal, so the child gets
SIGINT's default disposition back before it starts, whatever the test runner inherited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

from support.paths import REPO_ROOT, isolated_home


def spawn_namesrv(
    *args: str, preexec_fn: Callable[[], None] | None = None
) -> subprocess.Popen[str]:
    """Start the ``namesrv`` command with ``args`` and Ctrl-C live; its stderr (the log) is a
    text pipe. ``preexec_fn`` runs in the child too, before the command starts."""

    def preexec() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if preexec_fn is not None:
            preexec_fn()

    return subprocess.Popen(
        [sys.executable, "-m", "namesrv", *args],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), HOME=str(isolated_home())),
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec,
    )
