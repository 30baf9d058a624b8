"""Real Apache RocketMQ processes for the interop tests: this name server as a process, an
Apache broker (``BrokerStartup``) registered with it, ``mqadmin`` and small Java probes.

The jars come from ``ROCKETMQ_LIB_DIR`` (RocketMQ 5.x and every dependency, resolved by Maven
into a cache outside the repository), by default the cache ``tools/rocketmq_jars.py`` fills (the
test run fills it first where Maven is at hand); without them, or without a JDK, the tests skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from namesrv.admin.wire import AdminClient, AdminConnectionError, Target, split_hostport
from protocol import bodies
from protocol.codes import RequestCode
from protocol.route_model import ClusterInfo
from support.paths import REPO_ROOT, isolated_home


def cached_lib(version: str, env: str) -> str:
    """``$env`` if set, else ``VERSION/lib`` of the jar cache when it was resolved whole."""
    if os.environ.get(env):
        return os.environ[env]
    cache = os.environ.get("ROCKETMQ_JAR_CACHE") or str(
        Path.home() / ".cache" / "rocketmq-routepush"
    )
    lib = Path(cache) / version / "lib"
    return str(lib) if (lib / ".resolved").exists() else ""


LIB = cached_lib("5.3.3", "ROCKETMQ_LIB_DIR")
AVAILABLE = bool(LIB) and shutil.which("javac") is not None
if os.environ.get("CI") and not AVAILABLE:
    # Under CI the test run fetched the jars first (tools/rocketmq_jars.py is strict there):
    # an interop test that would skip is a broken install step, so it fails instead.
    raise RuntimeError("CI: RocketMQ 5.x jars (the jar cache or ROCKETMQ_LIB_DIR) or javac missing")
SMALL_JVM = ["-Xms128m", "-Xmx256m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC"]


def classpath(*extra: Path) -> str:
    return ":".join([*(str(p) for p in extra), f"{LIB}/*"])


def start_namesrv(
    workdir: Path, toml: str = "", port: int = 0, *, wait_for_service_ms: int = 0
) -> tuple[subprocess.Popen[str], int]:
    """``python -m namesrv`` on 127.0.0.1, ``port`` (0: any; a port a stopped server had, to
    restart it), with ``toml`` after its ``[server]`` listen line; the process and the port it
    bound, once it listens. Its start-up window is ``wait_for_service_ms`` (off unless a test
    is about it: a topic no broker registered is then TOPIC_NOT_EXIST at once). Its log goes
    to ``namesrv.log`` in ``workdir`` (appended: a restart adds to it)."""
    config = workdir / "namesrv.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\nwait_for_service_ms = {wait_for_service_ms}\n'
        + toml
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "namesrv", "--config", str(config)],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT), HOME=str(isolated_home())),
        stderr=subprocess.PIPE,
        text=True,
    )
    log = (workdir / "namesrv.log").open("a", encoding="utf-8")
    for line in proc.stderr:  # type: ignore[union-attr]
        log.write(line)
        if "listening on 127.0.0.1:" in line:
            port = int(line.split("listening on 127.0.0.1:")[1].split()[0])
            # Keep reading the log so the pipe never fills and blocks the server.
            threading.Thread(target=_copy_lines, args=(proc.stderr, log), daemon=True).start()
            return proc, port
    log.close()
    raise AssertionError(f"the name server did not start: {workdir / 'namesrv.log'}")


def _copy_lines(source: IO[str], sink: IO[str]) -> None:
    with sink:
        for line in source:
            sink.write(line)
            sink.flush()


def stop(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def end_input(proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    """Closes the stdin of a probe that runs until EOF of its stdin, then waits for it to end;
    kills it when it has not within ``timeout`` seconds."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def broker_port() -> int:
    """A port P with P-2 (the broker's VIP channel) and P+1 (its HA port) free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port > 1100 and _bindable(port - 2) and _bindable(port + 1):
            return port
    raise AssertionError("no free port triple for a broker")


@dataclass
class Broker:
    proc: subprocess.Popen[bytes]
    addr: str
    name: str
    log: Path


BIND_CLASH = "java.net.BindException"
"""In a broker's log when one of its three ports was taken between ``broker_port`` and its bind."""


def boot_broker(
    launch: Callable[[int], tuple[subprocess.Popen[bytes], Path]],
    ready: Callable[[], bool] = lambda: True,
    timeout: float = 120.0,
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """``launch(port)`` (the process and its log) on a free port triple, until its log says it
    booted and ``ready()``; launched again on another triple when a port was taken meanwhile
    (another process's ephemeral port: the triple is only checked free, not held)."""
    for _ in range(3):
        port = broker_port()
        proc, log = launch(port)
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if "boot success" in text and ready():
                return proc, port, log
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        stop(proc)
        text = log.read_text(errors="replace")
        if BIND_CLASH not in text:
            raise AssertionError(f"the broker did not boot: {text[-2000:]}")
    raise AssertionError(f"no port triple stayed free for a broker: {text[-2000:]}")


def start_broker(
    workdir: Path,
    namesrv: str,
    name: str = "broker-a",
    *,
    cluster: str = "DefaultCluster",
    extra: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> Broker:
    """An Apache broker (small mapped files and heap, its own store under ``workdir``)
    registered with ``namesrv``; returned once it says it booted and the name server lists it."""

    def launch(port: int) -> tuple[subprocess.Popen[bytes], Path]:
        home = workdir / f"{name}-{port}"
        (home / "store").mkdir(parents=True)
        props = {
            "brokerClusterName": cluster,
            "brokerName": name,
            "brokerId": "0",
            "namesrvAddr": namesrv,
            "listenPort": str(port),
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(home / "store"),
            "storePathCommitLog": str(home / "store" / "commitlog"),
            "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
            "mappedFileSizeConsumeQueue": str(300_000 * 20 // 100),
            "autoCreateTopicEnable": "false",
            **(extra or {}),
        }
        conf = home / "broker.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log = home / "broker.out"
        proc = subprocess.Popen(
            [
                "java",
                *SMALL_JVM,
                f"-Duser.home={home}",
                f"-Drocketmq.home.dir={home}",
                "-cp",
                classpath(),
                "org.apache.rocketmq.broker.BrokerStartup",
                "-c",
                str(conf),
            ],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        return proc, log

    proc, port, log = boot_broker(launch, lambda: _listed(namesrv, name), timeout)
    return Broker(proc, f"127.0.0.1:{port}", name, log)


def cluster_info(namesrv: str) -> ClusterInfo | None:
    """GET_BROKER_CLUSTER_INFO of the (first) name server of ``namesrv``; None when it cannot
    be had (not listening, or an error answered)."""
    host, port = split_hostport(namesrv.split(";")[0])
    try:
        with AdminClient(Target(host, port, timeout_s=5)) as client:
            response = client.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    except AdminConnectionError:
        return None
    if response.code != 0:
        return None
    return bodies.decode_cluster_info(response.body)


def _listed(namesrv: str, name: str) -> bool:
    """Whether the (first) name server of ``namesrv`` lists broker ``name`` (its first
    register, which follows the boot line, has arrived)."""
    info = cluster_info(namesrv)
    return info is not None and name in info.broker_addr_table


def mqadmin(
    workdir: Path, *args: str, lib: str | Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Upstream's ``mqadmin`` (``MQAdminStartup``) with ``args``, from ``lib`` (default: the
    5.x jars); logback's chatter dropped from its output."""
    proc = subprocess.run(
        [
            "java",
            *SMALL_JVM,
            f"-Duser.home={workdir}",
            f"-Drocketmq.home.dir={workdir}",
            "-cp",
            f"{lib}/*" if lib else classpath(),
            "org.apache.rocketmq.tools.command.MQAdminStartup",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    keep = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if line.strip() and " in org.apache.rocketmq.logging." not in line
    ]
    proc.stdout = "\n".join(keep)
    return proc


def compile_java(source: Path, classes: Path) -> None:
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", classpath(), str(source)], check=True, timeout=300
    )


def compile_against(source: Path, lib: str | Path, classes: Path) -> Path:
    """``source`` (a probe) compiled against the jars in ``lib`` into ``classes``."""
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", f"{lib}/*", str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return classes


def properties_table(text: str) -> dict[str, str]:
    """``mqadmin getNamesrvConfig``'s ``key = value`` lines as a mapping."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out
