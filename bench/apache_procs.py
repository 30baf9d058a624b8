"""Real Apache RocketMQ processes for the benchmarks: brokers and controllers from the jars
``tools/rocketmq_jars.py`` resolves, mqadmin, the stock Java producer
(``bench/FailoverProducer.java``), and the per-send lines producers print
(``OK|FAIL SEQ START_MS END_MS DETAIL``)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local_processes import free_port

HERE = Path(__file__).resolve().parent

JVM = ["-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=512m", "-XX:+UseG1GC"]


def now_ms() -> float:
    return time.time() * 1000.0


# -- Apache processes ----------------------------------------------------------------------------


def bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def broker_port(taken: set[int]) -> int:
    """A port P with P-2 (the broker's VIP channel) and P+1 (its HA port) free as well, none of
    the three in ``taken`` (the ports of brokers not listening yet), to which they are added."""
    while True:
        port = free_port()
        ports = {port - 2, port, port + 1}
        if port > 1100 and not ports & taken and bindable(port - 2) and bindable(port + 1):
            taken |= ports
            return port


@dataclass
class Java:
    lib: Path
    home: Path

    def start(self, main: str, conf: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                "java", *JVM, f"-Duser.home={self.home}", f"-Drocketmq.home.dir={self.home}",
                "-cp", f"{self.lib}/*", main, *extra, "-c", str(conf),
            ],
            stdout=log.open("ab"), stderr=subprocess.STDOUT,
            env=dict(os.environ, ROCKETMQ_HOME=str(self.home)),
        )  # fmt: skip

    def mqadmin(self, *args: str) -> str:
        out = subprocess.run(
            [
                "java", "-Xmx256m", f"-Duser.home={self.home}", "-cp", f"{self.lib}/*",
                "org.apache.rocketmq.tools.command.MQAdminStartup", *args,
            ],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        return out.stdout


@dataclass
class Server:
    """A server process on 127.0.0.1:``port``: its configuration and its log."""

    port: int
    conf: Path | None
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class Broker(Server):
    conf: Path


def new_broker(run_dir: Path, i: int, taken: set[int], props: dict[str, Any]) -> Broker:
    """Broker ``i`` of a run, not started: its port (see ``broker_port``), a store under
    ``run_dir`` with small mapped files, loopback, no auto-created topics, then ``props``."""
    port = broker_port(taken)
    store = run_dir / f"broker{i}"
    store.mkdir()
    conf = {
        "listenPort": port,
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": store,
        "storePathCommitLog": store / "commitlog",
        "mappedFileSizeCommitLog": 64 * 1024 * 1024,
        "mappedFileSizeConsumeQueue": 300_000 * 20 // 10,
        "autoCreateTopicEnable": "false",
        **props,
    }
    path = write_props(run_dir / f"broker{i}.properties", conf)
    return Broker(port, path, run_dir / f"broker{i}.log")


def write_props(path: Path, props: dict[str, Any]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def wait_log(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:]
    raise SystemExit(f"{log.name}: no {text!r} within {timeout:g} s:\n{tail}")


@dataclass
class Send:
    ok: bool
    start_ms: float
    end_ms: float
    detail: str
    seq: int = 0


@dataclass
class SendLog:
    """One producer's per-send lines (``OK|FAIL SEQ START_MS END_MS DETAIL``), read in a
    thread from its process."""

    name: str
    proc: subprocess.Popen[str]
    sends: list[Send] = field(default_factory=list)
    started_ms: float = 0.0

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            parts = line.rstrip("\n").split(" ", 4)
            if parts[0] == "started":
                self.started_ms = float(parts[1])
            elif parts[0] in ("OK", "FAIL") and len(parts) >= 4:
                detail = parts[4] if len(parts) > 4 else ""
                send = Send(
                    parts[0] == "OK", float(parts[2]), float(parts[3]), detail, int(parts[1])
                )
                self.sends.append(send)

    def first_ok_after(self, t_ms: float) -> float | None:
        """When the first send started at or after ``t_ms`` succeeded (an answer to a send
        made before it may still arrive from the killed broker's socket)."""
        ends = [s.end_ms for s in list(self.sends) if s.ok and s.start_ms >= t_ms]
        return min(ends) if ends else None

    def failures(self, since_ms: float, until_ms: float) -> list[Send]:
        return [s for s in list(self.sends) if not s.ok and since_ms <= s.end_ms < until_ms]

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def tree_commit(tree: Path) -> str:
    """The commit of the tree at ``tree`` (``+dirty`` with uncommitted changes)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(tree), "diff", "--quiet", "HEAD"]).returncode
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def jar_lib(cache: str, version: str, *modules: str) -> Path:
    """``CACHE/VERSION/lib``, once it holds every ``rocketmq-MODULE`` jar named."""
    lib = Path(cache).expanduser() / version / "lib"
    missing = [m for m in modules if not any(lib.glob(f"rocketmq-{m}-*.jar"))]
    if missing:
        raise SystemExit(
            f"no rocketmq-{missing[0]} jar in {lib}: resolve the jars first:\n"
            f"  python tools/rocketmq_jars.py --cache {cache} {version}:{','.join(modules)}"
        )
    return lib


def compile_java_producer(lib: Path) -> Path:
    """``bench/FailoverProducer.java`` compiled beside ``lib`` (again when the source is newer);
    the class directory."""
    classes = lib.parent / "failover-classes"
    source = HERE / "FailoverProducer.java"
    target = classes / "FailoverProducer.class"
    if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-d", str(classes), "-cp", f"{lib}/*", str(source)], check=True)
    return classes


def java_producer(
    lib: Path,
    name: str,
    namesrv: str,
    topic: str,
    interval_ms: int,
    run_dir: Path,
    *jvm: str,
) -> SendLog:
    """Apache's producer with its defaults (``FailoverProducer``), ``namesrv`` being upstream's
    ``namesrvAddr`` (``;``-separated); its stderr goes to ``run_dir/NAME.log``."""
    classes = compile_java_producer(lib)
    proc = subprocess.Popen(
        [
            "java", "-Xmx256m", *jvm, f"-Duser.home={run_dir / name}", "-cp",
            f"{classes}:{lib}/*", "FailoverProducer", namesrv, topic, str(interval_ms),
        ],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=(run_dir / f"{name}.log").open("w"), text=True,
    )  # fmt: skip
    return SendLog(name, proc)


def stop_processes(procs: list[subprocess.Popen[Any]], timeout: float = 30.0) -> None:
    """SIGTERM to every process still running, then SIGKILL to those not gone in ``timeout``."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
