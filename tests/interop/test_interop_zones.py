"""Zone-mode lookups: this server and Apache's Java name server give the same filtered routes.

Needs ``ROCKETMQ_LIB_DIR`` with the 5.x ``rocketmq-namesrv`` jar and its dependencies (see
tests/interop/test_interop_ops.py); skipped without it.
"""

from __future__ import annotations

import shutil
import socket
import time

import pytest
from support import apache_rocketmq as apache
from support.fake_broker import register_request, topic_configs, unregister_request
from support.java_namesrv import java_namesrv
from support.namesrv_process import spawn_namesrv

from protocol import bodies
from protocol.codes import RequestCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command

pytestmark = pytest.mark.interop
LIB = apache.LIB
if not LIB or not shutil.which("java"):
    pytest.skip("ROCKETMQ_LIB_DIR (RocketMQ jars) and Java are needed", allow_module_level=True)

# Upstream refuses a broker's first register when it holds exactly one topic (it takes that for
# a single-topic update), so every broker here holds a second topic of its own.
BROKERS = [
    ("broker-a", "10.0.0.1:10911", 0, "zoneA", ("T1", "T2")),
    ("broker-b", "10.0.0.2:10911", 0, "ZONEB", ("T1", "T3")),
    ("broker-c", "10.0.0.3:10911", 0, None, ("T1",)),
    ("broker-d", "10.0.0.4:10911", 0, "zoneB", ("T1",)),
    ("broker-d", "10.0.0.5:10911", 1, "zoneB", ("T1",)),
]
LOOKUPS = [
    (topic, mode, zone)
    for topic in ("T1", "T2", "T3")
    for mode, zone in (
        ("true", "zoneA"),
        ("TRUE", "zoneb"),
        ("true", "nowhere"),
        ("yes", "zoneA"),
        ("true", " "),
        (None, "zoneA"),
    )
]


class Peer:
    """A blocking remoting peer on one socket: one request, its answer."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.decoder = FrameDecoder()
        self.opaque = 0

    def call(self, cmd: RemotingCommand) -> RemotingCommand:
        self.opaque += 1
        cmd.opaque = self.opaque
        self.sock.sendall(encode_command(cmd))
        while True:
            for answer in self.decoder.feed(self.sock.recv(65536)):
                if answer.is_response and answer.opaque == cmd.opaque:
                    return answer


def run_script(port: int) -> list[tuple[int, list[str], list[str]]]:
    peer = Peer(port)
    for name, addr, bid, zone, topics in BROKERS:
        peer.call(
            register_request(
                topic_configs(*topics, f"own-{name}"),
                broker_name=name,
                broker_addr=addr,
                broker_id=bid,
                zone=zone,
            )
        )
    peer.call(unregister_request(broker_name="broker-d", broker_addr="10.0.0.4:10911"))
    # Apache's name server applies unregisters in a batch after answering them: ask until the
    # address is gone, so both servers are read in the same state.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = peer.call(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {}))
        group = bodies.decode_cluster_info(info.body).broker_addr_table.get("broker-d")
        if group is not None and "10.0.0.4:10911" not in group.broker_addrs.values():
            break
        time.sleep(0.05)
    seen = []
    for topic, mode, zone in LOOKUPS:
        ext = {"topic": topic, "__ZONE_NAME": zone}
        if mode is not None:
            ext["__ZONE_MODE"] = mode
        resp = peer.call(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext))
        route = bodies.decode_route(resp.body) if resp.body else None
        seen.append(
            (
                resp.code,
                sorted(b.broker_name for b in route.broker_datas) if route else [],
                sorted(q.broker_name for q in route.queue_datas) if route else [],
            )
        )
    peer.sock.close()
    return seen


def test_zone_mode_lookups_match_apaches_name_server(tmp_path):
    with java_namesrv(LIB, tmp_path) as java_port:
        upstream = run_script(java_port)
    proc = spawn_namesrv("--listen", "127.0.0.1:0")
    try:
        for line in proc.stderr:  # type: ignore[union-attr]
            if "listening on 127.0.0.1:" in line:
                port = int(line.split("listening on 127.0.0.1:")[1].split()[0])
                break
        assert run_script(port) == upstream
    finally:
        proc.kill()
        proc.wait()
    assert any(len(names) == 2 for _code, names, _queues in upstream)  # the rule did filter
