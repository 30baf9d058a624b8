"""A real Apache RocketMQ 5.x proxy in cluster mode keeps serving gRPC clients while this name
server, restarted under it, warms up.

An Apache 5.3.3 broker and ``rocketmq-proxy`` 5.3.3 (its own config file: cluster mode, this
name server, free ports, upstream's defaults otherwise), the official gRPC Java client
(``rocketmq-client-java``, ``GrpcProbe``) sending through the proxy every 100 ms. The name
server is killed and started again on the same port with its start-up window on, so it has not
heard of the topic until the broker registers again. The proxy refreshes a cached route 20 s
after loading it (``topicRouteServiceCacheRefreshSeconds``); a refresh answered "not ready"
(SYSTEM_ERROR) fails, and the proxy keeps the route it holds, where TOPIC_NOT_EXIST would have
replaced it by an empty one. The test restarts the name server until one such refresh shows in
the proxy's log (the broker registering first, answered normally, is the other outcome; its
register period is upstream's longest, 60 s, so that is the rarer one), and counts the probe's
sends: none fails. A topic no broker serves gets the client a clear error and the proxy goes
on serving the others.

A proxy *starting* inside the window starts: the system topic it asks for at start is exempt
from the window.

Needs the 5.3.3 jars with ``rocketmq-proxy`` and the gRPC client's jar, resolved by
``tools/rocketmq_jars.py``, and a JDK. Skipped without them, except under CI.
"""

from __future__ import annotations

import signal
import time

import pytest
from support import apache_proxy
from support import apache_rocketmq as apache

from namesrv.admin.wire import AdminClient, Target
from protocol.codes import RequestCode, ResponseCode

pytestmark = pytest.mark.interop
apache_proxy.require_jars()
CLIENT_LIB = apache_proxy.CLIENT_LIB

WINDOW_MS = 600_000
"""Longer than the test: after each restart everything runs inside the window."""
TOPIC = "ProxyWarmTopic"
UNHEARD = "ProxyNeverRegistered"
INTERVAL_MS = 100
REFRESH_WAIT_S = 30.0
"""Past the proxy's 20 s refresh after its last load, which came at most 20 s before a restart."""
RESTARTS = 4
REGISTER_PERIOD_MS = 60_000
"""The broker's ``registerNameServerPeriod``, upstream's cap: its next register after a restart
comes 0-60 s later, so the proxy's refresh (at most ~20 s later) usually comes first."""


def lookup_code(port: int, topic: str) -> int:
    with AdminClient(Target("127.0.0.1", port, timeout_s=10)) as client:
        return int(client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).code)


def wait_routed(port: int, topic: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lookup_code(port, topic) == ResponseCode.SUCCESS:
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} was never routed")


def warming_refreshes(proxy: apache_proxy.Proxy) -> list[str]:
    """The proxy's failed refreshes of the topic's route that this name server answered
    "not ready" (the proxy kept its route)."""
    return [line for line in proxy.route_reload_failures(TOPIC) if "warming up" in line]


def test_grpc_sends_through_a_cluster_mode_proxy_keep_succeeding_while_the_name_server_warms_up(
    tmp_path,
):
    ns, port = apache.start_namesrv(tmp_path)
    namesrv = f"127.0.0.1:{port}"
    procs = []
    probe = None
    try:
        broker = apache.start_broker(
            tmp_path, namesrv, extra={"registerNameServerPeriod": str(REGISTER_PERIOD_MS)}
        )
        procs.append(broker.proc)
        created = apache.mqadmin(
            tmp_path, "updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", TOPIC
        )
        assert created.returncode == 0 and "success" in created.stdout, created.stdout
        wait_routed(port, TOPIC)
        proxy = apache_proxy.start_proxy(apache.LIB, tmp_path, namesrv)
        procs.append(proxy.proc)
        classes = apache_proxy.compile_probe(CLIENT_LIB, tmp_path / "grpc-classes")
        probe = apache_proxy.start_probe(
            CLIENT_LIB, classes, tmp_path / "probe", proxy.endpoint, TOPIC, INTERVAL_MS
        )
        assert probe.wait(lambda sends: sum(s.ok for s in sends) >= 10, 120), (
            probe.snapshot(),
            probe.stderr.read_text(),
        )
        first_kill_ms = time.time() * 1000

        # Restart until a refresh of the proxy's route meets the window (see the docstring).
        restarts = 0
        while not warming_refreshes(proxy) and restarts < RESTARTS:
            ns.send_signal(signal.SIGKILL)
            ns.wait()
            ns, again = apache.start_namesrv(tmp_path, port=port, wait_for_service_ms=WINDOW_MS)
            assert again == port
            restarts += 1
            deadline = time.monotonic() + REFRESH_WAIT_S
            while time.monotonic() < deadline and not warming_refreshes(proxy):
                time.sleep(0.5)
        assert warming_refreshes(proxy), (restarts, proxy.route_reload_failures(TOPIC))
        assert "CODE: 1 " in warming_refreshes(proxy)[0]  # SYSTEM_ERROR, not TOPIC_NOT_EXIST

        # A topic this name server has not heard of: a clear error for the client.
        probe.send_to(UNHEARD)
        assert probe.wait(lambda sends: any(s.topic == UNHEARD for s in sends), 60)
        (unheard,) = probe.snapshot(UNHEARD)
        assert not unheard.ok and "warming up" in unheard.detail, unheard

        # The proxy goes on serving the topic it holds a route for.
        sent = len(probe.snapshot(TOPIC))
        assert probe.wait(lambda sends: sum(s.topic == TOPIC for s in sends) >= sent + 20, 60)
        assert lookup_code(port, UNHEARD) == ResponseCode.SYSTEM_ERROR  # still warming up
        assert proxy.proc.poll() is None
        probe.stop()
        sends = probe.snapshot(TOPIC)
        after_kill = [s for s in sends if s.end_ms >= first_kill_ms]
        failed = [s for s in after_kill if not s.ok]
        ok = len(after_kill) - len(failed)
        print(f"restarts {restarts}: {ok} sends ok, {len(failed)} failed since the first kill")
        assert not failed and ok >= 20, (restarts, ok, failed[:5])
    finally:
        if probe is not None:
            probe.stop()
        for proc in reversed(procs):
            apache.stop(proc)
        apache.stop(ns)


def test_a_cluster_mode_proxy_starts_while_the_name_server_warms_up(tmp_path):
    """A proxy asks for its system topic's route (``DefaultHeartBeatSyncerTopic``) as it starts
    and creates the topic only when told it is absent: that topic is exempt from the window
    (``server.wait_for_service_exempt_topics``), so the proxy starts inside it, while a topic
    not heard of is still answered "not ready"."""
    ns, port = apache.start_namesrv(tmp_path, wait_for_service_ms=WINDOW_MS)
    namesrv = f"127.0.0.1:{port}"
    broker = None
    try:
        broker = apache.start_broker(tmp_path, namesrv)
        proxy = apache_proxy.start_proxy(apache.LIB, tmp_path, namesrv)
        try:
            assert lookup_code(port, UNHEARD) == ResponseCode.SYSTEM_ERROR  # still warming
            assert proxy.proc.poll() is None
        finally:
            apache.stop(proxy.proc)
    finally:
        if broker is not None:
            apache.stop(broker.proc)
        apache.stop(ns)
