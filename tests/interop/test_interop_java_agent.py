"""Unmodified Java RocketMQ applications, 4.9.x and 5.x clients, with the route-push agent
(``bridges/java-agent``), against this name server and real Apache brokers.

The applications poll routes only every 10 minutes here, so whatever they learn within the
test, they learned by push; one consumer without the agent shows what they would see without it.
Against Apache's own name server the agent says once that there is no push there, and the
application works as it always did.

Needs ``ROCKETMQ_LIB_DIR`` (RocketMQ 5.x broker, name server and client jars) and
``ROCKETMQ_LEGACY_LIB_DIR`` (a 4.9.x client), resolved by ``tools/rocketmq_jars.py``, a JDK and
Maven (the agent is built when missing). Skipped without them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from support import apache_rocketmq as apache
from support import java_agent
from support.hostile_namesrv import HostileNamesrv
from support.java_namesrv import java_namesrv
from support.paths import REPO_ROOT

from namesrv.admin.wire import AdminClient, Target
from protocol import bodies
from protocol.codes import RequestCode
from protocol.push_codec import encode_notification
from protocol.push_events import ChangeKind

pytestmark = pytest.mark.interop
if not apache.AVAILABLE or not java_agent.LEGACY_LIB:
    pytest.skip(
        "ROCKETMQ_LIB_DIR, ROCKETMQ_LEGACY_LIB_DIR (RocketMQ jars) and a JDK are needed",
        allow_module_level=True,
    )

TOPIC = "AgentTopic"
TICK_MS = 1000
NAMESRV_TOML = f"[push]\ntick_interval_ms = {TICK_MS}\n"
ROUND_S = 90.0
"""How long the test waits for what push must bring at once (the probes' own poll is 10 min)."""


def admin(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "namesrv.admin", "-n", f"127.0.0.1:{port}", "--json", *args],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )


def route_brokers(port: int) -> set[str]:
    """The broker names of the topic's route as this name server answers it now."""
    with AdminClient(Target("127.0.0.1", port, timeout_s=5)) as client:
        response = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    if response.code != 0:
        return set()
    return {b.broker_name for b in bodies.decode_route(response.body).broker_datas}


def subscribed_connections(port: int) -> int:
    result = admin(port, "subscriptions", "--topic", TOPIC)
    assert result.returncode == 0, result.stderr
    return len(json.loads(result.stdout)["connections"])


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout:g} s")


def create_topic(port: int, broker: apache.Broker) -> None:
    created = admin(port, "update-topic", "-b", broker.addr, "-t", TOPIC, "-r", "2", "-w", "2")
    assert created.returncode == 0, created.stderr


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """This name server (tick 1 s), Apache's 5.x name server, and broker-a registered with both."""
    work = tmp_path_factory.mktemp("agent")
    java_agent.agent_jar()
    ns, port = apache.start_namesrv(work, NAMESRV_TOML)
    with java_namesrv(apache.LIB, work / "apache-namesrv") as apache_port:
        try:
            broker = apache.start_broker(
                work, f"127.0.0.1:{port};127.0.0.1:{apache_port}", "broker-a"
            )
        except BaseException:
            apache.stop(ns)
            raise
        create_topic(port, broker)
        # The broker registers with each name server on its own: both must route the topic.
        for routed_by in (port, apache_port):
            wait_for(lambda p=routed_by: route_brokers(p) == {"broker-a"}, 60, "the topic's route")
        world = {
            "ns": ns,
            "work": work,
            "port": port,
            "apache_port": apache_port,
            "broker": broker,
            "classes5": java_agent.compile_probe(apache.LIB, work / "classes5"),
            "classes4": java_agent.compile_probe(java_agent.LEGACY_LIB, work / "classes4"),
        }
        yield world
        apache.stop(broker.proc)
    apache.stop(world["ns"])


def started(name: str, probe: java_agent.Probe) -> java_agent.Probe:
    """``probe`` once its client holds the topic's route on broker-a."""
    if probe.first(has("route", "broker-a"), ROUND_S) is None:
        probe.stop()
        raise AssertionError((name, probe.stderr()[-3000:]))
    return probe


def has(kind: str, broker: str):
    return lambda line: line.kind == kind and broker in line.value.split(",")


def test_java_clients_with_the_agent_learn_a_new_broker_by_push(world):
    port, work = world["port"], world["work"]
    namesrv = f"127.0.0.1:{port}"
    libs = {"5": (apache.LIB, world["classes5"]), "4": (java_agent.LEGACY_LIB, world["classes4"])}
    probes = {}
    plain = polling = None
    try:
        # One at a time, each once it holds the route: JVMs starting together on a busy
        # machine time out.
        for version, (lib, classes) in libs.items():
            for role in ("producer", "consumer"):
                name = f"{role}{version}"
                probes[name] = started(
                    name,
                    java_agent.start_probe(
                        name, work, lib, classes, role, namesrv, TOPIC, f"agent_{name}"
                    ),
                )
        plain = started(
            "plain",
            java_agent.start_probe(
                "plain", work, apache.LIB, world["classes5"], "consumer", namesrv, TOPIC,
                "plain_consumer", agent=None,
            ),
        )  # fmt: skip
        # Upstream's defaults, no agent: it learns by its 30 s poll.
        polling = started(
            "polling",
            java_agent.start_probe(
                "polling", work, apache.LIB, world["classes5"], "consumer", namesrv, TOPIC,
                "polling_consumer", agent=None, poll_ms=30_000,
            ),
        )  # fmt: skip
        # A round trip, not a wait: the name server lists the four agents' subscriptions.
        wait_for(lambda: subscribed_connections(port) >= 4, ROUND_S, "four subscriptions")

        broker_b = apache.start_broker(work, namesrv, "broker-b")
        try:
            create_topic(port, broker_b)
            wait_for(lambda: "broker-b" in route_brokers(port), 60, "broker-b in the route")
            routed_ms = time.time() * 1000
            seen = {}
            for name, probe in probes.items():
                line = probe.first(has("route", "broker-b"), ROUND_S)
                assert line is not None, (name, probe.stderr()[-3000:])
                seen[name] = line.at_ms
            for version in libs:
                consumer = probes[f"consumer{version}"]
                assert consumer.first(has("assigned", "broker-b"), ROUND_S), consumer.stderr()
                producer = probes[f"producer{version}"]
                assert producer.first(lambda ln: ln.kind == "sent" and ln.value == "broker-b", 30)
            # The consumer without the agent polls every 10 minutes: it still knows broker-a only.
            assert not plain.seen(has("route", "broker-b"))
            polled = polling.first(has("route", "broker-b"), 40)
            assert polled is not None, "a 30 s poll brings it"
            seen["polling (no agent)"] = polled.at_ms
            print(
                "learned broker-b after the name server routed it (ms): "
                + ", ".join(f"{n} {seen[n] - routed_ms:+.0f}" for n in sorted(seen))
            )
            for name, probe in probes.items():
                assert "attached to client" in probe.stderr(), name
                failed = [ln for ln in probe.lines if ln.kind == "fail"]
                assert not failed, (name, failed, seen, routed_ms)
            for version in libs:
                agent_status(probes[f"producer{version}"], version)
        finally:
            apache.stop(broker_b.proc)
    finally:
        for probe in [*probes.values(), *(p for p in (plain, polling) if p is not None)]:
            probe.stop()


def agent_status(probe: java_agent.Probe, version: str) -> None:
    """What an operator sees of ``probe``'s agent: its start line, and its MBean read by the
    agent jar's status command (an attach, as ``jcmd`` does)."""
    log = probe.stderr()
    start = re.search(
        r"\[routepush\] route push \S+ started as an agent for Apache RocketMQ Java clients "
        r"4\.9\.x and 5\.x and proxies 5\.1 to 5\.3; options: defaults; status: MBean "
        r"routepush:type=Agent once a client is served",
        log,
    )
    assert start, log[-3000:]
    assert "status MBean routepush:type=Agent registered" in log, log[-3000:]
    status = java_agent.agent_status(probe.proc.pid)
    print(f"client {version}.x: {start.group(0)}\n{status.text}")
    assert status.values["Clients"] == "1", status.text
    assert status.count("SubscribedTopics") >= 1, status.text
    assert status.count("Notifications") >= 1, (status.text, namesrv_log(probe))
    assert status.count("Refreshes") >= 1, status.text
    assert f"(RocketMQ client V{version}_" in status.text, status.text


def namesrv_log(probe: java_agent.Probe) -> str:
    """The end of the log of the name server the probes in ``probe``'s folder use."""
    log = probe.log.parent.parent / "namesrv.log"
    return log.read_text(errors="replace")[-3000:] if log.exists() else "(no namesrv.log)"


def test_against_apaches_name_server_the_agent_says_so_once_and_sends_work(world):
    namesrv = f"127.0.0.1:{world['apache_port']}"
    probe = java_agent.start_probe(
        "apache-producer", world["work"], apache.LIB, world["classes5"], "producer", namesrv,
        TOPIC, "agent_apache", poll_ms=30_000,
    )  # fmt: skip
    try:
        fifth = probe.first(lambda ln: ln.kind == "sent" and len(sent_lines(probe)) >= 5, ROUND_S)
        assert fifth is not None, probe.stderr()[-3000:]
        # The agent's subscription was answered (not supported) before a further scan: a round
        # trip through the client's own connection, shown by the log line.
        log = wait_for(lambda: "has no route push" in probe.stderr() and probe.stderr(), 30, "log")
        assert log.count("has no route push") == 1
        assert not any(ln.kind == "fail" for ln in probe.lines), probe.lines
        assert "WARNING" not in log, log
    finally:
        probe.stop()


def sent_lines(probe: java_agent.Probe) -> list[java_agent.Line]:
    with probe.cond:
        return [ln for ln in probe.lines if ln.kind == "sent"]


def test_the_agent_subscribes_again_after_the_name_server_restarts(world):
    """The client asks nothing for 10 minutes: only the agent notices the lost connection,
    reconnects through the client and subscribes at the restarted server (a new epoch)."""
    port, work = world["port"], world["work"]
    probe = started(
        "restart",
        java_agent.start_probe(
            "restart", work, apache.LIB, world["classes5"], "consumer", f"127.0.0.1:{port}",
            TOPIC, "agent_restart",
        ),
    )  # fmt: skip
    try:
        wait_for(lambda: subscribed_connections(port) >= 1, ROUND_S, "the agent's subscription")
        apache.stop(world["ns"])
        world["ns"], again = apache.start_namesrv(work, NAMESRV_TOML, port=port)
        assert again == port
        wait_for(lambda: subscribed_connections(port) >= 1, ROUND_S, "subscribed again")
        # How the agent learns of the loss depends on timing (its watch of the connection, or
        # a SUBSCRIBE that finds it gone); either way it names the new epoch once subscribed.
        wait_for(lambda: "refetching held topics" in probe.stderr(), 30, "the new epoch seen")
        assert "subscribing again" in probe.stderr() or "retrying in" in probe.stderr()
        time.sleep(2)  # the resync's refreshes (spread over 1 s) have run
        # The client kept its route throughout: the agent never empties one.
        assert not probe.seen(lambda ln: ln.kind == "route" and ln.value == ""), probe.lines
    finally:
        probe.stop()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_a_hostile_name_server_costs_the_application_only_the_agents_bounds(world):
    """A name server that floods the agent: frames naming 20,000 topics the application never
    used (fresh names each frame), DELETED and UNROUTED for the topic it sends to, GO_AWAY
    reasons holding forged log lines, frames of 8 MiB. The application keeps sending on the
    route it holds, nothing made up is looked up, and the log gets a few escaped lines."""
    # A restart in an earlier test: the broker registers again within its 30 s period.
    wait_for(lambda: route_brokers(world["port"]) == {"broker-a"}, 60, "the topic's route")
    with AdminClient(Target("127.0.0.1", world["port"], timeout_s=5)) as client:
        honest = client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    assert honest.code == 0
    ns = HostileNamesrv(TOPIC, honest.body)
    probe = java_agent.start_probe(
        "hostile", world["work"], apache.LIB, world["classes5"], "producer", ns.addr, TOPIC,
        "agent_hostile",
    )  # fmt: skip
    try:
        started("hostile", probe)
        wait_for(lambda: ns.subscribers, ROUND_S, "the agent's subscription")
        rss_before = rss_kib(probe.proc.pid)
        code = int(RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED)
        sequence = 0
        for frame in range(50):
            sequence += 1
            ghosts = [(f"ghost-{frame}-{i}", 5, 0) for i in range(20_000)]
            ns.push(code, encode_notification(ghosts, sequence, 1_000, ns.epoch))
        for kind in (ChangeKind.DELETED, ChangeKind.UNROUTED):
            sequence += 1
            ns.push(
                code, encode_notification([(TOPIC, 10 + sequence, kind)], sequence, 1_000, ns.epoch)
            )
        for _ in range(2_000):
            ns.go_away("\nSEVERE: FORGED")
        big = os.urandom(8 << 20)
        for _ in range(16):
            ns.push(code, big)
        attacked_at = time.time() * 1000
        # The application goes on sending on the route it holds.
        after = wait_for(
            lambda: len([ln for ln in sent_lines(probe) if ln.at_ms > attacked_at + 3_000]) >= 5,
            ROUND_S,
            "sends after the attack",
        )
        assert after
        rss_after = rss_kib(probe.proc.pid)
        log = probe.stderr()
        print(
            f"hostile name server: RSS {rss_before // 1024} -> {rss_after // 1024} MiB; "
            f"{log.count('[routepush]')} agent lines; lookups {dict(ns.lookups)}"
        )
        assert not [ln for ln in probe.lines if ln.kind == "fail"], probe.lines[-20:]
        assert [ln.value for ln in probe.lines if ln.kind == "route"][-1] == "broker-a"
        assert not [t for t in ns.lookups if t.startswith("ghost-")], ns.lookups
        assert not [line for line in log.splitlines() if line.startswith("SEVERE: FORGED")], log
        assert "\\nSEVERE: FORGED" in log, log
        assert log.count("[routepush]") <= 20, log
    finally:
        probe.stop()
        ns.close()
