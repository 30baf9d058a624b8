"""Route push on a 5.x proxy: a master's failover under ``rocketmq-proxy`` with the route-push
agent, seen by the official gRPC Java client sending through it.

Real Apache 5.3.3 in controller mode (a controller, two brokers of one broker name), a
cluster-mode proxy at upstream's defaults run with ``-javaagent:`` the agent, this name server
at its defaults, ``GrpcProbe`` sending every 50 ms. The master is ``kill -9``'d 3 s after the
proxy's last route load, so without push the proxy sends to the dead master until its refresh
17 s later. With push the proxy's agent is notified, the proxy loads the route again after the
kill, and the new master stores a send after that load and before the refresh would have come
(how each is established: ``support/proxy_failover.py``). How soon, and how many sends fail,
are figures of ``bench/proxy_failover.py`` (on a quiet machine: within 1 s, none); here the
machine may be busy with anything, so only the order of events is asserted.

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
REFRESH_S = 20.0
"""The proxy's own route refresh after a load (``topicRouteServiceCacheRefreshSeconds``)."""


def agent_start_line(proxy: apache_proxy.Proxy) -> str:
    """The agent's start line in the proxy's output ("route push VERSION started ...")."""
    for line in proxy.stdout.read_text(errors="replace").splitlines():
        if "route push" in line and " started " in line:
            return line
    return ""


@pytest.mark.timeout(600)
def test_with_the_agent_a_proxy_sends_to_the_new_master_before_its_own_refresh(tmp_path):
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
        status = java_agent.agent_status(proxy.proc.pid)
        log = (tmp_path / "namesrv.log").read_text(errors="replace")[-3000:]
        assert status.count("Notifications") >= 1, (result, status.text, log)
        stored = result.first_stored_s
        assert stored is not None and stored < REFRESH_S - result.phase_s, result
        assert any(t <= stored for t in result.lookups_after_kill_s), result
    finally:
        if loads is not None:
            loads.stopping.set()
        if probe is not None:
            probe.stop()
        if proxy is not None:
            apache.stop(proxy.proc)
        group.stop()
        apache.stop(ns)
