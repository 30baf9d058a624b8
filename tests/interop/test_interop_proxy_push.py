"""Route push on a 5.x proxy: a master's failover under ``rocketmq-proxy`` with the route-push
agent, seen by the official gRPC Java client sending through it.

Real Apache 5.3.3 in controller mode (a controller, two brokers of one broker name), a
cluster-mode proxy at upstream's defaults run with ``-javaagent:`` the agent, this name server
at its defaults, ``GrpcProbe`` sending every 50 ms. The master is ``kill -9``'d 3 s after the
proxy's last route load, so without push the proxy sends to the dead master until its refresh
17 s later. With push the new master must store a send within 1 s of the kill, at most 10
sends failing (how both are established: ``support/proxy_failover.py``).

Marked ``proxy_push`` (``pytest -m proxy_push``). ``bench/proxy_failover.py`` runs more rounds,
with and without the agent. Needs what ``test_interop_proxy_warm_start.py`` needs, and Maven
for the agent.
"""

from __future__ import annotations

import pytest
from support import apache_proxy, java_agent
from support import apache_rocketmq as apache
from support.apache_controller import ControllerGroup
from support.proxy_failover import RouteLoads, failover_round

from namesrv.config import ServerConfig

pytestmark = [pytest.mark.interop, pytest.mark.proxy_push]
apache_proxy.require_jars()
CLIENT_LIB = apache_proxy.CLIENT_LIB

TOPIC = "ProxyPushTopic"
INTERVAL_MS = 50
PHASE_S = 3.0
MAX_FAILED = 10
MAX_FIRST_STORED_S = 1.0


def agent_start_line(proxy: apache_proxy.Proxy) -> str:
    """The agent's start line in the proxy's output ("route push VERSION started ...")."""
    for line in proxy.stdout.read_text(errors="replace").splitlines():
        if "route push" in line and " started " in line:
            return line
    return ""


@pytest.mark.timeout(600)
def test_with_the_agent_a_proxy_sends_to_the_new_master_within_a_second_of_the_kill(tmp_path):
    ns, port = apache.start_namesrv(
        tmp_path, wait_for_service_ms=ServerConfig().wait_for_service_ms
    )
    namesrv = f"127.0.0.1:{port}"
    group = ControllerGroup(apache.LIB, tmp_path, namesrv)
    proxy = probe = loads = None
    try:
        group.start()
        group.create_topic(TOPIC)
        assert group.in_sync(2, timeout=120), "the slave never joined the sync state set"
        jvm = (f"-javaagent:{java_agent.agent_jar()}",)
        proxy = apache_proxy.start_proxy(apache.LIB, tmp_path, namesrv, jvm=jvm)
        started = agent_start_line(proxy)
        assert started, proxy.stdout.read_text(errors="replace")[-3000:]
        assert "proxies" in started, started  # the agent says it serves proxies
        loads = RouteLoads(namesrv)
        loads.start()
        classes = apache_proxy.compile_probe(CLIENT_LIB, tmp_path / "grpc-classes")
        probe = apache_proxy.start_probe(
            CLIENT_LIB, classes, tmp_path / "probe", proxy.endpoint, TOPIC, INTERVAL_MS
        )
        assert probe.wait(lambda sends: sum(s.ok for s in sends) >= 20, 120), probe.snapshot()[-5:]

        result = failover_round(group, probe, loads, TOPIC, PHASE_S)
        print(result.line(), result.as_dict())
        assert result.first_stored_s is not None, result
        assert result.failed <= MAX_FAILED and result.first_stored_s <= MAX_FIRST_STORED_S, result
    finally:
        if loads is not None:
            loads.stopping.set()
        if probe is not None:
            probe.stop()
        if proxy is not None:
            apache.stop(proxy.proc)
        group.stop()
        apache.stop(ns)
