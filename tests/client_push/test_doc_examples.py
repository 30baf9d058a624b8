"""The complete programs of README.md and docs/asyncio.md (those that run a loop) run as they
are written, against a name server over loopback, on both loops: only the address changes.

Each runs in a process of its own. A program that listens for ever (``async for change in
changes``) is ended once it has printed the route state it was shown; any other program runs to
its own end and must exit cleanly (ending it from outside would race its own shutdown).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import pytest_twisted
from support.fake_namesrv import FakeNamesrv, make_route
from support.paths import REPO_ROOT
from twisted.internet import reactor, threads

DOCS = ("README.md", "docs/asyncio.md")
WAIT_S = 60.0
"""How long a program may take to print its first line."""


def programs() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = (REPO_ROOT / doc).read_text(encoding="utf-8")
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
            runs_a_loop = "asyncio.run(" in block or "task.react(" in block
            if runs_a_loop and "Producer(" not in block:  # a producer needs a broker
                found.append((f"{doc}#{i}", block))
    return found


def test_the_docs_have_runnable_programs_for_both_loops() -> None:
    kinds = {"asyncio" if "asyncio.run(" in b else "twisted" for _, b in programs()}
    assert kinds == {"asyncio", "twisted"}


@pytest.mark.parametrize(("where", "program"), programs(), ids=[w for w, _ in programs()])
@pytest_twisted.ensureDeferred
async def test_the_program_runs_as_written(where: str, program: str) -> None:
    ns = FakeNamesrv()
    ns.listen()
    ns.set_route("TopicTest", make_route())
    source = program.replace("127.0.0.1:9876", ns.addr)
    assert source != program  # the address is the only change
    # Unbuffered, so a line printed reaches the pipe at once (the program is unchanged).
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", source], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    # A program that never prints fails the test instead of holding the run.
    watchdog = reactor.callLater(WAIT_S, proc.kill)  # type: ignore[attr-defined]
    listens_for_ever = "async for" in program
    try:
        first = await threads.deferToThread(proc.stdout.readline)  # type: ignore[union-attr]
        if listens_for_ever and proc.poll() is None:
            proc.terminate()
        _, err = await threads.deferToThread(proc.communicate)
    finally:
        if watchdog.active():
            watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            await threads.deferToThread(proc.wait)
        await ns.close()
    words = first.decode().split()
    assert words, err.decode()[-2000:]
    assert "1" in words or "TopicTest" in words  # the route's version, or its topic
    assert "Traceback" not in err.decode()
    if not listens_for_ever:
        assert proc.returncode == 0, err.decode()[-2000:]
