"""Apache's own Java name server, run from a directory of RocketMQ jars, for side-by-side tests."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOGBACK = '<configuration><root level="OFF"/></configuration>\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


BOOTED = "The Name Server boot success"
"""What ``NamesrvStartup`` prints once it serves."""


BIND_CLASH = "BindException"
"""In its output when the port was taken between ``free_port`` and its bind."""


def _launch(lib: str, home: Path) -> tuple[subprocess.Popen[str], int] | None:
    """``NamesrvStartup`` on a free port once it serves; None when the port was taken meanwhile."""
    port = free_port()
    conf = home / "namesrv.properties"
    conf.write_text(f"listenPort={port}\n")
    proc = subprocess.Popen(
        [
            "java",
            "-Xms256m",
            "-Xmx512m",
            f"-Duser.home={home}",
            f"-Drocketmq.home.dir={home}",
            "-cp",
            f"{lib}/*",
            "org.apache.rocketmq.namesrv.NamesrvStartup",
            "-c",
            str(conf),
        ],
        env=dict(os.environ, ROCKETMQ_HOME=str(home)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    said = []
    for line in proc.stdout:  # type: ignore[union-attr]
        if BOOTED in line:
            return proc, port
        said.append(line)
    code = proc.wait()
    if any(BIND_CLASH in line for line in said):
        return None
    raise AssertionError(f"the Java name server exited with {code}: {''.join(said)[-2000:]}")


@contextmanager
def java_namesrv(lib: str, home: Path) -> Iterator[int]:
    """Runs ``NamesrvStartup`` on a free loopback port (another one if that was taken before
    it bound it); yields the port."""
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "logback_namesrv.xml").write_text(LOGBACK)
    for _ in range(3):
        launched = _launch(lib, home)
        if launched is not None:
            break
    else:
        raise AssertionError("no free port stayed free for the Java name server")
    proc, port = launched
    try:
        yield port
    finally:
        proc.kill()
        proc.wait()
