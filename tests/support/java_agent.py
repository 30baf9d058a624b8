"""The route-push Java agent (``bridges/java-agent``) and ordinary Java RocketMQ applications
that run with it, for the interop tests.

The agent jar is built with Maven when it is missing. The applications are ``AgentProbe``
(``tests/interop/AgentProbe.java``), compiled once per client version: the 5.x client from
``ROCKETMQ_LIB_DIR``, the 4.9.x client from ``ROCKETMQ_LEGACY_LIB_DIR`` (both resolved into a
cache outside the repository by ``tools/rocketmq_jars.py``).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from support.apache_rocketmq import cached_lib, compile_against, end_input
from support.paths import REPO_ROOT

AGENT_DIR = REPO_ROOT / "bridges" / "java-agent"
AGENT_JAR = AGENT_DIR / "target" / "rocketmq-routepush-agent.jar"
LEGACY_LIB = cached_lib("4.9.7", "ROCKETMQ_LEGACY_LIB_DIR")
if os.environ.get("CI") and not LEGACY_LIB:
    raise RuntimeError(
        "CI: the RocketMQ 4.9.x client jars (jar cache or ROCKETMQ_LEGACY_LIB_DIR) are missing"
    )
PROBE_JVM = ["-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
NO_POLL_MS = 600_000
"""A client poll interval no test outlives: what such a client learns, it learned by push."""

_build_lock = threading.Lock()


def agent_jar() -> Path:
    """The agent jar, built (tests skipped) when missing or older than its sources."""
    with _build_lock:
        sources = [p for p in (AGENT_DIR / "src" / "main").rglob("*.java")]
        newest = max(p.stat().st_mtime for p in [*sources, AGENT_DIR / "pom.xml"])
        if not AGENT_JAR.exists() or AGENT_JAR.stat().st_mtime < newest:
            subprocess.run(
                ["mvn", "-q", "-B", "-f", str(AGENT_DIR / "pom.xml"), "-DskipTests", "package"],
                check=True,
                stdin=subprocess.DEVNULL,
                timeout=900,
            )
        return AGENT_JAR


@dataclass(frozen=True)
class AgentStatus:
    """What the agent's status command printed for one JVM (an attach, as ``jcmd`` does)."""

    text: str
    values: dict[str, str]
    """The MBean's attributes by name (``Notifications``, ``Refreshes``, ...)."""

    def count(self, name: str) -> int:
        return int(self.values.get(name, "0"))


def agent_status(pid: int) -> AgentStatus:
    """The agent's MBean in JVM ``pid``, read by the agent jar's status command."""
    done = subprocess.run(
        ["java", "-jar", str(agent_jar()), str(pid)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    rows = done.stdout.splitlines()[2:]
    values = dict(
        row.split(None, 1) for row in rows if row.strip() and not row.startswith("  client ")
    )
    return AgentStatus(done.stdout + done.stderr, values)


def compile_probe(lib: str, classes: Path) -> Path:
    """``AgentProbe`` compiled against the client jars in ``lib`` into ``classes``."""
    return compile_against(REPO_ROOT / "tests" / "interop" / "AgentProbe.java", lib, classes)


@dataclass
class Line:
    at_ms: float
    kind: str
    value: str


@dataclass
class Probe:
    """One running ``AgentProbe`` and every line it printed."""

    name: str
    proc: subprocess.Popen[str]
    log: Path
    lines: list[Line] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:  # type: ignore[union-attr]
            parts = raw.rstrip("\n").split(" ", 2)
            if len(parts) >= 2 and parts[1].isdigit():
                line = Line(float(parts[1]), parts[0], parts[2] if len(parts) > 2 else "")
                with self.cond:
                    self.lines.append(line)
                    self.cond.notify_all()

    def first(self, check: Callable[[Line], bool], timeout: float) -> Line | None:
        """The first line satisfying ``check``, waiting up to ``timeout`` seconds for it."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if check(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return None
                self.cond.wait(min(left, 0.5))

    def seen(self, check: Callable[[Line], bool]) -> bool:
        with self.cond:
            return any(check(line) for line in self.lines)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        end_input(self.proc)


def start_probe(
    name: str,
    workdir: Path,
    lib: str,
    classes: Path,
    role: str,
    namesrv: str,
    topic: str,
    group: str,
    *,
    agent: str | None = "",
    poll_ms: int = NO_POLL_MS,
) -> Probe:
    """An ``AgentProbe`` (``role`` producer or consumer); ``agent`` None runs it without the
    agent, otherwise it is the agent's argument string."""
    home = workdir / name
    home.mkdir(parents=True, exist_ok=True)
    args = ["java", *PROBE_JVM, f"-Duser.home={home}"]
    if agent is not None:
        args.append(f"-javaagent:{agent_jar()}" + (f"={agent}" if agent else ""))
    args += ["-cp", f"{classes}:{lib}/*", "AgentProbe", role, namesrv, topic, group, str(poll_ms)]
    log = home / "stderr.log"
    proc = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    return Probe(name, proc, log)
