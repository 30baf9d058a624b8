"""A Spark standalone cluster on loopback: a master and workers, each a JVM of its own, started
from the installed PySpark's ``spark-class`` as an operator would start them.

Ports: the master and the workers bind port 0 and the master's log line names the port it got,
so no port is guessed and none can be taken between a check and the bind. Every process runs in
a session of its own (the executors a worker starts join it), is sent SIGKILL should this
process die first, and is killed as a group when the cluster stops.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MASTER_URL = re.compile(rb"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
WORKER_REGISTERED = b"Successfully registered with master"
START_TIMEOUT_S = 180.0
"""A JVM's start on a loaded two-core machine takes tens of seconds."""
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
"""Spark's least executor heap is 450 MiB."""

_PR_SET_PDEATHSIG = 1


def java_missing() -> str | None:
    """Why no cluster can start here, or None."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").exists():
        return None
    if shutil.which("java") is None:
        return "Java is not installed (Spark's master and workers are JVMs)"
    return None


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """Linux: SIGKILL this process when the test process dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class StandaloneCluster:
    """Where the cluster runs and how a driver reaches it."""

    root: Path
    workers: int
    master_url: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def conf_dir(self) -> Path:
        return self.root / "conf"

    def env(self) -> dict[str, str]:
        """The environment of every JVM of the cluster and of a driver run against it."""
        env = dict(os.environ)
        env.update(
            {
                "SPARK_HOME": str(spark_home()),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_CONF_DIR": str(self.conf_dir),
                "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable,
            }
        )
        for name in ("SPARK_MASTER_PORT", "SPARK_WORKER_PORT", "PYSPARK_SUBMIT_ARGS"):
            env.pop(name, None)
        return env

    def _spark_class(self, name: str, main: str, *args: str) -> Path:
        log = self.root / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), main, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env(),
                cwd=self.root,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self.processes.append(process)
        return log

    def start(self) -> None:
        self.conf_dir.mkdir(parents=True)
        # Small and local: no web UIs, no REST server; executors of one core and a small heap,
        # so two workers' executors fit a shared two-core machine.
        (self.conf_dir / "spark-defaults.conf").write_text(
            "spark.ui.enabled false\n"
            "spark.master.rest.enabled false\n"
            "spark.driver.host 127.0.0.1\n"
            "spark.driver.bindAddress 127.0.0.1\n"
            f"spark.executor.memory {EXECUTOR_MEMORY}\n"
            "spark.executor.cores 1\n"
            f"spark.cores.max {self.workers}\n"
            # Small inputs: a few shuffle partitions, not Spark's 200 tasks per shuffle.
            f"spark.sql.shuffle.partitions {2 * self.workers}\n"
        )
        master_log = self._spark_class(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
        )
        found = self._wait(master_log, MASTER_URL, self.processes[0])
        self.master_url = found.group(1).decode()
        logs = []
        for i in range(self.workers):
            work = self.root / f"work-{i}"
            work.mkdir()
            logs.append(
                self._spark_class(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
                    *("--cores", "1", "--memory", WORKER_MEMORY, "--work-dir", str(work)),
                    self.master_url,
                )
            )
        for log, process in zip(logs, self.processes[1:], strict=True):
            self._wait(log, re.compile(re.escape(WORKER_REGISTERED)), process)

    def _wait(
        self, log: Path, pattern: re.Pattern[bytes], process: subprocess.Popen[bytes]
    ) -> re.Match[bytes]:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = pattern.search(log.read_bytes())
            if found is not None:
                return found
            if process.poll() is not None:
                break
            time.sleep(0.2)
        tail = log.read_bytes()[-3000:].decode(errors="replace")
        raise RuntimeError(f"{log.name}: the JVM did not get there in time:\n{tail}")

    def stop(self) -> None:
        """SIGTERM to each process group (a worker then stops its executors), SIGKILL to what
        is left after a grace."""
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in reversed(self.processes):
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the group: executors included
            process.wait()


@contextlib.contextmanager
def standalone_cluster(root: Path, workers: int = 2) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(root, workers)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
