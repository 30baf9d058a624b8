"""What every benchmark needs to run servers as processes on loopback and talk to them."""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from protocol.frame import FrameDecoder, RemotingCommand, encode_command

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def bench_home() -> Path:
    """The home directory of the servers a benchmark starts, one per benchmark process: their
    default state files (``~/namesrv/kvConfig.json`` and the replay record) stay out of the
    real one, and survive the restarts within one run."""
    return Path(tempfile.mkdtemp(prefix="routepush-bench-home-"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def roundtrip(sock: socket.socket, cmd: RemotingCommand) -> tuple[RemotingCommand, bytes]:
    """Send ``cmd`` on a blocking socket; the response and its raw frame bytes."""
    sock.sendall(encode_command(cmd))
    decoder = FrameDecoder()
    raw = b""
    while True:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        raw += data
        out = decoder.feed(data)
        if out:
            return out[0], raw


def start_namesrv(
    port: int,
    config: Path | None = None,
    root: Path = ROOT,
    log: Path | None = None,
    *,
    log_level: str = "WARNING",
    home: Path | None = None,
    tuning: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``python -m namesrv`` (of the checkout at ``root``) on 127.0.0.1:``port``, returned once
    it accepts connections. It runs in ``root``: ``-m`` puts the working directory first on
    the import path, so from any other checkout that checkout's code would run. Its output goes
    to ``log`` (appended) when given, else to this process's; its home directory is ``home``
    (:func:`bench_home` by default). ``tuning`` is a TOML file of built-in limits the
    benchmark changes (``namesrv --tuning``); no config file may set them."""
    args = [sys.executable, "-m", "namesrv", "--listen", f"127.0.0.1:{port}"]
    if config is not None:
        args += ["--config", str(Path(config).resolve())]
    if tuning is not None:
        args += ["--tuning", str(Path(tuning).resolve())]
    out = None if log is None else log.open("ab")
    proc = subprocess.Popen(
        [*args, "--log-level", log_level],
        env=dict(os.environ, PYTHONPATH=str(root), HOME=str(home or bench_home())),
        cwd=root,
        stdout=out,
        stderr=None if out is None else subprocess.STDOUT,
    )
    if out is not None:
        out.close()
    wait_port(port)
    return proc


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
