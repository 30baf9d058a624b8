"""A real Apache RocketMQ 5.x proxy (``rocketmq-proxy``, cluster mode) and the official gRPC Java
client (``rocketmq-client-java``) sending through it, for the interop tests and the benchmarks.

The proxy runs from the 5.3.3 jars ``tools/rocketmq_jars.py`` resolves (its default sets hold
``rocketmq-proxy``) with a config file of its own: cluster mode, the given name server, its gRPC
and remoting ports bound free, upstream's defaults for everything else. The client is the
self-contained ``rocketmq-client-java`` jar of its own set. Both paths are passed in, so a
benchmark with another cache uses the same code.

``GrpcProbe`` (``tests/interop/GrpcProbe.java``) prints one line per send:
``OK SEQ START_MS END_MS TOPIC MESSAGE_ID QUEUE_ID OFFSET`` or
``FAIL SEQ START_MS END_MS TOPIC WHY``; ``ProbeSends`` reads them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support.apache_rocketmq import AVAILABLE, LIB, cached_lib, compile_against, end_input, stop
from support.paths import REPO_ROOT

CLIENT_LIB = cached_lib("5.2.0", "ROCKETMQ_GRPC_CLIENT_LIB_DIR")
"""The gRPC Java client's jar directory (its own set in the jar cache), or empty."""
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
STARTED = "rocketmq-proxy startup successfully"
"""What the proxy prints on stdout once its gRPC and remoting servers run."""
BIND_CLASH = "BindException"
PROXY_JVM = ["-Xms128m", "-Xmx384m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC"]
PROBE_JVM = ["-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
PROBE_SOURCE = REPO_ROOT / "tests" / "interop" / "GrpcProbe.java"
ROUTE_RELOAD_FAILED = "reload topic route from namesrv. topic: "
"""The proxy's log line when a refresh of a cached route failed and it kept the old route."""


def has_proxy(lib: str | Path) -> bool:
    """Whether ``lib`` (a 5.x jar directory) holds the proxy."""
    return bool(lib) and any(Path(lib).glob("rocketmq-proxy-*.jar"))


def has_grpc_client(lib: str | Path) -> bool:
    return bool(lib) and any(Path(lib).glob("rocketmq-client-java-*.jar"))


def require_jars() -> None:
    """Skips the calling test module unless the 5.x jars hold the proxy and the gRPC client's
    jar is at hand; under CI (which resolved them first) fails instead."""
    if AVAILABLE and has_proxy(LIB) and CLIENT_LIB:
        return
    if os.environ.get("CI"):
        raise RuntimeError("CI: rocketmq-proxy (5.3.3 set) or rocketmq-client-java jars missing")
    pytest.skip(
        "rocketmq-proxy and rocketmq-client-java jars and a JDK are needed: "
        "run python tools/rocketmq_jars.py",
        allow_module_level=True,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


@dataclass
class Proxy:
    """A running proxy: its process, where it listens, its home (logs under ``logs/``)."""

    proc: subprocess.Popen[bytes]
    grpc_port: int
    remoting_port: int
    home: Path

    @property
    def endpoint(self) -> str:
        """What a gRPC client's ``setEndpoints`` takes."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def stdout(self) -> Path:
        return self.home / "proxy.out"

    def log_text(self) -> str:
        """The proxy's own log (``RocketmqProxy``), empty before it wrote one."""
        path = self.home / "logs" / "rocketmqlogs" / "proxy.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def route_reload_failures(self, topic: str) -> list[str]:
        """The proxy's log lines saying a refresh of ``topic``'s cached route failed (and the
        cached route was kept), each with the first line of the error after it."""
        lines = self.log_text().splitlines()
        marker = ROUTE_RELOAD_FAILED + topic
        return [
            line + " | " + (lines[i + 1] if i + 1 < len(lines) else "")
            for i, line in enumerate(lines)
            if line.rstrip().endswith(marker)
        ]


def proxy_config(namesrv: str, grpc_port: int, remoting_port: int) -> dict[str, object]:
    """The proxy's JSON config: cluster mode against ``namesrv``, the two ports; nothing else
    set, so every other value is upstream's default."""
    return {
        "proxyMode": "cluster",
        "namesrvAddr": namesrv,
        "grpcServerPort": grpc_port,
        "remotingListenPort": remoting_port,
    }


def start_proxy(
    lib: str | Path,
    workdir: Path,
    namesrv: str,
    *,
    name: str = "proxy",
    jvm: tuple[str, ...] = (),
    timeout: float = 180.0,
) -> Proxy:
    """A cluster-mode proxy on free ports, returned once it said it started and its gRPC port
    accepts; started again on other ports when one was taken between choosing and binding.
    ``jvm``: extra JVM options (e.g. ``-javaagent:...``)."""
    text = ""
    for attempt in range(3):
        home = workdir / f"{name}-{attempt}"
        home.mkdir(parents=True)
        grpc_port, remoting_port = _free_port(), _free_port()
        conf = home / "rmq-proxy.json"
        conf.write_text(json.dumps(proxy_config(namesrv, grpc_port, remoting_port)))
        out = home / "proxy.out"
        proc = subprocess.Popen(
            [
                "java", *PROXY_JVM, *jvm, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}",
                "-cp", f"{lib}/*", PROXY_MAIN, "-pm", "cluster", "-pc", str(conf),
            ],
            stdout=out.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, RMQ_PROXY_HOME=str(home), ROCKETMQ_HOME=str(home)),
        )  # fmt: skip
        proxy = Proxy(proc, grpc_port, remoting_port, home)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            text = out.read_text(errors="replace")
            if STARTED in text and _accepts(grpc_port):
                return proxy
            time.sleep(0.2)
        stop(proc)
        text = out.read_text(errors="replace") + proxy.log_text()[-3000:]
        if BIND_CLASH not in text:
            break
    raise AssertionError(f"the proxy did not start: {text[-3000:]}")


def compile_probe(client_lib: str | Path, classes: Path) -> Path:
    """``GrpcProbe`` compiled against the gRPC client into ``classes`` (again when the source
    is newer than the class)."""
    target = classes / "GrpcProbe.class"
    if not target.exists() or target.stat().st_mtime < PROBE_SOURCE.stat().st_mtime:
        compile_against(PROBE_SOURCE, client_lib, classes)
    return classes


@dataclass
class Send:
    ok: bool
    seq: int
    start_ms: float
    end_ms: float
    topic: str
    detail: str
    """OK: ``MESSAGE_ID QUEUE_ID OFFSET``; FAIL: the exception and its message."""

    @property
    def message_id(self) -> str:
        return self.detail.split(" ", 1)[0] if self.ok else ""


@dataclass
class ProbeSends:
    """A running ``GrpcProbe`` and every send it reported, read on a thread."""

    proc: subprocess.Popen[str]
    stderr: Path
    sends: list[Send] = field(default_factory=list)
    started_ms: float = 0.0
    cond: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:  # type: ignore[union-attr]
            parts = raw.rstrip("\n").split(" ", 5)
            with self.cond:
                if parts[0] == "started" and len(parts) == 2:
                    self.started_ms = float(parts[1])
                elif parts[0] in ("OK", "FAIL") and len(parts) >= 5:
                    self.sends.append(
                        Send(
                            parts[0] == "OK", int(parts[1]), float(parts[2]), float(parts[3]),
                            parts[4], parts[5] if len(parts) > 5 else "",
                        )
                    )  # fmt: skip
                self.cond.notify_all()

    def snapshot(self, topic: str | None = None) -> list[Send]:
        with self.cond:
            return [s for s in self.sends if topic is None or s.topic == topic]

    def wait(self, check: Callable[[list[Send]], bool], timeout: float) -> bool:
        """Waits up to ``timeout`` s until ``check(sends)`` holds; whether it did."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not check(self.sends):
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return check(self.sends)
                self.cond.wait(min(left, 0.5))
            return True

    def send_to(self, topic: str) -> None:
        """One more send, to ``topic``, beside the stream."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(topic + "\n")
        self.proc.stdin.flush()

    def first_ok_after(self, t_ms: float, topic: str | None = None) -> Send | None:
        """The first send started at or after ``t_ms`` that succeeded (by its answer's time)."""
        oks = [s for s in self.snapshot(topic) if s.ok and s.start_ms >= t_ms]
        return min(oks, key=lambda s: s.end_ms) if oks else None

    def failures(self, since_ms: float, until_ms: float, topic: str | None = None) -> list[Send]:
        return [s for s in self.snapshot(topic) if not s.ok and since_ms <= s.end_ms < until_ms]

    def stop(self) -> None:
        end_input(self.proc)


def start_probe(
    client_lib: str | Path,
    classes: Path,
    home: Path,
    endpoint: str,
    topic: str,
    interval_ms: int,
) -> ProbeSends:
    """``GrpcProbe`` sending to ``topic`` through the proxy at ``endpoint`` every
    ``interval_ms``; its stderr and the client's own logs stay under ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    stderr = home / "probe.err"
    proc = subprocess.Popen(
        [
            "java", *PROBE_JVM, f"-Duser.home={home}", f"-Drocketmq.log.root={home}",
            "-cp", f"{classes}:{client_lib}/*", "GrpcProbe", endpoint, topic, str(interval_ms),
        ],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr.open("w"), text=True,
    )  # fmt: skip
    return ProbeSends(proc, stderr)
