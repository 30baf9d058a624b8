"""Apache RocketMQ 5.x in controller mode, for the interop tests and the benchmarks: a standalone
controller (``ControllerStartup``) and two brokers of one broker name with
``enableControllerMode=true`` (upstream's quick-start settings: ``brokerId=-1``,
``brokerRole=SLAVE``; the controller elects the master), registered with a given name server,
in upstream's default cluster (the one a proxy at its defaults serves).

Every process runs from the jar directory passed in, on loopback, with its store and logs under
the given work directory; a killed broker restarts on its own ports and store, and rejoins as a
slave.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from support.apache_rocketmq import SMALL_JVM, boot_broker, cluster_info, mqadmin, stop

BOOTED = "boot success"


@dataclass
class GroupBroker:
    """One broker of the group: its ports and home stay across restarts."""

    index: int
    port: int
    home: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.home / "broker.out"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port} after {timeout:g} s")


class ControllerGroup:
    """The controller and the two brokers of ``broker_name``; ``start()`` boots them,
    ``stop()`` ends every process."""

    def __init__(
        self,
        lib: str | Path,
        workdir: Path,
        namesrv: str,
        *,
        cluster: str = "DefaultCluster",
        broker_name: str = "broker-fo",
    ) -> None:
        self.lib = str(lib)
        self.workdir = workdir
        self.namesrv = namesrv
        self.cluster = cluster
        self.broker_name = broker_name
        self.controller = ""
        self.controller_proc: subprocess.Popen[bytes] | None = None
        self.brokers: list[GroupBroker] = []

    def _java(self, main: str, home: Path, conf: Path, log: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                "java", *SMALL_JVM, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}",
                "-cp", f"{self.lib}/*", main, "-c", str(conf),
            ],
            stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, ROCKETMQ_HOME=str(home)),
        )  # fmt: skip

    def start(self) -> None:
        home = self.workdir / "controller"
        home.mkdir(parents=True)
        port = _free_port()
        self.controller = f"127.0.0.1:{port}"
        conf = home / "controller.properties"
        props = {
            "controllerDLegerGroup": "group1",
            "controllerDLegerPeers": f"n0-{self.controller}",
            "controllerDLegerSelfId": "n0",
            "controllerStorePath": home / "store",
        }
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.controller_proc = self._java(
            "org.apache.rocketmq.controller.ControllerStartup", home, conf, home / "controller.out"
        )
        _wait_port(port, timeout=120)
        for index in range(2):
            self.brokers.append(self._first_boot(index))

    def _conf(self, home: Path, port: int) -> Path:
        store = home / "store"
        props = {
            "brokerClusterName": self.cluster,
            "brokerName": self.broker_name,
            "brokerId": -1,
            "brokerRole": "SLAVE",
            "enableControllerMode": "true",
            "controllerAddr": self.controller,
            "namesrvAddr": self.namesrv,
            "listenPort": port,
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog",
            "mappedFileSizeCommitLog": 64 * 1024 * 1024,
            "mappedFileSizeConsumeQueue": 300_000 * 20 // 10,
            "autoCreateTopicEnable": "false",
        }
        conf = home / "broker.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return conf

    def _first_boot(self, index: int) -> GroupBroker:
        homes: dict[int, Path] = {}

        def launch(port: int) -> tuple[subprocess.Popen[bytes], Path]:
            home = self.workdir / f"broker{index}-{port}"
            home.mkdir(parents=True)
            homes[port] = home
            log = home / "broker.out"
            main = "org.apache.rocketmq.broker.BrokerStartup"
            return self._java(main, home, self._conf(home, port), log), log

        proc, port, _log = boot_broker(launch, timeout=180)
        return GroupBroker(index, port, homes[port], proc)

    def restart(self, broker: GroupBroker, timeout: float = 180.0) -> None:
        """``broker`` (killed) started again on its ports and store, once it says it booted."""
        start = broker.log.stat().st_size if broker.log.exists() else 0
        broker.proc = self._java(
            "org.apache.rocketmq.broker.BrokerStartup",
            broker.home,
            broker.home / "broker.properties",
            broker.log,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and broker.proc.poll() is None:
            with broker.log.open("rb") as f:
                f.seek(start)
                if BOOTED.encode() in f.read():
                    return
            time.sleep(0.2)
        raise AssertionError(f"broker {broker.addr} did not restart: {broker.log}")

    def master(self) -> str | None:
        """The master address this name server lists for the broker name now."""
        info = cluster_info(self.namesrv)
        data = info.broker_addr_table.get(self.broker_name) if info is not None else None
        return data.broker_addrs.get(0) if data is not None else None

    def by_addr(self, addr: str) -> GroupBroker:
        return next(b for b in self.brokers if b.addr == addr)

    def in_sync(self, members: int, timeout: float) -> bool:
        """Whether the controller's sync state set reaches ``members`` within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = mqadmin(
                self.workdir,
                *("getSyncStateSet", "-a", self.controller, "-b", self.broker_name),
                lib=self.lib,
            ).stdout
            if f"#SyncStateSetNums\t{members}" in out:
                return True
            time.sleep(1.0)
        return False

    def create_topic(self, topic: str, queues: int = 4) -> list[str]:
        """``topic`` on both brokers (the slave too, so a new master has it at once); what
        each answered."""
        return [
            mqadmin(
                self.workdir,
                *("updateTopic", "-b", broker.addr, "-t", topic),
                *("-r", str(queues), "-w", str(queues)),
                lib=self.lib,
            ).stdout
            for broker in self.brokers
        ]

    def stop(self) -> None:
        for broker in self.brokers:
            if broker.proc is not None:
                stop(broker.proc)
        if self.controller_proc is not None:
            stop(self.controller_proc)
