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


@contextmanager
def java_namesrv(lib: str, home: Path) -> Iterator[int]:
    """Runs ``NamesrvStartup`` on a free loopback port; yields the port."""
    port = free_port()
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "logback_namesrv.xml").write_text(LOGBACK)
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
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if BOOTED in line:
                break
        else:
            raise AssertionError(f"the Java name server exited with {proc.wait()}")
        yield port
    finally:
        proc.kill()
        proc.wait()
